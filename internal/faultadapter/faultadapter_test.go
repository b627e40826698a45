package faultadapter

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/claim"
	"github.com/retain-dev/retain/pluginproto"
)

func TestFaultAdapterLeasePrefixHoldsTheClaim(t *testing.T) {
	if !strings.HasPrefix(claim.Key, LeasePrefix) {
		t.Fatalf("claim key %q is not under %q: faults would hit the claim", claim.Key, LeasePrefix)
	}
}

func TestFaultAdapterConfigFromEnv(t *testing.T) {
	for _, k := range []string{EnvSeed, EnvRate, EnvMaxSpike, EnvFailDeletes, EnvState, EnvClaim} {
		t.Setenv(k, "")
	}
	c, err := ConfigFromEnv()
	if err != nil || c.Seed != 1 || c.Rate != 0 || c.FailDeletes != 0 || c.Claim {
		t.Fatalf("defaults: %+v %v", c, err)
	}
	t.Setenv(EnvSeed, "42")
	t.Setenv(EnvRate, "0.25")
	t.Setenv(EnvFailDeletes, "3")
	t.Setenv(EnvState, "/x/state")
	t.Setenv(EnvClaim, "1")
	c, err = ConfigFromEnv()
	if err != nil || c.Seed != 42 || c.Rate != 0.25 || c.FailDeletes != 3 || c.StatePath != "/x/state" || !c.Claim {
		t.Fatalf("set: %+v %v", c, err)
	}
	for k, v := range map[string]string{EnvRate: "2", EnvFailDeletes: "-1", EnvSeed: "x", EnvClaim: "yes", EnvMaxSpike: "soon"} {
		t.Run(k, func(t *testing.T) {
			t.Setenv(k, v)
			_, err := ConfigFromEnv()
			if !errors.Is(err, storage.ErrInvalidArgument) || !strings.Contains(err.Error(), k) {
				t.Fatalf("%s=%s: %v", k, v, err)
			}
			// The adapter reports it at Open.
			if _, err := FromEnv().Open(context.Background(), storage.Location{Scheme: "file", Path: t.TempDir()}); !errors.Is(err, storage.ErrInvalidArgument) {
				t.Fatalf("Open with %s=%s: %v", k, v, err)
			}
		})
	}
}

func open(t *testing.T, dir string, cfg Config) *storage.Store {
	t.Helper()
	ctx := context.Background()
	d, err := New(cfg).Open(ctx, storage.Location{Scheme: "file", Path: dir})
	if err != nil {
		t.Fatal(err)
	}
	s, err := storage.NewStore(ctx, Name, d)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// The first N deletes fail, counted in the state file across "restarts"
// (separate opens with their own counters); claim keys never fail.
func TestFaultAdapterFailDeletesAcrossRestarts(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	cfg := Config{FailDeletes: 3, StatePath: t.TempDir() + "/state.json"}
	put := func(s *storage.Store, keys ...string) {
		for _, k := range keys {
			if _, err := s.PutBytes(ctx, k, []byte(k), storage.PutOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	first := open(t, dir, cfg)
	put(first, "a", "b", LeasePrefix+"retention.json")
	// A claim key is spared while deletes fail.
	if err := first.Delete(ctx, LeasePrefix+"retention.json", storage.DeleteOptions{}); err != nil {
		t.Fatalf("claim delete: %v", err)
	}
	if err := first.Delete(ctx, "a", storage.DeleteOptions{}); !errors.Is(err, storage.ErrTransient) || !strings.Contains(err.Error(), "injected fault 1 of 3") {
		t.Fatalf("first delete: %v", err)
	}
	// A mixed batch: the claim key goes, the other fails (fault 2).
	put(first, LeasePrefix+"retention.json")
	res, err := first.Driver().DeleteMany(ctx, []string{LeasePrefix + "retention.json", "a"})
	if err != nil || len(res) != 2 || res[0].Err != nil || !errors.Is(res[1].Err, storage.ErrTransient) {
		t.Fatalf("mixed batch: %+v %v", res, err)
	}
	if _, err := first.Stat(ctx, LeasePrefix+"retention.json"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("claim key of the mixed batch not deleted: %v", err)
	}

	second := open(t, dir, cfg) // a new plugin process
	if _, err := second.DeleteMany(ctx, []string{"a", "b"}); !errors.Is(err, storage.ErrTransient) || !strings.Contains(err.Error(), "injected fault 3 of 3") {
		t.Fatalf("third delete, after a restart: %v", err)
	}
	if st, err := ReadState(cfg.StatePath); err != nil || st.FailedDeletes != 3 {
		t.Fatalf("state %+v %v", st, err)
	}
	third := open(t, dir, cfg)
	if _, err := third.DeleteMany(ctx, []string{"a", "b"}); err != nil {
		t.Fatalf("after the faults: %v", err)
	}
	if _, err := third.Stat(ctx, "a"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("a survived: %v", err)
	}

	// Without a state file each open counts from zero.
	mem := Config{FailDeletes: 1}
	for range 2 {
		s := open(t, dir, mem)
		put(s, "c")
		if err := s.Delete(ctx, "c", storage.DeleteOptions{}); !errors.Is(err, storage.ErrTransient) {
			t.Fatalf("in-memory count: %v", err)
		}
		if err := s.Delete(ctx, "c", storage.DeleteOptions{}); err != nil {
			t.Fatalf("second delete: %v", err)
		}
	}
}

// Random faults spare the claim unless asked, and a read-only open stays
// read-only under the wrapper.
func TestFaultAdapterRandomFaultsAndReadOnly(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := open(t, dir, Config{Seed: 3, Rate: 1})
	failed := 0
	for range 30 {
		if _, err := s.PutBytes(ctx, LeasePrefix+"x", []byte("x"), storage.PutOptions{}); err != nil {
			t.Fatalf("claim key under faults: %v", err)
		}
		if _, err := s.PutBytes(ctx, "k", []byte("x"), storage.PutOptions{}); err != nil {
			if !errors.Is(err, storage.ErrTransient) {
				t.Fatalf("fault kind: %v", err)
			}
			failed++
		}
	}
	if failed == 0 {
		t.Fatal("rate 1 injected no failure in 30 puts")
	}
	claimed := open(t, dir, Config{Seed: 3, Rate: 1, Claim: true})
	hit := false
	for range 30 {
		if _, err := claimed.PutBytes(ctx, LeasePrefix+"x", []byte("x"), storage.PutOptions{}); err != nil {
			hit = true
		}
	}
	if !hit {
		t.Fatal("RETAIN_FAULT_CLAIM=1 spared the claim")
	}

	d, err := New(Config{FailDeletes: 5}).Open(ctx, storage.Location{Scheme: "file", Path: dir, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	caps, err := d.Capabilities(ctx)
	if err != nil || !caps.ReadOnly {
		t.Fatalf("read-only open: %+v %v", caps, err)
	}
}

// The built binary is a plugin, and the host's environment reaches it.
func TestFaultAdapterBuildServesThroughPlugin(t *testing.T) {
	bin := Build(t)
	if Build(t) != bin {
		t.Fatal("Build built twice")
	}
	t.Setenv(EnvFailDeletes, "1")
	t.Setenv(EnvState, "")
	ctx := context.Background()
	c, err := pluginproto.Launch(ctx, pluginproto.LaunchConfig{Path: bin, Location: storage.Location{Scheme: "file", Path: t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	s, err := storage.NewStore(ctx, Name, c)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.PutBytes(ctx, "k", []byte("v"), storage.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "k", storage.DeleteOptions{}); !errors.Is(err, storage.ErrTransient) || !strings.Contains(err.Error(), "injected fault 1 of 1") {
		t.Fatalf("first delete through the plugin: %v", err)
	}
	if err := s.Delete(ctx, "k", storage.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestMain(m *testing.M) {
	code := m.Run()
	Cleanup()
	os.Exit(code)
}
