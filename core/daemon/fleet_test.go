package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/retain-dev/retain/adapters/localfs"
	"github.com/retain-dev/retain/core/storage"
)

// Replicas start on different stores, each in an order stable from round
// to round and undisturbed (but for the new one) when a store is added.
func TestOrderSpreadsReplicas(t *testing.T) {
	var stores []string
	for i := range 20 {
		stores = append(stores, fmt.Sprintf("s3://b/tenants/s%02d", i))
	}
	firsts := map[string]bool{}
	for _, id := range []string{"retain-0", "retain-1", "retain-2"} {
		o := Order(id, stores)
		if !slices.Equal(o, Order(id, stores)) {
			t.Fatalf("%s: order not stable", id)
		}
		firsts[o[0]] = true
		more := Order(id, append(slices.Clone(stores), "s3://b/tenants/new"))
		if !slices.Equal(slices.DeleteFunc(more, func(s string) bool { return s == "s3://b/tenants/new" }), o) {
			t.Fatalf("%s: adding a store reshuffled the others", id)
		}
	}
	if len(firsts) < 2 {
		t.Fatalf("three replicas all start on %v", firsts)
	}
}

// stores, discover and concurrency parse, a bad one names its line, and
// identity is refused: a file replicas share cannot name one of them.
func TestConfigFleetKeys(t *testing.T) {
	c, err := ParseConfig("f.yaml", []byte("stores: [\"s3://b/a\", \"file:///x\"]\ndiscover:\n  - s3://b/tenants\nconcurrency: 8\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.Stores, []string{"s3://b/a", "file:///x"}) || !slices.Equal(c.Discover, []string{"s3://b/tenants"}) || c.Concurrency != 8 {
		t.Fatalf("parsed %+v", c)
	}
	for text, want := range map[string]string{
		"stores: s3://b/a\n":               "f.yaml:1: stores must be a list of store URIs",
		"interval: 1h\nconcurrency: 0.5\n": "f.yaml:2: concurrency must be a whole number",
		"concurrency: 1000\n":              "f.yaml:1: concurrency must be between 1 and 256",
		"discover: [\"\"]\n":               "f.yaml:1: every entry of discover must be a store URI",
		"identity: retain-0\n":             `f.yaml:1: unknown key "identity": a replica names itself with --identity NAME`,
	} {
		_, err := ParseConfig("f.yaml", []byte(text))
		if err == nil || !errors.Is(err, storage.ErrInvalidArgument) || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: got %v, want %q", text, err, want)
		}
	}
}

// A child is a store when it holds _retain/ or a Lance table; anything
// else under the prefix is not.
func TestDiscoverStores(t *testing.T) {
	dir := t.TempDir()
	for _, p := range []string{"a/_retain/registry/x", "b/events.lance/_versions/1.manifest", "c/readme.txt", "d/e/f.lance/x", "top.txt"} {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	d, err := localfs.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	s, err := storage.NewStore(context.Background(), "localfs", d)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := DiscoverStores(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("discovered %v, want [a b]", got)
	}
	u, err := ChildURI("s3://bucket/tenants?region=x", "a")
	if err != nil || u != "s3://bucket/tenants/a?region=x" {
		t.Fatalf("ChildURI: %q %v", u, err)
	}
}

// One store spelled two ways is one store in a round (its two passes
// would race each other for its claim), and a discovery that fails is a
// failure of the round and of the fleet, even with no store found.
func TestFleetStoresOnceAndDiscoveryFailing(t *testing.T) {
	dir := t.TempDir()
	f := &Fleet{Stores: []string{dir, "file://" + dir, dir + "/"},
		Config: Config{Discover: []string{"s3://nowhere/tenants"}},
		Open: func(ctx context.Context, uri string) (*storage.Store, error) {
			return nil, storage.Errorf("open", uri, storage.ErrPermissionDenied, "no credentials")
		}}
	rep := f.Round(context.Background())
	if len(rep.Stores) != 1 {
		t.Fatalf("%d passes for one store spelled three ways: %+v", len(rep.Stores), rep.Stores)
	}
	if len(rep.DiscoverErrors) != 1 || f.lastErr() == nil || !strings.Contains(f.lastErr().Error(), "discover s3://nowhere/tenants") {
		t.Fatalf("discovery failure not reported: %v / %v", rep.DiscoverErrors, f.lastErr())
	}
}
