package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/retain-dev/retain/core/failpoint"
	"github.com/retain-dev/retain/core/retention"
)

// TestCleanupClaimRefusesOthers: while a real `retain cleanup run` process
// holds the claim (paused right after publishing its boundaries), every
// mutating command in another process is refused with the claim held,
// and changes nothing; the paused run then finishes.
func TestCleanupClaimRefusesOthers(t *testing.T) {
	db := runFixture(t)
	hs := t.TempDir()
	cmd := exec.Command(bin, "cleanup", "run", db, "--confirm-write-outage", "--keep-last", "1")
	cmd.Env = append(os.Environ(), failpoint.PauseEnv+"="+retention.FPRunAfterBoundary, failpoint.PauseDir+"="+hs)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// done is closed when the process ended; waitErr is then its outcome.
	done := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		os.WriteFile(failpoint.PauseFile(hs, retention.FPRunAfterBoundary, ".continue"), nil, 0o644)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := os.Stat(failpoint.PauseFile(hs, retention.FPRunAfterBoundary, ".reached")); err == nil {
			break
		}
		select {
		case <-done:
			t.Fatalf("cleanup ended before the pause: %v\n%s\n%s", waitErr, out.String(), errb.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("cleanup never reached its pause")
		}
		time.Sleep(20 * time.Millisecond)
	}

	st, _, _ := retain(t, "claim", "status", db, "--json")
	if !strings.Contains(st, `"action": "cleanup"`) {
		t.Fatalf("claim status while cleanup runs: %s", st)
	}
	before := tableFiles(t, db)
	for _, args := range [][]string{
		{"checkpoint", "create", "other", db},
		{"checkpoint", "delete", "nightly", db},
		{"reconcile", db},
		{"branch", "delete", "team/x", db},
		{"cleanup", "run", db, "--confirm-write-outage", "--keep-last", "1"},
	} {
		_, errs, code := retain(t, args...)
		if code != 1 || !strings.Contains(errs, "retention claim is held") || !strings.Contains(errs, "(cleanup, operation cleanup-") {
			t.Fatalf("%v while cleanup holds the claim: exit %d %s", args, code, errs)
		}
	}
	if after := tableFiles(t, db); strings.Join(after, "\n") != strings.Join(before, "\n") {
		t.Fatal("a refused command changed the tables")
	}
	if err := os.WriteFile(failpoint.PauseFile(hs, retention.FPRunAfterBoundary, ".continue"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
		if waitErr != nil {
			t.Fatalf("cleanup after the pause: %v\n%s\n%s", waitErr, out.String(), errb.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatal("cleanup did not finish after the pause")
	}
	var js json.RawMessage
	if _, errs, code := retain(t, "checkpoint", "show", "nightly", db, "--deep", "--json"); code != 0 {
		t.Fatalf("checkpoint after cleanup: %d %s %s", code, errs, js)
	}
}
