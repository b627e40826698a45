package storage_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/memstore"
	"github.com/retain-dev/retain/core/storage/storagetest"
)

func TestValidateKey(t *testing.T) {
	good := []string{"a", "a/b", "dir/file.lance", "_versions/1.manifest", "é/ü", strings.Repeat("k", storage.MaxKeyBytes)}
	for _, k := range good {
		if err := storage.ValidateKey("put", k); err != nil {
			t.Errorf("%q: unexpected %v", k, err)
		}
	}
	bad := map[string]string{
		"":         "empty",
		"/a":       "leading",
		"a//b":     "empty segment",
		"a/":       "empty segment",
		"./a":      `"."`,
		"a/../b":   `".."`,
		"a\x00b":   "NUL",
		"a\nb":     "control",
		"a\u0085b": "control",
		`a\b`:      "backslash",
		"\xff":     "UTF-8",
		strings.Repeat("k", storage.MaxKeyBytes+1): "1024",
	}
	for k, rule := range bad {
		err := storage.ValidateKey("put", k)
		if !errors.Is(err, storage.ErrInvalidArgument) {
			t.Errorf("%q: want invalid argument, got %v", k, err)
			continue
		}
		if !strings.Contains(err.Error(), rule) {
			t.Errorf("%q: message %q does not name the rule %q", k, err, rule)
		}
	}
	if err := storage.ValidatePrefix("list", "a/"); err != nil {
		t.Errorf("prefix a/: %v", err)
	}
}

func TestErrorKinds(t *testing.T) {
	cause := context.DeadlineExceeded
	err := storage.Wrap("get", "k", storage.ErrTransient, cause)
	if !errors.Is(err, storage.ErrTransient) || !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("errors.Is broken for %v", err)
	}
	if storage.KindOf(err) != storage.ErrTransient {
		t.Fatal("KindOf")
	}
	inner := storage.Errorf("stat", "k", storage.ErrNotFound, "gone")
	if storage.KindOf(storage.Wrap("get", "k", storage.ErrUnknown, inner)) != storage.ErrNotFound {
		t.Fatal("Wrap with unknown must keep the cause's kind")
	}
	if storage.KindOf(io.EOF) != storage.ErrUnknown {
		t.Fatal("a foreign error is unknown")
	}
}

func TestRequire(t *testing.T) {
	caps := storage.Capabilities{
		CreateIfAbsent:   storage.Capability{Level: storage.LevelNative},
		ReplaceIfVersion: storage.Capability{Level: storage.LevelGated, Gate: "stripe", Scope: storage.ScopeHost},
		DeleteIfVersion:  storage.Capability{Level: storage.LevelNone, Reason: "no conditional delete"},
		Gates:            []storage.GateSpec{{Name: "b", Scope: storage.ScopeHost}, {Name: "a", Scope: storage.ScopeGlobal}},
	}
	if err := caps.Require("x", storage.FeatureCreateIfAbsent, storage.ScopeGlobal); err != nil {
		t.Fatal(err)
	}
	if err := caps.Require("x", storage.FeatureReplaceIfVersion, storage.ScopeHost); err != nil {
		t.Fatal(err)
	}
	err := caps.Require("x", storage.FeatureReplaceIfVersion, storage.ScopeGlobal)
	if !errors.Is(err, storage.ErrUnsupported) || !strings.Contains(err.Error(), "replace-if-version") {
		t.Fatalf("gated(host) must not satisfy global: %v", err)
	}
	err = caps.Require("x", storage.FeatureDeleteIfVersion, storage.ScopeProcess)
	if !errors.Is(err, storage.ErrUnsupported) || !strings.Contains(err.Error(), "no conditional delete") {
		t.Fatalf("none: %v", err)
	}
	order, err := caps.RequireGates("x", storage.ScopeHost, "b", "a", "b")
	if err != nil || strings.Join(order, ",") != "a,b" {
		t.Fatalf("canonical order: %v %v", order, err)
	}
	if _, err := caps.RequireGates("x", storage.ScopeGlobal, "a", "b"); !errors.Is(err, storage.ErrUnsupported) || !strings.Contains(err.Error(), `"b"`) {
		t.Fatalf("gate b is host-scoped: %v", err)
	}
}

func TestParseLocation(t *testing.T) {
	cases := map[string]storage.Location{
		"file:///data/x/": {Scheme: "file", Path: "/data/x"},
		"/data/y":         {Scheme: "file", Path: "/data/y"},
		"s3://bkt/a/b/":   {Scheme: "s3", Bucket: "bkt", Prefix: "a/b"},
		"gs://bkt":        {Scheme: "gs", Bucket: "bkt"},
	}
	for in, want := range cases {
		got, err := storage.ParseLocation(in)
		if err != nil || got.Scheme != want.Scheme || got.Path != want.Path || got.Bucket != want.Bucket || got.Prefix != want.Prefix {
			t.Errorf("%s: got %+v %v", in, got, err)
		}
	}
	loc, err := storage.ParseLocation("s3://b/p?endpoint=http://127.0.0.1:9000&region=x")
	if err != nil || loc.Options["endpoint"] != "http://127.0.0.1:9000" {
		t.Fatalf("options: %+v %v", loc, err)
	}
	if back, _ := storage.ParseLocation(loc.String()); back.Options["region"] != "x" || back.Bucket != "b" {
		t.Fatalf("round trip %s -> %+v", loc, back)
	}
	if got, _ := storage.ParseLocation("file:///tmp/x"); got.String() != "file:///tmp/x" {
		t.Fatalf("file round trip: %s", got)
	}
	for _, bad := range []string{"", "file://host/x", "file:relative", "s3:///nobucket", "s3://b/a//b"} {
		if _, err := storage.ParseLocation(bad); !errors.Is(err, storage.ErrInvalidArgument) {
			t.Errorf("%q: want invalid argument, got %v", bad, err)
		}
	}
}

// liar wraps a real driver and breaks one promise.
type liar struct {
	storage.Driver
	list func(storage.ListPage) storage.ListPage
}

func (l liar) List(ctx context.Context, o storage.ListOptions) (storage.ListPage, error) {
	p, err := l.Driver.List(ctx, o)
	return l.list(p), err
}

func TestStoreCatchesLyingList(t *testing.T) {
	ctx := context.Background()
	mem := memstore.New()
	for _, k := range []string{"p/a", "p/b", "p/c"} {
		if _, err := mem.Put(ctx, k, strings.NewReader(k), storage.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	lies := map[string]func(storage.ListPage) storage.ListPage{
		"unordered": func(p storage.ListPage) storage.ListPage {
			p.Objects[0], p.Objects[1] = p.Objects[1], p.Objects[0]
			return p
		},
		"outside prefix": func(p storage.ListPage) storage.ListPage {
			p.Objects = append(p.Objects, storage.Info{Key: "q/zzz"})
			return p
		},
		"empty page claiming more": func(p storage.ListPage) storage.ListPage { return storage.ListPage{More: true} },
	}
	for name, lie := range lies {
		s, err := storage.NewStore(ctx, "liar", liar{mem, lie})
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.List(ctx, "p/", 0)
		if !errors.Is(err, storage.ErrUnknown) || !strings.Contains(err.Error(), "broke the storage contract") {
			t.Errorf("%s: want a contract violation, got %v", name, err)
		}
	}
}

// shortBody declares a size its body does not have.
type shortBody struct{ storage.Driver }

func (s shortBody) Get(ctx context.Context, key string) (*storage.Reader, error) {
	r, err := s.Driver.Get(ctx, key)
	if err == nil {
		r.Info.Size += 10
	}
	return r, err
}

func TestStoreRefusesShortBody(t *testing.T) {
	ctx := context.Background()
	mem := memstore.New()
	mem.Put(ctx, "k", strings.NewReader("hello"), storage.PutOptions{})
	s, _ := storage.NewStore(ctx, "short", shortBody{mem})
	if _, _, err := s.ReadAll(ctx, "k"); err == nil || !strings.Contains(err.Error(), "short") {
		t.Fatalf("a body shorter than declared must fail, got %v", err)
	}
}

// declareNone declares every conditional operation none.
func declareNone(c *storage.Capabilities) { *c = storage.Capabilities{} }

func TestStoreRefusesUndeclaredModes(t *testing.T) {
	ctx := context.Background()
	mem := memstore.New()
	s, _ := storage.NewStore(ctx, "none", &storagetest.Caps{Driver: mem, Edit: declareNone})
	_, err := s.PutBytes(ctx, "k", []byte("x"), storage.PutOptions{Mode: storage.PutCreateIfAbsent})
	if !errors.Is(err, storage.ErrUnsupported) {
		t.Fatalf("create-if-absent on none: %v", err)
	}
	if _, err := mem.Stat(ctx, "k"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatal("the portable store wrote through a capability declared none")
	}
	if err := s.Delete(ctx, "k", storage.DeleteOptions{IfVersion: "v"}); !errors.Is(err, storage.ErrUnsupported) {
		t.Fatalf("delete-if-version on none: %v", err)
	}
}
