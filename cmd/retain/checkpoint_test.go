package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/retain-dev/retain/core/checkpoint"
)

// fixtureDB copies real-Lance fixtures into <tmp>/db: a LanceDB database
// directory holding several tables.
func fixtureDB(t *testing.T, names ...string) string {
	t.Helper()
	db := filepath.Join(t.TempDir(), "db")
	for _, n := range names {
		if err := os.CopyFS(filepath.Join(db, n+".lance"), os.DirFS(filepath.Join("..", "..", "core", "lance", "testdata", n+".lance"))); err != nil {
			t.Fatal(err)
		}
	}
	return db
}

func TestCheckpointCLI(t *testing.T) {
	t.Parallel() // a process-bound test: it waits on retain, Lance and emulators, not the CPU
	db := fixtureDB(t, "v2-appends", "branch-tag", "v1-naming")
	out, errs, code := retain(t, "checkpoint", "create", "nightly/1", db, "--json")
	if code != 0 {
		t.Fatalf("create: %d %s", code, errs)
	}
	var c checkpoint.Created
	if err := json.Unmarshal([]byte(out), &c); err != nil || len(c.Tables) != 3 || c.RegistryVersion != 1 {
		t.Fatalf("create: %v %s", err, out)
	}
	versions := map[string]uint64{}
	for _, tb := range c.Tables {
		versions[tb.Path] = tb.Version
	}
	if versions["v2-appends.lance"] != 3 || versions["branch-tag.lance"] != 3 || versions["v1-naming.lance"] != 3 {
		t.Fatalf("versions %v", versions)
	}
	if _, errs, code := retain(t, "checkpoint", "create", "nightly/1", db); code != 1 || !strings.Contains(errs, "taken") {
		t.Fatalf("taken: %d %s", code, errs)
	}
	if _, errs, code := retain(t, "checkpoint", "create", "ogcp_x", db); code != 2 || !strings.Contains(errs, "reserved-prefix") {
		t.Fatalf("reserved: %d %s", code, errs)
	}
	out, _, code = retain(t, "checkpoint", "list", db)
	if code != 0 || !strings.Contains(out, "nightly/1") || !strings.Contains(out, "ok") {
		t.Fatalf("list: %d %s", code, out)
	}
	out, _, code = retain(t, "checkpoint", "show", "nightly/1", db, "--deep", "--json")
	var in checkpoint.Info
	if code != 0 || json.Unmarshal([]byte(out), &in) != nil || in.Health != "ok" || in.Deep == nil || len(in.Deep.Missing) != 0 || len(in.Pins) != 4 {
		t.Fatalf("show: %d %s", code, out)
	}
	// Lose a pin: show fails, reconcile repairs it.
	var tag string
	for _, p := range in.Pins {
		if p.Path == "v1-naming.lance" {
			tag = p.Tag
		}
	}
	if err := os.Remove(filepath.Join(db, "v1-naming.lance", "_refs", "tags", tag+".json")); err != nil {
		t.Fatal(err)
	}
	if _, _, code := retain(t, "checkpoint", "show", string(in.ID), db); code != 1 {
		t.Fatalf("degraded show: exit %d", code)
	}
	out, errs, code = retain(t, "reconcile", db)
	if code != 0 || !strings.Contains(out, "1 repaired") {
		t.Fatalf("reconcile: %d %s %s", code, out, errs)
	}
	out, errs, code = retain(t, "checkpoint", "delete", "nightly/1", db)
	if code != 0 || !strings.Contains(out, "4 pin tags reclaimed") {
		t.Fatalf("delete: %d %s %s", code, out, errs)
	}
	out, _, _ = retain(t, "checkpoint", "list", db, "--json")
	if !strings.Contains(out, `"checkpoints": []`) {
		t.Fatalf("list after delete: %s", out)
	}
}

// TestCheckpointCLICrash: the retain binary killed by a failpoint after
// tagging leaves a sidecar; reconcile (after the operator takes over the
// dead claim) rolls it back and the name is usable.
func TestCheckpointCLICrash(t *testing.T) {
	t.Parallel() // a process-bound test: it waits on retain, Lance and emulators, not the CPU
	db := fixtureDB(t, "v2-appends", "branch-tag")
	cmd := exec.Command(bin, "checkpoint", "create", "x", db)
	cmd.Env = append(os.Environ(), "RETAIN_FAILPOINT="+checkpoint.FPCreateAfterTags)
	if err := cmd.Run(); err == nil || err.(*exec.ExitError).ExitCode() != 3 {
		t.Fatalf("failpoint: %v", err)
	}
	side, _ := filepath.Glob(filepath.Join(db, "_retain", "sidecars", "*.json"))
	pins, _ := filepath.Glob(filepath.Join(db, "*.lance", "_refs", "tags", "ogcp_*.json"))
	if len(side) != 1 || len(pins) != 2 {
		t.Fatalf("after the crash: sidecars %v pins %v", side, pins)
	}
	// The dead process still holds the claim.
	if _, errs, code := retain(t, "reconcile", db); code != 1 || !strings.Contains(errs, "held") {
		t.Fatalf("reconcile under a dead claim: %d %s", code, errs)
	}
	out, _, _ := retain(t, "claim", "status", db, "--json")
	var st claimStatus
	if err := json.Unmarshal([]byte(out), &st); err != nil || !st.Held {
		t.Fatalf("claim status: %s", out)
	}
	if _, errs, code := retain(t, "claim", "takeover", db, "--token", st.Holder.OwnerToken, "--reason", "crash test"); code != 0 {
		t.Fatalf("takeover: %s", errs)
	}
	out, errs, code := retain(t, "reconcile", db, "--json")
	if code != 0 || !strings.Contains(out, `"outcome": "rolled-back"`) {
		t.Fatalf("reconcile: %d %s %s", code, out, errs)
	}
	side, _ = filepath.Glob(filepath.Join(db, "_retain", "sidecars", "*.json"))
	pins, _ = filepath.Glob(filepath.Join(db, "*.lance", "_refs", "tags", "ogcp_*.json"))
	if len(side) != 0 || len(pins) != 0 {
		t.Fatalf("after reconcile: sidecars %v pins %v", side, pins)
	}
	if _, errs, code := retain(t, "checkpoint", "create", "x", db); code != 0 {
		t.Fatalf("create after: %s", errs)
	}
}
