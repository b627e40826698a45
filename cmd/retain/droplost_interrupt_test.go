package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/retain-dev/retain/core/checkpoint"
)

// SIGINT that lands once drop-lost has committed: the pin is given up, so
// its pin_dropped audit line and the tag delete must still happen and the
// command must not report a failure. Before, both ran on the cancelled
// context: no pin_dropped line (the audit log showed a drop that never
// finished) and exit 130 for a drop that was done.
func TestSignalAfterDropLostCommitStillAudits(t *testing.T) {
	db := fixtureDB(t, "deletes", "branch-tag")
	if _, errs, code := retain(t, "checkpoint", "create", "nightly", db); code != 0 {
		t.Fatalf("create: %d %s", code, errs)
	}
	// The pinned version (v5, the newest) is lost.
	if err := os.Remove(filepath.Join(db, "deletes.lance", "_versions", "18446744073709551610.manifest")); err != nil {
		t.Fatal(err)
	}
	p := startPaused(t, checkpoint.FPDropLostAfterCommit, "checkpoint", "drop-lost", "nightly", "deletes.lance", db, "--reason", "v5 was lost")
	if err := p.interruptAndResume(t); err != nil {
		t.Fatalf("drop-lost, committed, then SIGINT: %v\n%s", err, p.out.String())
	}
	if a, _, _ := retain(t, "audit", db); !strings.Contains(a, "pin_dropped") {
		t.Fatalf("no pin_dropped line after the committed drop: %s", a)
	}
	if st, _, _ := retain(t, "claim", "status", db); !strings.Contains(st, "free") {
		t.Fatalf("the claim: %s", st)
	}
}
