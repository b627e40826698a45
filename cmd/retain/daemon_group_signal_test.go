//go:build unix

package main

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/retain-dev/retain/core/failpoint"
	"github.com/retain-dev/retain/core/retention"
	"github.com/retain-dev/retain/internal/faultadapter"
)

// groupSignalMidPass starts `retain daemon` in its own process group,
// waits until its first pass is paused right after its boundary commit,
// signals the whole group (as systemd's stop, `kill -TERM -PGID` and
// `timeout` do: the adapter plugin gets the signal too), lets the pass
// go on and returns the daemon once it has exited.
func groupSignalMidPass(t *testing.T, db string, adapterArgs []string, env ...string) *daemonProc {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "daemon.yaml")
	os.WriteFile(cfg, []byte("retention:\n  keep_last: 1\n  writers_stopped: true\n"), 0o644)
	hs := t.TempDir()
	env = append(env, "RETAIN_FAILPOINT_PAUSE="+retention.FPRunAfterBoundary, "RETAIN_FAILPOINT_DIR="+hs)
	args := append(adapterArgs, "daemon", db, "--config", cfg, "--metrics-addr", "")
	d := startDaemonWith(t, func(c *exec.Cmd) { c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} }, env, args...)
	d.waitPaused(t, hs, retention.FPRunAfterBoundary)
	if err := syscall.Kill(-d.cmd.Process.Pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // time for an unprotected plugin to die
	select {
	case <-d.done:
		t.Fatalf("the daemon exited mid-pass:\n%s", d.output())
	default:
	}
	os.WriteFile(failpoint.PauseFile(hs, retention.FPRunAfterBoundary, ".continue"), nil, 0o644)
	select {
	case <-d.done:
	case <-time.After(60 * time.Second):
		t.Fatalf("the daemon did not stop after its pass:\n%s", d.output())
	}
	return d
}

type daemonRecord struct {
	Daemon *struct {
		LastPass          *time.Time `json:"last_pass"`
		LastRetention     *time.Time `json:"last_retention"`
		RetentionFailures int        `json:"retention_failures"`
	} `json:"daemon"`
	OpenRuns []string `json:"unfinished_cleanup_runs"`
}

func readDaemonRecord(t *testing.T, db string) daemonRecord {
	t.Helper()
	out, errs, code := retain(t, "status", db, "--json")
	var st daemonRecord
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil || st.Daemon == nil || st.Daemon.LastPass == nil {
		t.Fatalf("the daemon's record after the signal: %d %s %s", code, out, errs)
	}
	return st
}

// TestDaemonGroupSIGTERMFinishesPass: a SIGTERM to the daemon's whole
// process group mid-pass does not take the adapter plugin with it: the
// pass completes its deletions, the record is written, the claim is
// released and the daemon exits 0.
func TestDaemonGroupSIGTERMFinishesPass(t *testing.T) {
	db := runFixture(t)
	d := groupSignalMidPass(t, db, nil)
	if d.err != nil || !strings.Contains(d.output(), "retention_completed") || !strings.Contains(d.output(), "daemon stopped") {
		t.Fatalf("exit %v:\n%s", d.err, d.output())
	}
	if _, err := os.Stat(filepath.Join(db, "deletes.lance", "_versions", "18446744073709551611.manifest")); err == nil {
		t.Fatal("the pass's deletions were abandoned")
	}
	if st := readDaemonRecord(t, db); st.Daemon.LastRetention == nil || len(st.OpenRuns) != 0 {
		t.Fatalf("the record does not show the completed retention: %+v", st)
	}
	if out, _, _ := retain(t, "claim", "status", db); !strings.Contains(out, "free") {
		t.Fatalf("claim after shutdown: %s", out)
	}
}

// TestDaemonGroupSIGTERMFailedPassExitsNonZero: the same signal while a
// pass that is going to fail (its deletes fail) is in flight: the pass
// ends, its failure is recorded, the run is left for --resume with the
// claim free, and the daemon exits 1 so a supervisor sees the failure.
func TestDaemonGroupSIGTERMFailedPassExitsNonZero(t *testing.T) {
	adapter := faultadapter.Build(t)
	db := runFixture(t)
	d := groupSignalMidPass(t, db, []string{"--adapter", adapter},
		"RETAIN_FAULT_FAIL_DELETES=1", "RETAIN_FAULT_STATE="+filepath.Join(t.TempDir(), "faults.json"))
	var ee *exec.ExitError
	if !errors.As(d.err, &ee) || ee.ExitCode() != 1 || !strings.Contains(d.output(), "retention_failed") || !strings.Contains(d.output(), "injected") {
		t.Fatalf("exit %v (want status 1 after the failed pass):\n%s", d.err, d.output())
	}
	if st := readDaemonRecord(t, db); st.Daemon.RetentionFailures != 1 || st.Daemon.LastRetention != nil || len(st.OpenRuns) != 1 {
		t.Fatalf("the record does not show the failed retention and its unfinished run: %+v", st)
	}
	if out, _, _ := retain(t, "claim", "status", db); !strings.Contains(out, "free") {
		t.Fatalf("claim after shutdown: %s", out)
	}
}
