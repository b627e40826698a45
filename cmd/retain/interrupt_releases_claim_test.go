package main

import (
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/retain-dev/retain/core/checkpoint/protocol"
	"github.com/retain-dev/retain/internal/failpoint"
)

// SIGINT that lands after a checkpoint delete or create has committed, as
// it releases the claim: the release must not use the cancelled context,
// or the claim stays held (exit 0, a warning) and every later retention
// operation is refused until someone takes the claim over.
func TestSignalAfterCommitStillReleasesClaim(t *testing.T) {
	for _, tc := range []struct {
		name, fp string
		args     []string
	}{
		{"delete", protocol.FPDeleteAfterCommit, []string{"checkpoint", "delete", "nightly"}},
		{"create", protocol.FPCreateAfterSidecarGone, []string{"checkpoint", "create", "weekly"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := fixtureDB(t, "deletes")
			if _, errs, code := retain(t, "checkpoint", "create", "nightly", db); code != 0 {
				t.Fatalf("create: %d %s", code, errs)
			}
			hs := t.TempDir()
			cmd := exec.Command(bin, append(tc.args, db)...)
			cmd.Env = append(os.Environ(), failpoint.PauseEnv+"="+tc.fp, failpoint.PauseDir+"="+hs)
			var out strings.Builder
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(60 * time.Second)
			for {
				if _, err := os.Stat(failpoint.PauseFile(hs, tc.fp, ".reached")); err == nil {
					break
				}
				if time.Now().After(deadline) {
					cmd.Process.Kill()
					t.Fatal("never reached its pause")
				}
				time.Sleep(20 * time.Millisecond)
			}
			if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
				t.Fatal(err)
			}
			time.Sleep(100 * time.Millisecond) // the signal is taken before it goes on
			if err := os.WriteFile(failpoint.PauseFile(hs, tc.fp, ".continue"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			cmd.Wait()
			if st, _, _ := retain(t, "claim", "status", db); !strings.Contains(st, "free") {
				t.Fatalf("the claim after SIGINT past the commit: %s\n%s output: %s", st, tc.name, out.String())
			}
		})
	}
}
