package main

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/retain-dev/retain/core/retention"
	"github.com/retain-dev/retain/internal/failpoint"
)

// Ctrl-C during `cleanup run` (SIGINT, after the run journaled its plans):
// the run stops at its next store call, releases the claim, exits 130 and
// names the command that finishes it; that command, pasted, does. Before,
// SIGINT killed the process on the spot and left the claim held.
func TestCtrlCDuringCleanupRunIsResumable(t *testing.T) {
	db := runFixture(t)
	hs := t.TempDir()
	cmd := exec.Command(bin, "cleanup", "run", db, "--confirm-write-outage", "--keep-last", "1")
	cmd.Env = append(os.Environ(), failpoint.PauseEnv+"="+retention.FPRunAfterBoundary, failpoint.PauseDir+"="+hs)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := os.Stat(failpoint.PauseFile(hs, retention.FPRunAfterBoundary, ".reached")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatal("cleanup never reached its pause")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // the signal is taken before the run goes on
	if err := os.WriteFile(failpoint.PauseFile(hs, retention.FPRunAfterBoundary, ".continue"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
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
