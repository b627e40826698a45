package retention

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/retain-dev/retain/adapters/localfs"
	"github.com/retain-dev/retain/core/checkpoint"
	"github.com/retain-dev/retain/core/lance"
	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/storagetest"
)

var bg = context.Background()

const fixtures = "../lance/testdata"

// V2 manifest names of deletes.lance's versions 4 and 5.
const (
	delV4 = "deletes.lance/_versions/18446744073709551611.manifest"
	delV5 = "deletes.lance/_versions/18446744073709551610.manifest"
)

func copyFixtures(t *testing.T, dir string, names ...string) {
	t.Helper()
	for _, n := range names {
		if err := os.CopyFS(filepath.Join(dir, n+".lance"), os.DirFS(filepath.Join(fixtures, n+".lance"))); err != nil {
			t.Fatal(err)
		}
	}
}

// readOnly fails the test on any write through d.
func readOnly(t *testing.T, d storage.Driver) storage.Driver {
	return storagetest.NewHook(d).Before(func(c storagetest.Call) error {
		switch c.Op {
		case storagetest.OpPut:
			t.Errorf("preview wrote %q", c.Key)
		case storagetest.OpDelete:
			t.Errorf("preview deleted %q", c.Key)
		case storagetest.OpDeleteMany:
			t.Errorf("preview deleted %q", c.Keys)
		default:
			return nil
		}
		return errors.New("read-only")
	})
}

func open(t *testing.T, dir string, ro bool) *storage.Store {
	t.Helper()
	d, err := localfs.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	var drv storage.Driver = d
	if ro {
		drv = readOnly(t, d)
	}
	s, err := storage.NewStore(bg, "localfs", drv)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s.At(loc(dir))
}

// setup builds <tmp>/db with deletes.lance and branch-tag.lance, and a
// checkpoint "nightly" taken while deletes.lance's head was v3; versions
// 4 and 5 are committed after it (their manifests hidden, then put back).
func setup(t *testing.T) (dir, id string) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "db")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	copyFixtures(t, dir, "deletes", "branch-tag")
	hide := filepath.Join(t.TempDir(), "hidden")
	if err := os.MkdirAll(hide, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{delV4, delV5} {
		if err := os.Rename(filepath.Join(dir, k), filepath.Join(hide, filepath.Base(k))); err != nil {
			t.Fatal(err)
		}
	}
	s := open(t, dir, false)
	c, err := checkpoint.Create(bg, s, "nightly", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{delV4, delV5} {
		if err := os.Rename(filepath.Join(hide, filepath.Base(k)), filepath.Join(dir, k)); err != nil {
			t.Fatal(err)
		}
	}
	return dir, string(c.ID)
}

func find(t *testing.T, p *StorePlan, table, branch string, v uint64) VersionDecision {
	t.Helper()
	for _, tp := range p.Tables {
		if tp.Table != table {
			continue
		}
		for _, d := range tp.Versions {
			if d.Branch == branch && d.Version == v {
				return d
			}
		}
	}
	t.Fatalf("no %s %s v%d in the plan", table, branch, v)
	return VersionDecision{}
}

func has(rs []string, prefix string) bool {
	for _, r := range rs {
		if strings.HasPrefix(r, prefix) {
			return true
		}
	}
	return false
}

func TestPreviewRootSet(t *testing.T) {
	dir, id := setup(t)
	s := open(t, dir, true)
	p, err := Preview(bg, s, Policy{KeepLast: 1})
	if err != nil {
		t.Fatal(err)
	}
	if !p.Provisional || len(p.Tables) != 2 || len(p.Checkpoints) != 1 || p.Checkpoints[0].ID != id {
		t.Fatalf("plan: %+v", p)
	}
	cp := "checkpoint nightly (" + id + ")"
	// The checkpoint-pinned old version is kept, naming the checkpoint,
	// and its pin tag is shown too.
	v3 := find(t, p, "deletes.lance", "main", 3)
	if !v3.Keep || !has(v3.Reasons, cp) || !has(v3.Reasons, "checkpoint pin tag ogcp_") {
		t.Fatalf("deletes v3: %+v", v3)
	}
	// Unpinned old versions are removed, on both sides of the pin.
	for _, n := range []uint64{1, 2, 4} {
		if d := find(t, p, "deletes.lance", "main", n); d.Keep {
			t.Fatalf("deletes v%d kept: %+v", n, d)
		}
	}
	if d := find(t, p, "deletes.lance", "main", 5); !d.Keep || !has(d.Reasons, "branch head main") {
		t.Fatalf("deletes v5: %+v", d)
	}
	// A foreign tag keeps its version; a fork point is kept.
	if d := find(t, p, "branch-tag.lance", "main", 2); !d.Keep || !has(d.Reasons, "foreign tag v2-tag") || !has(d.Reasons, "fork point of branch exp") {
		t.Fatalf("branch-tag main v2: %+v", d)
	}
	if d := find(t, p, "branch-tag.lance", "main", 1); d.Keep {
		t.Fatalf("branch-tag main v1 kept: %+v", d)
	}
	if d := find(t, p, "branch-tag.lance", "main", 3); !d.Keep || !has(d.Reasons, cp) {
		t.Fatalf("branch-tag main v3: %+v", d)
	}
	var del TablePlan
	for _, tp := range p.Tables {
		if tp.Table == "deletes.lance" {
			del = tp
		}
	}
	if del.Totals.VersionsRemoved != 3 || del.Totals.BytesToDelete <= 0 || del.Totals.OldestRemovable == nil {
		t.Fatalf("deletes totals: %+v", del.Totals)
	}
	if p.Totals.VersionsRemoved < 4 || p.Totals.BytesToDelete < del.Totals.BytesToDelete {
		t.Fatalf("store totals: %+v", p.Totals)
	}
	if _, err := json.Marshal(p); err != nil {
		t.Fatal(err)
	}
	// The window keeps versions: with a cut-off in the past of every
	// commit nothing is removed but what keep-last would.
	p2, err := Preview(bg, s, Policy{OlderThan: time.Hour, Now: func() time.Time { return time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC) }})
	if err != nil {
		t.Fatal(err)
	}
	if p2.Totals.VersionsRemoved != 0 {
		t.Fatalf("cut-off before every commit removed %d versions", p2.Totals.VersionsRemoved)
	}
	if d := find(t, p2, "deletes.lance", "main", 1); !has(d.Reasons, "window: committed at or after the cut-off") {
		t.Fatalf("window reason: %+v", d)
	}
}

func TestPreviewRefusesCorruptManifest(t *testing.T) {
	dir, _ := setup(t)
	key := "branch-tag.lance/_versions/18446744073709551614.manifest"
	if err := os.WriteFile(filepath.Join(dir, key), []byte("not a manifest"), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := Preview(bg, open(t, dir, true), Policy{KeepLast: 1})
	var re *RefusedError
	if p != nil || !errors.As(err, &re) || !errors.Is(err, ErrPreviewRefused) || !errors.Is(err, lance.ErrCleanupRefused) {
		t.Fatalf("got %v, %v", p, err)
	}
	if re.Table != "branch-tag.lance" || re.Key != key || !strings.Contains(err.Error(), key) {
		t.Fatalf("refusal names %q %q: %v", re.Table, re.Key, err)
	}
}

func TestPreviewRefusesMissingPinnedVersion(t *testing.T) {
	dir, _ := setup(t)
	key := "deletes.lance/_versions/18446744073709551612.manifest" // v3, pinned
	if err := os.Remove(filepath.Join(dir, key)); err != nil {
		t.Fatal(err)
	}
	_, err := Preview(bg, open(t, dir, true), Policy{KeepLast: 1})
	var re *RefusedError
	if !errors.As(err, &re) || re.Table != "deletes.lance" || re.Key != key || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("got %v", err)
	}
}

func TestPreviewNeedsAWindow(t *testing.T) {
	dir, _ := setup(t)
	if _, err := Preview(bg, open(t, dir, true), Policy{}); !errors.Is(err, storage.ErrInvalidArgument) {
		t.Fatalf("got %v", err)
	}
}
