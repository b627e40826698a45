package registry

import (
	"fmt"
	"math/rand"
	"sort"
	"testing"
	"time"

	"github.com/retain-dev/retain/core/storage"
)

// segmentKeys is every segment version v references, read whole.
func segmentKeys(t *testing.T, reg *Registry, v Version) map[string]bool {
	t.Helper()
	s, err := reg.Read(bg, v)
	if err != nil {
		t.Fatalf("version %d: %v", v, err)
	}
	out := map[string]bool{}
	if s.stored == nil {
		return out
	}
	for _, p := range s.stored.buckets {
		out[p.key] = true
	}
	for _, p := range s.stored.rows {
		out[p.key] = true
	}
	return out
}

// A random history of creates, deletes, purges and revives (the first
// versions whole, the rest segmented), then random sets of versions
// removed as the registry's cleanup would (never the head): the segments
// SegmentGarbage names are exactly those only removed versions referenced,
// and once they and the versions are deleted every remaining version still
// reads whole. Taking a run's end for proven when the stored version past
// it is kept (it still references the segment) fails this test at once.
func TestSegmentGarbageIsExactlyWhatOnlyRemovedVersionsReference(t *testing.T) {
	withSpill(t, 1<<40)
	rng := rand.New(rand.NewSource(16))
	for trial := 0; trial < 6; trial++ {
		s, _, d := meteredStore(t)
		reg := Open(s, Options{Scope: storage.ScopeHost})
		draft := newDraft(t)
		reserveT(t, draft, "seed/0")
		if _, err := reg.Commit(bg, 0, draft); err != nil {
			t.Fatal(err)
		}
		const depth = 24
		for v := Version(2); v <= depth; v++ {
			if v == 4 {
				spillBytes = 0
			}
			_, head, err := reg.Head(bg)
			if err != nil {
				t.Fatal(err)
			}
			next := head.Next()
			live := next.Live()
			switch op := rng.Intn(4); {
			case op == 0 || len(live) == 0:
				reserveT(t, next, fmt.Sprintf("cp/%d", rng.Intn(6)+int(v)*10))
			case op == 1:
				c := live[rng.Intn(len(live))]
				if _, err := next.Tombstone(c.ID, Deletion{OperationID: fmt.Sprintf("op-%d", v), At: t0.Add(time.Duration(v) * time.Minute), Actor: "bob"}); err != nil {
					t.Fatal(err)
				}
			case op == 2:
				// Purge every tombstoned checkpoint: buckets return to
				// content they had before (the case since exists for).
				for _, tb := range append([]Tombstone(nil), next.Tombstones...) {
					if err := next.Purge(tb.CheckpointID); err != nil {
						t.Fatal(err)
					}
				}
				if len(next.Tombstones) == 0 {
					reserveT(t, next, fmt.Sprintf("extra/%d", v))
				}
			default:
				if r, ok := reviveable(next); ok {
					if _, err := next.Revive(r.Generation, newCheckpoint(next, r.Name)); err != nil {
						t.Fatal(err)
					}
				} else {
					reserveT(t, next, fmt.Sprintf("other/%d", v))
				}
			}
			if _, err := reg.Commit(bg, v-1, next); err != nil {
				t.Fatal(err)
			}
		}
		spillBytes = 1 << 40
		stored := make([]Version, 0, depth)
		for v := Version(1); v <= depth; v++ {
			stored = append(stored, v)
		}
		refs := map[Version]map[string]bool{}
		for _, v := range stored {
			refs[v] = segmentKeys(t, reg, v)
		}
		var gone []Version
		isGone := map[Version]bool{}
		for _, v := range stored[:len(stored)-1] {
			if rng.Intn(3) > 0 {
				gone = append(gone, v)
				isGone[v] = true
			}
		}
		want := map[string]bool{}
		for _, v := range gone {
			for k := range refs[v] {
				want[k] = true
			}
		}
		for v, ks := range refs {
			if !isGone[v] {
				for k := range ks {
					delete(want, k)
				}
			}
		}
		got, err := reg.SegmentGarbage(bg, stored, gone)
		if err != nil {
			t.Fatal(err)
		}
		var missing, extra []string
		for k := range want {
			if _, ok := got[k]; !ok {
				missing = append(missing, k)
			}
		}
		for k, vs := range got {
			if !want[k] {
				extra = append(extra, k)
			}
			for _, v := range vs {
				if !isGone[v] {
					t.Errorf("trial %d: %s is garbage once version %d goes, which is not removed", trial, k, v)
				}
			}
		}
		sort.Strings(extra)
		if len(extra) > 0 {
			t.Fatalf("trial %d: gone %v: named as garbage but still referenced: %v", trial, gone, extra)
		}
		if len(missing) > 0 {
			t.Errorf("trial %d: gone %v: %d of %d garbage segments not found", trial, gone, len(missing), len(want))
		}
		for _, v := range gone {
			if err := d.Delete(bg, VersionKey(v), storage.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		for k := range got {
			if err := d.Delete(bg, k, storage.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		for _, v := range stored {
			if !isGone[v] {
				segmentKeys(t, reg, v) // reads whole, or fails the test
			}
		}
		t.Logf("trial %d: %d versions removed of %d, %d segments collected", trial, len(gone), depth, len(got))
	}
}

func reviveable(s *Snapshot) (Reservation, bool) {
	for _, r := range s.Names {
		if r.State == Tombstoned {
			return r, true
		}
	}
	return Reservation{}, false
}
