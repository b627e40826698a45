package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/retain-dev/retain/core/checkpoint/protocol"
	"github.com/retain-dev/retain/internal/failpoint"
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
	hs := t.TempDir()
	fp := protocol.FPDropLostAfterCommit
	cmd := exec.Command(bin, "checkpoint", "drop-lost", "nightly", "deletes.lance", db, "--reason", "v5 was lost")
	cmd.Env = append(os.Environ(), failpoint.PauseEnv+"="+fp, failpoint.PauseDir+"="+hs)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := os.Stat(failpoint.PauseFile(hs, fp, ".reached")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("drop-lost never reached its pause: %s", out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // the signal is taken before it goes on
	if err := os.WriteFile(failpoint.PauseFile(hs, fp, ".continue"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("drop-lost, committed, then SIGINT: %v\n%s", err, out.String())
	}
	if a, _, _ := retain(t, "audit", db); !strings.Contains(a, "pin_dropped") {
		t.Fatalf("no pin_dropped line after the committed drop: %s", a)
	}
	if st, _, _ := retain(t, "claim", "status", db); !strings.Contains(st, "free") {
		t.Fatalf("the claim: %s", st)
	}
}
