package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/retain-dev/retain/core/branch"
	"github.com/retain-dev/retain/core/failpoint"
	"github.com/retain-dev/retain/internal/lancetest"
)

// An expired branch whose delete was interrupted (the process died with
// every branch file marked deleting) is finished by the daemon's next
// pass: the reaper deletes it again, the protocol takes the dead delete
// over, and real Lance no longer opens the branch.
func TestDaemonFinishesAnInterruptedExpiredBranchDelete(t *testing.T) {
	db := filepath.Join(t.TempDir(), "db")
	var built struct {
		Results []struct {
			Error string `json:"error"`
		} `json:"results"`
	}
	lancetest.Node(t, "oracle.cjs", map[string]any{"jobs": []map[string]any{
		{"kind": "build", "dir": db, "table": "t", "naming": "v2", "steps": []map[string]any{
			{"op": "create", "rows": 2}, {"op": "add", "rows": 1},
			{"op": "branchCreate", "name": "s/x", "from": "main", "version": 1}, {"op": "add", "rows": 1, "on": "s/x"},
		}},
	}}, &built)
	if len(built.Results) != 1 || built.Results[0].Error != "" {
		t.Fatalf("building with Lance: %+v", built)
	}
	if _, errs, code := retain(t, "branch", "create", "s/x", db+"/t.lance", "--from", "main@1", "--expires", "1s"); code != 0 {
		t.Fatalf("adopt with an expiry: %d %s", code, errs)
	}
	if _, errs, code := retainEnv(t, []string{failpoint.Env + "=" + branch.FPDeleteAfterDeleting}, "branch", "delete", "s/x", db); code != failpoint.ExitCode {
		t.Fatalf("crash after marking deleting: %d %s", code, errs)
	}
	branchTakeOverClaim(t, db) // the dead process's claim, as an operator would
	time.Sleep(1200 * time.Millisecond)
	cfg := filepath.Join(t.TempDir(), "daemon.yaml")
	if err := os.WriteFile(cfg, []byte("expiry_margin: 100ms\nretention:\n  keep_last: 1\n  writers_stopped: true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errs, code := retain(t, "daemon", db, "--config", cfg, "--once", "--metrics-addr", "")
	if code != 0 || !strings.Contains(out+errs, "branch_expired") {
		t.Fatalf("pass: %d\n%s\n%s", code, out, errs)
	}
	if l := branchListed(t, filepath.Join(db, "t.lance"), true); l.Total != 0 {
		t.Fatalf("branches left: %+v", l)
	}
	if seen := lanceSees(t, db); len(seen) != 0 {
		t.Fatalf("Lance still lists %v", seen)
	}
}
