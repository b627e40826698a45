package retention

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/retain-dev/retain/core/checkpoint"
	"github.com/retain-dev/retain/core/checkpoint/registry"
	"github.com/retain-dev/retain/core/storage"
)

// segmentFiles lists the registry's segments on disk.
func segmentFiles(t *testing.T, dir string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	ents, err := os.ReadDir(filepath.Join(dir, registry.SegmentsPrefix))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	for _, e := range ents {
		out[registry.SegmentsPrefix+e.Name()] = true
	}
	return out
}

// TestRunCleansRegistrySegments: with every snapshot written as segments
// (format 3), the run that removes registry versions 2 and 3 also deletes
// the segments only they referenced, and nothing a remaining version
// needs: versions 1 and 4 still read whole and the live checkpoint shows
// healthy, deep.
func TestRunCleansRegistrySegments(t *testing.T) {
	t.Setenv(registry.SpillEnv, "0")
	dir, id := setup(t)
	s := open(t, dir, false)
	if _, err := checkpoint.Create(bg, s, "tmp", ""); err != nil { // registry v2
		t.Fatal(err)
	}
	if _, err := checkpoint.Delete(bg, s, "tmp"); err != nil { // v3
		t.Fatal(err)
	}
	before := segmentFiles(t, dir)
	rep, err := Run(bg, s, Policy{KeepLast: 1}, RunOptions{ConfirmWriteOutage: true})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Registry.Deleted != 2 || rep.Registry.SegmentsDeleted == 0 || rep.Registry.SegmentsError != "" {
		t.Fatalf("registry cleanup: %+v", rep.Registry)
	}
	after := segmentFiles(t, dir)
	gone := 0
	for k := range before {
		if !after[k] {
			gone++
		}
	}
	if gone != rep.Registry.SegmentsDeleted {
		t.Errorf("%d segments left the store, the run reports %d", gone, rep.Registry.SegmentsDeleted)
	}
	reg := registry.Open(s, registry.Options{Scope: storage.ScopeHost})
	for _, v := range []registry.Version{1, 4} {
		if _, err := reg.Read(bg, v); err != nil {
			t.Fatalf("registry v%d after the cleanup: %v", v, err)
		}
	}
	if n, unreadable, breaks, err := reg.VerifyChain(bg); err != nil || n != 2 || len(unreadable) != 0 || len(breaks) != 0 {
		t.Fatalf("verify after the cleanup: %d read, unreadable %v, breaks %v, %v", n, unreadable, breaks, err)
	}
	in, err := checkpoint.Show(bg, s, id, true)
	if err != nil || in.Health != "ok" || len(in.Deep.Missing) != 0 {
		t.Fatalf("nightly after cleanup: %+v, %v", in, err)
	}
}

// TestReconcileSettlesALaggingRecordOfASegmentedHead: reconcile rewrites a
// head record left behind by a commit whose record write was lost, on a
// segmented head as on a whole one (both are chained).
func TestReconcileSettlesALaggingRecordOfASegmentedHead(t *testing.T) {
	t.Setenv(registry.SpillEnv, "0")
	dir, _ := setup(t)
	s := open(t, dir, false)
	reg := registry.Open(s, registry.Options{})
	lagV, lag, err := reg.Head(bg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := checkpoint.Create(bg, s, "b", ""); err != nil {
		t.Fatal(err)
	}
	if err := reg.WriteHeadRecord(bg, lagV, lag); err != nil {
		t.Fatal(err)
	}
	if rep, err := checkpoint.Reconcile(bg, s); err != nil {
		t.Fatalf("reconcile: %v %+v", err, rep)
	}
	head, _, err := reg.Head(bg)
	if err != nil {
		t.Fatal(err)
	}
	if rec, _, err := reg.HeadRecord(bg); err != nil || rec != head {
		t.Fatalf("after reconcile the head record names version %d (%v), the head is %d", rec, err, head)
	}
}

// TestRecoverNeverRebuildsBelowANewerBuildsVersion: a head a newer retain
// wrote (a format this build does not know) is refused by every reader as
// ErrNewerRegistry, and registry recover refuses too instead of taking it
// for damage and publishing a version rebuilt from the pins below it.
func TestRecoverNeverRebuildsBelowANewerBuildsVersion(t *testing.T) {
	dir, _ := setup(t)
	s := open(t, dir, false)
	reg := registry.Open(s, registry.Options{})
	v, _, err := reg.Head(bg)
	if err != nil {
		t.Fatal(err)
	}
	key := registry.VersionKey(v + 1)
	if err := os.WriteFile(filepath.Join(dir, key), []byte(`{"format":4,"version":"`+fmt.Sprintf("%020d", v+1)+`","future":true}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := reg.Head(bg); !errors.Is(err, registry.ErrNewerRegistry) || !errors.Is(err, registry.ErrCorruptRegistry) {
		t.Fatalf("head: %v, want ErrNewerRegistry (and corrupt)", err)
	}
	if _, err := checkpoint.Recover(bg, s, checkpoint.RecoverOptions{}); !errors.Is(err, registry.ErrNewerRegistry) {
		t.Fatalf("recover: %v, want ErrNewerRegistry", err)
	}
	if _, err := os.Stat(filepath.Join(dir, registry.VersionKey(v+2))); !os.IsNotExist(err) {
		t.Fatalf("recover published a version above the newer build's: %v", err)
	}
}

// TestRecoverGetsOutOfAMissingSegment: a segmented head whose segment is
// gone refuses every reader with ErrCorruptRegistry naming `retain registry
// recover STORE`; that command rebuilds the registry from the pins, after
// which the head reads, verify is clean and the checkpoint is live again.
func TestRecoverGetsOutOfAMissingSegment(t *testing.T) {
	t.Setenv(registry.SpillEnv, "0")
	dir, id := setup(t)
	s := open(t, dir, false)
	segs := segmentFiles(t, dir)
	if len(segs) == 0 {
		t.Fatal("no segments: the registry is not segmented")
	}
	for k := range segs {
		if err := os.Remove(filepath.Join(dir, k)); err != nil {
			t.Fatal(err)
		}
	}
	_, _, err := registry.Open(s, registry.Options{}).Head(bg)
	if !errors.Is(err, registry.ErrCorruptRegistry) || !strings.Contains(err.Error(), "retain registry recover STORE") {
		t.Fatalf("head with its segments gone: %v; want ErrCorruptRegistry naming retain registry recover", err)
	}
	if _, err := checkpoint.Recover(bg, s, checkpoint.RecoverOptions{}); err != nil {
		t.Fatalf("recover: %v", err)
	}
	if _, _, err := registry.Open(s, registry.Options{}).Head(bg); err != nil {
		t.Fatalf("head after recover: %v", err)
	}
	if rep, err := checkpoint.Verify(bg, s); err != nil {
		t.Fatalf("verify after recover: %v %+v", err, rep)
	}
	in, err := checkpoint.Show(bg, s, id, false)
	if err != nil || in.Health != "ok" {
		t.Fatalf("the checkpoint after recover: %+v, %v", in, err)
	}
}
