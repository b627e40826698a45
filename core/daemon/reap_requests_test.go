package daemon

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/retain-dev/retain/adapters/localfs"
	"github.com/retain-dev/retain/core/checkpoint"
	"github.com/retain-dev/retain/core/checkpoint/registry"
	"github.com/retain-dev/retain/core/lance"
	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/storagetest"
)

// TestReapersTakeTheReconcilesRefs: the lease, tag and branch reapers of a
// pass read the tables and refs the pass's reconcile read, so a pass with
// nothing expired lists each table's _refs/ only for the two reconciles
// (the pass's and the cleanup run's under its claim), not twice more.
func TestReapersTakeTheReconcilesRefs(t *testing.T) {
	dir, _, loc := store(t, "v2-appends", "branch-tag")
	var mu sync.Mutex
	lists := map[string]int{}
	s := watchedStore(t, dir, func(c storagetest.Call) {
		if c.Op == storagetest.OpList {
			mu.Lock()
			lists[c.Key]++
			mu.Unlock()
		}
	})
	dm := &Daemon{Store: s.At(loc), Config: cfg(t, "retention:\n  keep_last: 1\n  writers_stopped: true\n")}
	if r := dm.Pass(bg); !r.RetentionCompleted || r.Leases == nil || r.Branches == nil {
		t.Fatalf("pass: %+v", r)
	}
	for _, table := range []string{"v2-appends.lance", "branch-tag.lance"} {
		refs := 0
		for k, n := range lists {
			if strings.HasPrefix(k, filepath.Join(table, "_refs")) {
				refs += n
			}
		}
		if refs != 2 {
			t.Errorf("%s: _refs/ listed %d times in a pass, want 2 (the two reconciles): %v", table, refs, lists)
		}
	}
}

// TestScheduleTakesTheReconcilesHead: a pass whose slot is taken reads the
// registry head no more often than a pass with no schedule: the schedules
// judge on the head the pass's reconcile read.
func TestScheduleTakesTheReconcilesHead(t *testing.T) {
	dir, _, loc := store(t, "v2-appends")
	var mu sync.Mutex
	heads := 0
	s := watchedStore(t, dir, func(c storagetest.Call) {
		if c.Op == storagetest.OpList && c.Key == "_retain/registry/versions/" {
			mu.Lock()
			heads++
			mu.Unlock()
		}
	})
	const base = "retention:\n  keep_last: 1\n  writers_stopped: true\n"
	sched := cfg(t, base+"checkpoints:\n  - name: \"hourly/{{.Time}}\"\n    every: 1h\n    keep: {last: 3}\n")
	count := func(c Config) int {
		mu.Lock()
		heads = 0
		mu.Unlock()
		if r := (&Daemon{Store: s.At(loc), Config: c}).Pass(bg); !r.RetentionCompleted {
			t.Fatalf("pass: %+v", r)
		}
		mu.Lock()
		defer mu.Unlock()
		return heads
	}
	count(sched) // takes the slot
	count(sched) // settles what the first left
	with, without := count(sched), count(cfg(t, base))
	if with != without {
		t.Errorf("a pass whose slot is taken read the registry head %d times, one without schedules %d", with, without)
	}
}

// TestPassesReadUnchangedPinsOnce: a daemon remembers the ref files it
// read by their tokens, so a later pass over unchanged checkpoints reads
// no pin tag again, however many live checkpoints pin the tables.
func TestPassesReadUnchangedPinsOnce(t *testing.T) {
	dir, _, loc := store(t, "v2-appends", "branch-tag")
	var mu sync.Mutex
	reads := 0
	s := watchedStore(t, dir, func(c storagetest.Call) {
		if c.Op == storagetest.OpGet && strings.Contains(c.Key, "/_refs/tags/") {
			mu.Lock()
			reads++
			mu.Unlock()
		}
	})
	for _, n := range []string{"a", "b", "c", "d"} {
		if _, err := checkpoint.Create(bg, s.At(loc), n, ""); err != nil {
			t.Fatal(err)
		}
	}
	dm := &Daemon{Store: s.At(loc), Config: cfg(t, "retention:\n  keep_last: 1\n  every: 1ms\n  writers_stopped: true\n")}
	count := func() int {
		mu.Lock()
		reads = 0
		mu.Unlock()
		if r := dm.Pass(bg); !r.RetentionCompleted {
			t.Fatalf("pass: %+v", r)
		}
		mu.Lock()
		defer mu.Unlock()
		return reads
	}
	first := count()
	if first < 8 {
		t.Fatalf("the first pass read %d tag files: the test proves nothing (4 checkpoints pin 2 tables)", first)
	}
	if again := count(); again != 0 {
		t.Errorf("a second pass over unchanged pins read %d tag files, want 0 (the first read %d)", again, first)
	}
}

// TestQuietPassCostsTheSameAtAnyNumberOfCheckpoints: a pass over
// checkpoints that did not change makes as many requests with 6 of them,
// pinning each table's 3 versions, as with 2 pinning its latest. Each
// reader of the pins (the pass's reconcile, the cleanup run's under its
// claim, the metrics) lists the registry versions that published them
// once instead of one get of each, takes the registry segments it read
// before while they are still listed (registry.Cache), and lists each
// table's _versions/ once instead of reading each pinned manifest again
// (lance.RefCache).
func TestQuietPassCostsTheSameAtAnyNumberOfCheckpoints(t *testing.T) {
	// A segmented registry: each live checkpoint's rows are an object of
	// their own, which every head read needs.
	t.Setenv(registry.SpillEnv, "0")
	requests := func(checkpoints int) (int, map[string]int) {
		dir, _, loc := store(t, "v2-appends")
		var mu sync.Mutex
		n, by := 0, map[string]int{}
		s := watchedStore(t, dir, func(c storagetest.Call) {
			mu.Lock()
			n++
			by[string(c.Op)+" "+path.Dir(c.Key)]++
			mu.Unlock()
		})
		// The table grows from v1 to its v3 as the checkpoints are
		// taken: the later manifests are put aside until their turn.
		versions := filepath.Join(dir, "v2-appends.lance", "_versions")
		aside := t.TempDir()
		move := func(from, to string, v uint64) {
			if err := os.Rename(filepath.Join(from, lance.ManifestName(v, lance.NamingV2)), filepath.Join(to, lance.ManifestName(v, lance.NamingV2))); err != nil {
				t.Fatal(err)
			}
		}
		if checkpoints > 2 {
			move(versions, aside, 3)
			move(versions, aside, 2)
		}
		for i := range checkpoints {
			if checkpoints > 2 && (i == 2 || i == 4) {
				move(aside, versions, uint64(2+i/4))
			}
			if _, err := checkpoint.Create(bg, s.At(loc), fmt.Sprintf("cp-%d", i), ""); err != nil {
				t.Fatal(err)
			}
		}
		// keep-last 3: both stores keep the same versions, so the plans
		// read the same manifests and only the checkpoints differ.
		dm := &Daemon{Store: s.At(loc), Config: cfg(t, "retention:\n  keep_last: 3\n  every: 1ms\n  writers_stopped: true\n")}
		for pass := range 2 {
			mu.Lock()
			n, by = 0, map[string]int{}
			mu.Unlock()
			if r := dm.Pass(bg); !r.RetentionCompleted {
				t.Fatalf("pass %d: %+v", pass, r)
			}
		}
		mu.Lock()
		got, gotBy := n, by
		by = map[string]int{}
		mu.Unlock()
		if _, infos, err := checkpoint.List(bg, s.At(loc)); err != nil || len(infos) != checkpoints {
			t.Fatalf("%d checkpoints live, %v", len(infos), err)
		} else if checkpoints > 2 {
			pinned := map[uint64]bool{}
			for _, in := range infos {
				for _, p := range in.Pins {
					if p.Kind == "table" {
						pinned[p.Version] = p.Status == checkpoint.PinOK
					}
				}
			}
			if len(pinned) != 3 || !pinned[1] || !pinned[2] || !pinned[3] {
				t.Fatalf("the checkpoints pin %v, want versions 1, 2 and 3, intact", pinned)
			}
		}
		return got, gotBy
	}
	few, fewBy := requests(2)
	many, manyBy := requests(6)
	t.Logf("a quiet pass: %d requests over 2 checkpoints, %d over 6", few, many)
	if few != many {
		t.Errorf("a quiet pass made %d requests over 2 checkpoints and %d over 6: each live checkpoint costs every pass %.1f", few, many, float64(many-few)/4)
		for k, v := range manyBy {
			if fewBy[k] != v {
				t.Logf("%s: %d, then %d", k, fewBy[k], v)
			}
		}
	}
}

// watchedStore is a localfs store at dir whose every data operation is
// shown to each first.
func watchedStore(t *testing.T, dir string, each func(storagetest.Call)) *storage.Store {
	t.Helper()
	d, err := localfs.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	s, err := storage.NewStore(bg, "localfs", storagetest.NewHook(d).Before(func(c storagetest.Call) error {
		each(c)
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}
