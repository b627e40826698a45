package main

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/retain-dev/retain/core/failpoint"
	"github.com/retain-dev/retain/core/retention"
)

// heldCommand returns the backquoted command that starts with prefix in a
// held-claim error, with STORE replaced by db.
func heldCommand(t *testing.T, errs, prefix, db string) string {
	t.Helper()
	m := regexp.MustCompile("`(" + regexp.QuoteMeta(prefix) + "[^`]*)`").FindStringSubmatch(errs)
	if m == nil {
		t.Fatalf("no `%s...` command in: %s", prefix, errs)
	}
	return strings.Replace(m[1], " STORE ", " '"+db+"' ", 1)
}

// runShell runs a command line a user would paste, with `retain` being the
// binary under test.
func runShell(t *testing.T, line string) (string, int) {
	t.Helper()
	line = "'" + bin + "'" + strings.TrimPrefix(line, "retain")
	out, err := exec.Command("sh", "-c", line).CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(out), code
}

// TestKilledCleanupRunNamesResume: a `cleanup run` process killed after it
// published its boundaries (as Ctrl-C or the OOM killer would) leaves the
// claim held. The next commands say that its pid is no longer running and
// name the resume command, and that command, pasted, finishes the run.
func TestKilledCleanupRunNamesResume(t *testing.T) {
	db := runFixture(t)
	p := startPaused(t, retention.FPRunAfterBoundary, "cleanup", "run", db, "--confirm-write-outage", "--keep-last", "1")
	cmd := p.cmd
	// SIGKILL: a death the process cannot handle, so the claim stays as
	// an interrupt without a handler leaves it.
	cmd.Process.Kill()
	cmd.Wait()
	pid := cmd.Process.Pid

	resume := "retain cleanup run STORE --resume --confirm-write-outage"
	var errs string
	for _, args := range [][]string{
		{"cleanup", "run", db, "--confirm-write-outage", "--keep-last", "1"},
		{"reconcile", db},
	} {
		var code int
		_, errs, code = retain(t, args...)
		if code != 1 || !strings.Contains(errs, fmt.Sprintf("retention claim is held by pid %d on ", pid)) ||
			!strings.Contains(errs, "which is no longer running") || !strings.Contains(errs, "`"+resume+"`") {
			t.Fatalf("%v after the run was killed: exit %d %s", args, code, errs)
		}
	}
	out, code := runShell(t, heldCommand(t, errs, "retain cleanup run ", db))
	if code != 0 || !strings.Contains(out, "resumed cleanup run") {
		t.Fatalf("the resume the error named: exit %d %s", code, out)
	}
	if out, _, _ := retain(t, "claim", "status", db); !strings.Contains(out, "free") {
		t.Fatalf("claim after resume: %s", out)
	}
}

// TestCrashedCleanupBeforePlanNamesTakeover: a run that died right after
// taking the claim journaled nothing, so resume has nothing to resume; the
// error names the takeover with the claim's real token, and that command,
// pasted, frees the store for the next run.
func TestCrashedCleanupBeforePlanNamesTakeover(t *testing.T) {
	db := runFixture(t)
	if _, errs, code := retainEnv(t, []string{failpoint.Env + "=" + retention.FPRunAfterClaim}, "cleanup", "run", db, "--confirm-write-outage", "--keep-last", "1"); code != failpoint.ExitCode {
		t.Fatalf("crash after the claim: exit %d %s", code, errs)
	}
	out, _, _ := retain(t, "claim", "status", db, "--json")
	var st struct {
		Holder struct {
			PID        int    `json:"pid"`
			OwnerToken string `json:"owner_token"`
		} `json:"holder"`
		Dead string   `json:"dead"`
		Next []string `json:"next"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil || st.Holder.OwnerToken == "" {
		t.Fatalf("claim status: %v %s", err, out)
	}
	// Status says the holder is gone and names the commands, with the
	// real store.
	if st.Dead == "" || len(st.Next) != 2 || !strings.Contains(st.Next[1], "retain claim takeover "+db+" --token "+st.Holder.OwnerToken) {
		t.Fatalf("claim status does not show the dead holder: %s", out)
	}
	if text, _, _ := retain(t, "claim", "status", db); !strings.Contains(text, "NOT RUNNING") || !strings.Contains(text, "next       retain cleanup run "+db+" --resume --confirm-write-outage") {
		t.Fatalf("claim status (text): %s", text)
	}
	_, errs, code := retain(t, "reconcile", db)
	if code != 1 || !strings.Contains(errs, fmt.Sprintf("held by pid %d on ", st.Holder.PID)) || !strings.Contains(errs, "which is no longer running") ||
		!strings.Contains(errs, "`retain claim takeover STORE --token "+st.Holder.OwnerToken+" --reason ") {
		t.Fatalf("reconcile after the crash: exit %d %s", code, errs)
	}
	if _, rerrs, code := retain(t, "cleanup", "run", db, "--resume", "--confirm-write-outage"); code != 1 || !strings.Contains(rerrs, "nothing to resume") {
		t.Fatalf("resume, which the error says finds nothing here: %d %s", code, rerrs)
	}
	if out, code := runShell(t, heldCommand(t, errs, "retain claim takeover ", db)); code != 0 || !strings.Contains(out, "the store is free") {
		t.Fatalf("the takeover the error named: exit %d %s", code, out)
	}
	if _, errs, code := retain(t, "cleanup", "run", db, "--confirm-write-outage", "--keep-last", "1"); code != 0 {
		t.Fatalf("cleanup after the takeover: %d %s", code, errs)
	}
}
