package checkpoint

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/retain-dev/retain/core/checkpoint/registry"
	"github.com/retain-dev/retain/core/storage"
)

func TestDiscoverTables(t *testing.T) {
	s, _, _ := localStore(t, "v2-appends", "branch-tag", "v1-naming")
	if _, err := s.PutBytes(bg, "notes.txt", []byte("x"), storage.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutBytes(bg, "other/x.lance/y", []byte("x"), storage.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := DiscoverTables(bg, s)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"branch-tag.lance", "v1-naming.lance", "v2-appends.lance"}
	if len(got) != len(want) {
		t.Fatalf("got %v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %v", got)
		}
	}
}

func checkCreated(t *testing.T, s *storage.Store, c *Created, want map[string]uint64) {
	t.Helper()
	if len(c.Tables) != len(want) {
		t.Fatalf("tables %+v", c.Tables)
	}
	for _, ct := range c.Tables {
		if want[ct.Path] != ct.Version {
			t.Errorf("%s: version %d, want %d", ct.Path, ct.Version, want[ct.Path])
		}
		tg, ok := pinTags(t, s, ct.Path)[ct.Tag]
		if !ok || tg.Version != ct.Version {
			t.Errorf("%s: tag %s missing or wrong: %+v", ct.Path, ct.Tag, tg)
		}
	}
	if _, ok := pinTags(t, s, registry.RegistryPath)[c.RegistryPinTag]; !ok {
		t.Errorf("registry pin %s missing", c.RegistryPinTag)
	}
	v, snap := head(t, s)
	if v != c.RegistryVersion {
		t.Fatalf("head %d, created at %d", v, c.RegistryVersion)
	}
	cp, err := snap.ByName(c.Name)
	if err != nil || cp.ID != c.ID || len(cp.Rows) != len(want) || cp.RegistryVersion != v {
		t.Fatalf("registry: %+v %v", cp, err)
	}
	noSidecars(t, s)
}

func TestCreateLocalAndMem(t *testing.T) {
	for _, kind := range []string{"localfs", "memstore"} {
		t.Run(kind, func(t *testing.T) {
			var s *storage.Store
			if kind == "localfs" {
				s, _, _ = localStore(t, "v2-appends", "branch-tag")
			} else {
				s, _ = memStore(t, "v2-appends", "branch-tag")
			}
			c, err := Create(bg, s, "nightly/1", "")
			if err != nil {
				t.Fatal(err)
			}
			checkCreated(t, s, c, map[string]uint64{"v2-appends.lance": 3, "branch-tag.lance": 3})
			if _, err := Create(bg, s, "nightly/1", ""); !errors.Is(err, registry.ErrNameTaken) || !errors.Is(err, storage.ErrAlreadyExists) {
				t.Fatalf("taken name: %v", err)
			}
			c2, err := Create(bg, s, "nightly/2", "")
			if err != nil {
				t.Fatal(err)
			}
			_, snap := head(t, s)
			if len(snap.Tables) != 2 || c2.Tables[0].TableID != c.Tables[0].TableID || c2.Tables[0].NewTable {
				t.Fatalf("catalog not stable: %+v / %+v", snap.Tables, c2.Tables)
			}
		})
	}
}

func TestCreateOnBranch(t *testing.T) {
	s, _, _ := localStore(t, "branch-tag")
	c, err := Create(bg, s, "exp-cp", "exp")
	if err != nil {
		t.Fatal(err)
	}
	checkCreated(t, s, c, map[string]uint64{"branch-tag.lance": 4})
	s2, _, _ := localStore(t, "branch-tag", "v2-appends")
	if _, err := Create(bg, s2, "exp-cp", "exp"); !errors.Is(err, ErrMissingTarget) {
		t.Fatalf("a table without the branch: %v", err)
	}
	noSidecars(t, s2)
}

func TestCreateEmptyStoreAndBadName(t *testing.T) {
	s, _, _ := localStore(t)
	if _, err := Create(bg, s, "x", ""); !errors.Is(err, ErrNoTables) {
		t.Fatalf("empty: %v", err)
	}
	if _, err := Create(bg, s, "ogcp_x", ""); !errors.Is(err, registry.ErrInvalidName) {
		t.Fatalf("reserved: %v", err)
	}
}

// TestCreateBranchGoneDuringTagsRollsBack: the branch's file goes (a
// branch delete begins) after the branch was captured and revalidated,
// while its pins are being written. The heads read after the tags find
// the branch missing: create rolls its tags and sidecar back rather than
// leave pins on a branch being deleted, and the next attempt refuses with
// ErrMissingTarget.
func TestCreateBranchGoneDuringTagsRollsBack(t *testing.T) {
	s, _, dir := localStore(t, "branch-tag")
	testHookBeforeTags = func() {
		testHookBeforeTags = nil
		if err := os.Remove(filepath.Join(dir, "branch-tag.lance", "_refs", "branches", "exp.json")); err != nil {
			panic(err)
		}
	}
	defer func() { testHookBeforeTags = nil }()
	_, err := Create(bg, s, "exp-cp", "exp")
	if !errors.Is(err, ErrMissingTarget) {
		t.Fatalf("a branch whose file went during the tags: %v, want ErrMissingTarget", err)
	}
	if v, _ := head(t, s); v != 0 {
		t.Fatalf("published registry version %d", v)
	}
	if tags := pinTags(t, s, "branch-tag.lance"); len(tags) != 0 {
		t.Fatalf("pins left on the branch being deleted: %v", tags)
	}
	if tags := pinTags(t, s, registry.RegistryPath); len(tags) != 0 {
		t.Fatalf("registry pin left: %v", tags)
	}
	noSidecars(t, s)
}

// FreshName refuses a name a deleted checkpoint had; without it the name
// is reused at the next generation.
func TestCreateFreshNameRefusesADeletedName(t *testing.T) {
	s, _ := memStore(t, "v2-appends")
	if _, err := Create(bg, s, "slot/1", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := Delete(bg, s, "slot/1"); err != nil {
		t.Fatal(err)
	}
	v0, _ := head(t, s)
	if _, err := (Options{FreshName: true}).Create(bg, s, "slot/1", ""); !errors.Is(err, registry.ErrNameTombstoned) || !errors.Is(err, storage.ErrAlreadyExists) {
		t.Fatalf("fresh name: %v, want ErrNameTombstoned", err)
	}
	if v, _ := head(t, s); v != v0 {
		t.Fatal("a refused create committed")
	}
	if len(pinTags(t, s, "v2-appends.lance")) != 0 {
		t.Fatal("a refused create left pins")
	}
	if _, err := Create(bg, s, "slot/1", ""); err != nil {
		t.Fatalf("reuse without FreshName: %v", err)
	}
}
