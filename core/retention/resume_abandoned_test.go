package retention

import (
	"errors"
	"testing"

	"github.com/retain-dev/retain/adapters/localfs"
	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/claim"
	"github.com/retain-dev/retain/core/storage/storagetest"
)

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
	failing, err := storage.NewStore(bg, "localfs", failDeletes(drv, "branch-tag.lance/"))
	if err != nil {
		t.Fatal(err)
	}
	defer failing.Close()
	rep, err := Run(bg, failing.At(loc(dir)), Policy{KeepLast: 1}, RunOptions{ConfirmWriteOutage: true})
	if !errors.Is(err, ErrRunIncomplete) {
		t.Fatalf("want an incomplete run, got %v", err)
	}
	op := rep.OperationID
	other := open(t, dir, false)

	drv2, err := localfs.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	// Another process abandons the run just before Resume takes the claim.
	hd := storagetest.NewHook(drv2).Before(storagetest.Once(storagetest.PutOf(claim.Key), func() {
		if _, err := Abandon(bg, other, op, ResumeOptions{}); err != nil {
			t.Errorf("abandon: %v", err)
		}
	}))
	hooked, err := storage.NewStore(bg, "localfs", hd)
	if err != nil {
		t.Fatal(err)
	}
	defer hooked.Close()
	_, rerr := Resume(bg, hooked.At(loc(dir)), ResumeOptions{OperationID: op})
	j, _, err := ReadJournal(bg, other, op)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("resume: %v; journal state now %s, resumes %d", rerr, j.State, j.Resumes)
	if j.State != StateAbandoned {
		t.Fatalf("resume under the claim rewrote an abandoned run's journal to %q (resume error: %v)", j.State, rerr)
	}
}
