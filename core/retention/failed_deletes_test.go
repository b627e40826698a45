package retention

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/retain-dev/retain/adapters/localfs"
	"github.com/retain-dev/retain/core/lance"
	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/storagetest"
)

// The transaction files deletes.lance's removed versions v1, v2 and v4
// reference (lance/testdata).
var delTxns = []string{
	"deletes.lance/_transactions/0-bffebfd3-de27-4620-9571-b61c7cf4588a.txn",
	"deletes.lance/_transactions/1-2b4e1fcf-5b6d-4888-b224-bad4f0b50c6f.txn",
	"deletes.lance/_transactions/3-b6c8e7cf-33b2-4e14-aefb-4bb905b9b432.txn",
}

// wantFailedDeletes checks a run whose deletes under _transactions/ of
// deletes.lance failed: incomplete and resumable, the failed keys named in
// the report and the audit line, only confirmed deletes counted.
func wantFailedDeletes(t *testing.T, s *storage.Store, rep *RunReport, err error) {
	t.Helper()
	if !errors.Is(err, ErrRunIncomplete) || !strings.Contains(err.Error(), "--resume") {
		t.Fatalf("want an incomplete run, got %v", err)
	}
	var tr TableRun
	for _, x := range rep.Tables {
		if x.Table == "deletes.lance" {
			tr = x
		}
	}
	var failed []string
	for _, f := range tr.FailedDeletes {
		failed = append(failed, f.Key)
	}
	sort.Strings(failed)
	if tr.State != TableFailed || !errors.Is(tr.Err(), lance.ErrDeletesFailed) || strings.Join(failed, ",") != strings.Join(delTxns, ",") {
		t.Fatalf("deletes.lance: state %s, failed %v: %v", tr.State, failed, tr.Err())
	}
	// Only what the store confirmed counts: the three manifests and the
	// files only they referenced, not the transaction files.
	if tr.VersionsRemoved != 3 || tr.FilesDeleted != 4 || rep.Failed != 1 {
		t.Fatalf("deletes.lance counted %d versions, %d files (failed tables %d)", tr.VersionsRemoved, tr.FilesDeleted, rep.Failed)
	}
	lines, err := ReadAudit(bg, s, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	var last AuditRecord
	for _, l := range lines {
		if l.Table == "deletes.lance" && l.OperationID == rep.OperationID {
			last = l
		}
	}
	if last.Event != AuditRemoveFailed || last.FilesFailed != 3 || len(last.Failed) != 3 || last.FilesRemoved != 4 || last.Error == "" {
		t.Fatalf("audit line of the failed table: %+v", last)
	}
	j, _, err := ReadJournal(bg, s, rep.OperationID)
	if err != nil || j.State != StateIncomplete {
		t.Fatalf("journal %+v, %v", j, err)
	}
}

// wantResumeFinishes resumes on a store whose deletes work: only the
// failed objects are deleted and counted, the run completes.
func wantResumeFinishes(t *testing.T, dir string, op string) {
	t.Helper()
	healthy := open(t, dir, false)
	rr, err := Resume(bg, healthy, ResumeOptions{})
	if err != nil {
		t.Fatalf("resume: %v", err)
	}
	for _, tr := range rr.Tables {
		if tr.Table == "deletes.lance" && (tr.State != TableDone || tr.FilesDeleted != 3 || tr.VersionsRemoved != 0) {
			t.Fatalf("deletes.lance after resume: %+v", tr)
		}
	}
	for _, k := range delTxns {
		if exists(t, dir, k) {
			t.Fatalf("%s survived the resume", k)
		}
	}
	j, _, err := ReadJournal(bg, healthy, op)
	if err != nil || j.State != StateComplete || j.Tables[indexOf(j, "deletes.lance")].FilesDeleted != 7 {
		t.Fatalf("journal after resume %+v, %v", j, err)
	}
}

func indexOf(j *Journal, table string) int {
	for i, t := range j.Tables {
		if t.Table == table {
			return i
		}
	}
	return -1
}

// TestRunFailedDeletesAreReported: deletes of deletes.lance's transaction
// files fail key by key. The run used to say the table was done and exit
// 0; now it is incomplete, names the three keys, counts only confirmed
// deletes, audits remove_failed, and `--resume` finishes it.
func TestRunFailedDeletesAreReported(t *testing.T) {
	dir, _ := setup(t)
	drv, err := localfs.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	s, err := storage.NewStore(bg, "localfs", &storagetest.Fail{Driver: drv, Kind: storage.ErrPermissionDenied, Deletes: storagetest.Prefix("deletes.lance/_transactions/"), PerKey: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rep, err := Run(bg, s.At(loc(dir)), Policy{KeepLast: 1}, RunOptions{ConfirmWriteOutage: true})
	wantFailedDeletes(t, s, rep, err)
	wantResumeFinishes(t, dir, rep.OperationID)
}

// TestRunImmutableTransactionsFolder is the same with the real thing: the
// table's _transactions/ folder made immutable (chattr +i, which stops
// root too), then mutable again for the resume.
func TestRunImmutableTransactionsFolder(t *testing.T) {
	dir, _ := setup(t)
	txns := filepath.Join(dir, "deletes.lance", "_transactions")
	if out, err := exec.Command("chattr", "+i", txns).CombinedOutput(); err != nil {
		t.Skipf("chattr +i is not available here (%v: %s); TestRunFailedDeletesAreReported covers this with a failing driver", err, out)
	}
	mutable := func() {
		if out, err := exec.Command("chattr", "-i", txns).CombinedOutput(); err != nil {
			t.Errorf("chattr -i: %v: %s", err, out)
		}
	}
	defer mutable()
	if f, err := os.Create(filepath.Join(txns, "probe")); err == nil {
		f.Close()
		t.Skip("the immutable flag does not stop writes here")
	}
	s := open(t, dir, false)
	rep, err := Run(bg, s, Policy{KeepLast: 1}, RunOptions{ConfirmWriteOutage: true})
	wantFailedDeletes(t, s, rep, err)
	for _, f := range rep.Tables[indexOfRun(rep, "deletes.lance")].FailedDeletes {
		if !strings.Contains(f.Err, "permission denied") && !strings.Contains(f.Err, "not permitted") {
			t.Fatalf("failed delete of %s: %s", f.Key, f.Err)
		}
	}
	mutable()
	wantResumeFinishes(t, dir, rep.OperationID)
}

func indexOfRun(rep *RunReport, table string) int {
	for i, t := range rep.Tables {
		if t.Table == table {
			return i
		}
	}
	return -1
}
