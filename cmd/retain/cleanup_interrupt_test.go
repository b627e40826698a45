package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/retain-dev/retain/core/retention"
)

// Ctrl-C during `cleanup run` (SIGINT, after the run journaled its plans):
// the run stops at its next store call, releases the claim, exits 130 and
// names the command that finishes it; that command, pasted, does. Before,
// SIGINT killed the process on the spot and left the claim held.
func TestCtrlCDuringCleanupRunIsResumable(t *testing.T) {
	db := runFixture(t)
	p := startPaused(t, retention.FPRunAfterBoundary, "cleanup", "run", db, "--confirm-write-outage", "--keep-last", "1")
	err := p.interruptAndResume(t)
	errb := p.out
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != exitInterrupted || !strings.Contains(errb.String(), "interrupted") {
		t.Fatalf("cleanup run after SIGINT: %v\n%s", err, errb.String())
	}
	if out, _, _ := retain(t, "claim", "status", db); !strings.Contains(out, "free") {
		t.Fatalf("the claim after an interrupted run: %s", out)
	}
	resume := heldCommand(t, errb.String(), "retain cleanup run ", db)
	if !strings.Contains(resume, "--resume") {
		t.Fatalf("the interrupted run names %q", resume)
	}
	out, code := runShell(t, resume)
	if code != 0 || !strings.Contains(out, "resumed cleanup run") {
		t.Fatalf("the resume it named: exit %d %s", code, out)
	}
}
