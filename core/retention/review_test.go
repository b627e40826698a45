package retention

// Regression tests from a review: each failed while the bug it guards against was present.

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/retain-dev/retain/adapters/localfs"
	"github.com/retain-dev/retain/core"
	"github.com/retain-dev/retain/core/checkpoint"
	"github.com/retain-dev/retain/core/checkpoint/protocol"
	"github.com/retain-dev/retain/core/claim"
)

// TestRecreatedTableWronglyBehindBoundary: a table that no checkpoint
// ever pinned is cleaned (Run catalogues it and publishes a boundary "main
// v4"), then dropped and recreated at the same path with versions 1..2.
// The incarnation rule only bumps the incarnation when a row of the current
// incarnation exists, so the new table keeps incarnation 1 and its head v2
// is refused as "behind the gc boundary" of the old table: no checkpoint
// of the recreated table can be taken until it grows past v4.
func TestRecreatedTableNotBehindOldBoundary(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	copyFixtures(t, dir, "deletes")
	s := open(t, dir, false)
	rep, err := Run(bg, s, loc(dir), Policy{KeepLast: 1}, RunOptions{ConfirmWriteOutage: true})
	if err != nil || len(rep.Boundaries) != 1 {
		t.Fatalf("run: %+v %v", rep, err)
	}
	t.Logf("boundary: %+v", rep.Boundaries[0].NewestRemoved)
	// Drop the table and create another one at the same path (2 versions).
	if err := os.RemoveAll(filepath.Join(dir, "deletes.lance")); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(filepath.Join(dir, "deletes.lance"), os.DirFS(filepath.Join(fixtures, "update.lance"))); err != nil {
		t.Fatal(err)
	}
	_, err = protocol.Create(bg, s, loc(dir), "after-recreate", "")
	if errors.Is(err, checkpoint.ErrBehindGCBoundary) {
		t.Fatalf("a checkpoint of the recreated table is refused by the old table's boundary: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// hookDriver runs hook once, before the first Put of the claim object.
type hookDriver struct {
	core.Driver
	once sync.Once
	hook func()
}

func (d *hookDriver) Put(ctx context.Context, key string, body io.Reader, opts core.PutOptions) (core.Info, error) {
	if key == claim.Key {
		d.once.Do(d.hook)
	}
	return d.Driver.Put(ctx, key, body, opts)
}

// TestResumeIgnoresStateUnderClaim: Resume checks the journal's state
// before it takes the claim, re-reads the journal under the claim, and does
// not check the state again. A run abandoned in between (`--abandon` by
// another process) is "resumed": its journal, closed as abandoned with its
// plans and open marker dropped, is rewritten to "incomplete" (and a plan
// that tidy failed to drop would be executed).
func TestResumeRechecksStateUnderClaim(t *testing.T) {
	dir, _ := setup(t)
	drv, err := localfs.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	failing, err := core.NewStore(bg, "localfs", failDeletes{Driver: drv, prefix: "branch-tag.lance/"})
	if err != nil {
		t.Fatal(err)
	}
	defer failing.Close()
	rep, err := Run(bg, failing, loc(dir), Policy{KeepLast: 1}, RunOptions{ConfirmWriteOutage: true})
	if !errors.Is(err, ErrRunIncomplete) {
		t.Fatalf("want an incomplete run, got %v", err)
	}
	op := rep.OperationID
	other := open(t, dir, false)

	drv2, err := localfs.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	hd := &hookDriver{Driver: drv2}
	hd.hook = func() {
		if _, err := Abandon(bg, other, loc(dir), op, ResumeOptions{}); err != nil {
			t.Errorf("abandon: %v", err)
		}
	}
	hooked, err := core.NewStore(bg, "localfs", hd)
	if err != nil {
		t.Fatal(err)
	}
	defer hooked.Close()
	_, rerr := Resume(bg, hooked, loc(dir), ResumeOptions{OperationID: op})
	j, _, err := ReadJournal(bg, other, op)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("resume: %v; journal state now %s, resumes %d", rerr, j.State, j.Resumes)
	if j.State != StateAbandoned {
		t.Fatalf("resume under the claim rewrote an abandoned run's journal to %q (resume error: %v)", j.State, rerr)
	}
}

// TestLostPinRefusesTheStoreEvenIsolated: a pinned version that is gone
// (its pin tag in order) is an unresolvable root: reconcile reports it and
// the whole store's cleanup is refused, naming the object and the way out,
// even with IsolateReconcile (which skips other tables' conflicts), and
// nothing is deleted.
func TestLostPinRefusesTheStoreEvenIsolated(t *testing.T) {
	dir, _ := setup(t)
	v3 := "deletes.lance/_versions/18446744073709551612.manifest"
	if err := os.Remove(filepath.Join(dir, v3)); err != nil {
		t.Fatal(err)
	}
	s := open(t, dir, false)
	before := len(tableFiles(t, dir))
	_, err := Run(bg, s, loc(dir), Policy{KeepLast: 1}, RunOptions{ConfirmWriteOutage: true, IsolateReconcile: true})
	if !errors.Is(err, ErrRunRefused) || !strings.Contains(err.Error(), v3) || !strings.Contains(err.Error(), "retain checkpoint drop-lost ") {
		t.Fatalf("a lost pin: %v", err)
	}
	if after := len(tableFiles(t, dir)); after != before {
		t.Fatalf("files %d -> %d after a refusal", before, after)
	}
}
