package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/retain-dev/retain/core/checkpoint"
	"github.com/retain-dev/retain/core/retention"
	"github.com/retain-dev/retain/internal/lancetest"
)

// TestRegistryLostCLI is issue 13's first report, end to end: a real
// LanceDB table, a checkpoint of version 4, two more appends, then
// `rm -rf _retain/registry`. Before the fix reconcile reclaimed the pin
// and cleanup deleted version 4. Now reconcile and cleanup refuse naming
// `retain registry recover`, verify says damaged, recover puts the
// checkpoint back under its name (audited), cleanup then runs and keeps
// version 4, and real Lance checks it out by its pin.
func TestRegistryLostCLI(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real Lance (Node)")
	}
	db := filepath.Join(t.TempDir(), "db")
	lancetest.Node(t, "refs.cjs", map[string]any{"dir": db, "table": "t", "naming": "v2", "ops": []map[string]any{
		{"op": "create", "rows": 3}, {"op": "add", "rows": 1}, {"op": "add", "rows": 1}, {"op": "add", "rows": 1},
	}}, nil)
	out, errs, code := retain(t, "checkpoint", "create", "eod/1", db, "--json")
	var c checkpoint.Created
	if code != 0 || json.Unmarshal([]byte(out), &c) != nil || len(c.Tables) != 1 || c.Tables[0].Version != 4 {
		t.Fatalf("create: %d %s %s", code, out, errs)
	}
	pin := c.Tables[0].Tag
	lancetest.Node(t, "refs.cjs", map[string]any{"dir": db, "table": "t", "naming": "v2", "ops": []map[string]any{
		{"op": "add", "rows": 1}, {"op": "add", "rows": 1},
	}}, nil)
	if err := os.RemoveAll(filepath.Join(db, "_retain", "registry")); err != nil {
		t.Fatal(err)
	}
	manifests := func() int {
		m, _ := filepath.Glob(filepath.Join(db, "t.lance", "_versions", "*.manifest"))
		return len(m)
	}

	if _, errs, code := retain(t, "reconcile", db); code != 1 || !strings.Contains(errs, "checkpoint authority lost") || !strings.Contains(errs, "retain registry recover") {
		t.Fatalf("reconcile: %d %s", code, errs)
	}
	if _, errs, code := retain(t, "cleanup", "run", db, "--confirm-write-outage", "--keep-last", "1"); code != 1 || !strings.Contains(errs, "retain registry recover") || manifests() != 6 {
		t.Fatalf("cleanup on a lost registry: %d %s (%d manifests)", code, errs, manifests())
	}
	if out, _, code := retain(t, "registry", "verify", db); code != 1 || !strings.Contains(out, "damaged") || !strings.Contains(out, "next: retain registry recover") {
		t.Fatalf("verify: %d %s", code, out)
	}
	if out, errs, code := retain(t, "registry", "recover", db, "--dry-run"); code != 0 || !strings.Contains(out, "would restore 1") {
		t.Fatalf("dry run: %d %s %s", code, out, errs)
	}
	out, errs, code = retain(t, "registry", "recover", db, "--json")
	var rep checkpoint.RecoverReport
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil || len(rep.Checkpoints) != 1 || rep.Checkpoints[0].Name != "eod/1" || rep.Checkpoints[0].ID != c.ID {
		t.Fatalf("recover: %d %s %s", code, out, errs)
	}
	if out, _, code := retain(t, "checkpoint", "list", db); code != 0 || !strings.Contains(out, "eod/1") || !strings.Contains(out, "ok") {
		t.Fatalf("list after recover: %d %s", code, out)
	}
	if out, _, code := retain(t, "registry", "verify", db); code != 0 || !strings.Contains(out, "registry ok") {
		t.Fatalf("verify after recover: %d %s", code, out)
	}
	out, _, code = retain(t, "audit", db, "--json")
	if code != 0 || !strings.Contains(out, retention.AuditRegistryRecovering) || !strings.Contains(out, retention.AuditRegistryRecovered) {
		t.Fatalf("audit: %d %s", code, out)
	}
	if _, errs, code := retain(t, "cleanup", "run", db, "--confirm-write-outage", "--keep-last", "1"); code != 0 {
		t.Fatalf("cleanup after recover: %d %s", code, errs)
	}
	if manifests() != 2 { // the latest, and the pinned version 4
		t.Fatalf("%d manifests after cleanup, want 2", manifests())
	}
	var res struct {
		Results []map[string]any `json:"results"`
	}
	lancetest.Node(t, "refs.cjs", map[string]any{"dir": db, "table": "t", "naming": "v2", "ops": []map[string]any{{"op": "count", "ref": pin}}}, &res)
	if r := res.Results[0]; r["version"].(float64) != 4 || r["rows"].(float64) != 6 {
		t.Fatalf("Lance checks out the pin as %v, want version 4 with 6 rows", r)
	}
}
