package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/retain-dev/retain/core/checkpoint"
)

// rotationDB is a store holding checkpoints hourly/1..5 and release-1.
func rotationDB(t *testing.T) string {
	t.Helper()
	db := fixtureDB(t, "v2-appends")
	for _, n := range []string{"hourly/1", "hourly/2", "hourly/3", "hourly/4", "hourly/5", "release-1"} {
		if _, errs, code := retain(t, "checkpoint", "create", n, db); code != 0 {
			t.Fatalf("create %s: %d %s", n, code, errs)
		}
	}
	return db
}

func TestCheckpointPruneRefusesUnboundedRequests(t *testing.T) {
	db := rotationDB(t)
	before := snapshotRefs(t, db)
	for _, args := range [][]string{
		{"checkpoint", "prune", db, "--keep-last", "2"},                             // no --match
		{"checkpoint", "prune", db, "--match", "hourly/*"},                          // no rule
		{"checkpoint", "prune", db, "--match", "hourly/*", "--keep-daily", "many"},  // not a count
		{"checkpoint", "prune", db, "--match", "hourly/*", "--keep-within", "soon"}, // not a duration
	} {
		if _, errs, code := retain(t, args...); code != 2 || errs == "" {
			t.Errorf("%v: exit %d, want 2: %s", args[3:], code, errs)
		}
	}
	if _, errs, _ := retain(t, "checkpoint", "prune", db, "--keep-last", "2"); !strings.Contains(errs, "--match") {
		t.Errorf("no --match: the refusal does not say what to add: %s", errs)
	}
	if got := snapshotRefs(t, db); len(got) != len(before) {
		t.Fatalf("a refused prune changed the registry or pins")
	}
}

func TestCheckpointPruneDryRunThenRun(t *testing.T) {
	t.Parallel() // a process-bound test: it waits on retain, Lance and emulators, not the CPU
	db := rotationDB(t)
	before := snapshotRefs(t, db)
	out, errs, code := retain(t, "checkpoint", "prune", db, "--match", "hourly/*", "--keep-last", "2", "--dry-run", "--json")
	if code != 0 {
		t.Fatalf("dry run: %d %s", code, errs)
	}
	var dry checkpoint.Pruned
	if err := json.Unmarshal([]byte(out), &dry); err != nil || !dry.DryRun || dry.Kept != 2 || dry.Removed != 3 || len(dry.Decisions) != 5 {
		t.Fatalf("dry run: %v %s", err, out)
	}
	after := snapshotRefs(t, db)
	for k, v := range before {
		if after[k] != v {
			t.Fatalf("dry run changed %s", k)
		}
	}
	if len(after) != len(before) {
		t.Fatalf("dry run wrote %d files", len(after)-len(before))
	}
	if _, err := os.Stat(filepath.Join(db, "_retain", "audit")); err == nil {
		t.Fatal("dry run wrote an audit log")
	}

	out, errs, code = retain(t, "checkpoint", "prune", db, "--match", "hourly/*", "--keep-last", "2")
	if code != 0 {
		t.Fatalf("prune: %d %s", code, errs)
	}
	if !strings.Contains(out, "keep 2 last, matching hourly/*, grouped by branch: 2 kept, removed 3") {
		t.Errorf("prune output lacks its summary:\n%s", out)
	}
	rows := map[string][]string{}
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) >= 5 && (f[0] == "keep" || f[0] == "remove") {
			rows[f[1]] = f
		}
	}
	for n, want := range map[string]string{"hourly/5": "keep last", "hourly/4": "keep last", "hourly/3": "remove", "hourly/1": "remove"} {
		f, ok := rows[n]
		if !ok {
			t.Errorf("%s not listed:\n%s", n, out)
			continue
		}
		if got := strings.Join(append([]string{f[0]}, f[5:]...), " "); got != want {
			t.Errorf("%s: row %q, want %q:\n%s", n, f, want, out)
		}
	}
	if _, ok := rows["release-1"]; ok {
		t.Errorf("an unmatched checkpoint was judged:\n%s", out)
	}
	out, _, _ = retain(t, "checkpoint", "list", db)
	for _, n := range []string{"hourly/4", "hourly/5", "release-1"} {
		if !strings.Contains(out, n) {
			t.Errorf("%s gone after prune:\n%s", n, out)
		}
	}
	for _, n := range []string{"hourly/1", "hourly/2", "hourly/3"} {
		if strings.Contains(out, n+" ") {
			t.Errorf("%s still listed after prune:\n%s", n, out)
		}
	}
	// Tags last: the removed checkpoints' pins are gone from the table.
	var pins int
	for k := range snapshotRefs(t, db) {
		if strings.Contains(k, "_refs") && strings.Contains(k, "ogcp_") && strings.HasPrefix(k, "v2-appends.lance") {
			pins++
		}
	}
	if pins != 3 {
		t.Errorf("%d pin tags on the table, want 3 (hourly/4, hourly/5, release-1)", pins)
	}
	// Audited: what was going before the commit, and that it went.
	out, errs, code = retain(t, "audit", db, "--json")
	if code != 0 {
		t.Fatalf("audit: %d %s", code, errs)
	}
	for _, want := range []string{"checkpoints_removing", "checkpoints_removed", "checkpoint hourly/1", "keep 2 last"} {
		if !strings.Contains(out, want) {
			t.Errorf("audit lacks %q:\n%s", want, out)
		}
	}
}

// A policy that forbids deleting one matched checkpoint forbids the whole
// prune: nothing is removed.
func TestCheckpointPruneDeniedForOneIsDeniedForAll(t *testing.T) {
	t.Parallel() // a process-bound test: it waits on retain, Lance and emulators, not the CPU
	db := rotationDB(t)
	pol := filepath.Join(t.TempDir(), "policy.cedar")
	err := os.WriteFile(pol, []byte(`permit(principal, action, resource);
forbid(principal, action == Retain::Action::"checkpoint delete", resource) when { resource.name == "hourly/2" };
`), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	// A kept checkpoint has lost a pin, which the reconcile under the
	// claim would repair: the denial comes before it, so not even that.
	out, _, _ := retain(t, "checkpoint", "show", "hourly/5", db, "--json")
	var in checkpoint.Info
	if err := json.Unmarshal([]byte(out), &in); err != nil {
		t.Fatal(err)
	}
	for _, p := range in.Pins {
		if p.Path == "v2-appends.lance" {
			if err := os.Remove(filepath.Join(db, "v2-appends.lance", "_refs", "tags", p.Tag+".json")); err != nil {
				t.Fatal(err)
			}
		}
	}
	before := snapshotRefs(t, db)
	_, errs, code := retain(t, "checkpoint", "prune", db, "--match", "hourly/*", "--keep-last", "2", "--policy", pol, "--actor", "cron")
	if code != 1 || !strings.Contains(errs, "authz: deny") || !strings.Contains(errs, "hourly/2") {
		t.Fatalf("denied prune: %d %s", code, errs)
	}
	after := snapshotRefs(t, db)
	if len(after) != len(before) {
		t.Fatalf("a denied prune changed %d files", len(after)-len(before))
	}
	for k, v := range before {
		if after[k] != v {
			t.Fatalf("a denied prune changed %s", k)
		}
	}
	// The claim was released: a permitted prune runs at once.
	if _, errs, code := retain(t, "checkpoint", "prune", db, "--match", "hourly/*", "--keep-last", "2"); code != 0 {
		t.Fatalf("prune after the denial: %d %s", code, errs)
	}
}
