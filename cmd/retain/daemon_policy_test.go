package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/retain-dev/retain/cmd/retain/internal/quickstart"
)

// replayFixture writes every commit of the quickstart fixture into a new
// local store (no Lance process needed) and returns it.
func replayFixture(t *testing.T) string {
	t.Helper()
	f, err := quickstart.LoadFixture(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(t.TempDir(), "db")
	for _, c := range f.Commits {
		for _, o := range c.Files {
			p := filepath.Join(db, filepath.FromSlash(o.Key))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, o.Body, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	return db
}

// The daemon is authorized as itself: its identity, not the shell user
// who started it. A policy forbidding "cleanup run" to that identity
// fails its retention (exit 1, the denial on stderr) and removes nothing;
// another identity under the same policy cleans.
func TestDaemonAuthorizedAsItsIdentity(t *testing.T) {
	db := replayFixture(t)
	dir := t.TempDir()
	pol := filepath.Join(dir, "policy.cedar")
	cfg := filepath.Join(dir, "retain.yaml")
	os.WriteFile(pol, []byte(`permit(principal, action, resource);
forbid(principal == Retain::Actor::"retain-9", action == Retain::Action::"cleanup run", resource);
`), 0o644)
	os.WriteFile(cfg, []byte("retention:\n  keep_last: 2\n  writers_stopped: true\n"), 0o644)
	before := tableFiles(t, db)

	_, errs, code := retain(t, "daemon", db, "--config", cfg, "--identity", "retain-9", "--once", "--policy", pol)
	if code != 1 || !strings.Contains(errs, `authz: deny cleanup run`) || !strings.Contains(errs, `actor "retain-9"`) {
		t.Fatalf("denied daemon: exit %d, want 1 with the denial of retain-9:\n%s", code, errs)
	}
	if after := tableFiles(t, db); strings.Join(after, "\n") != strings.Join(before, "\n") {
		t.Fatalf("a denied daemon removed files: %d before, %d after", len(before), len(after))
	}
	_, errs, code = retain(t, "daemon", db, "--config", cfg, "--identity", "retain-0", "--once", "--policy", pol)
	if code != 0 || !strings.Contains(errs, `authz: allow cleanup run`) {
		t.Fatalf("allowed daemon: exit %d\n%s", code, errs)
	}
	if after := tableFiles(t, db); len(after) >= len(before) {
		t.Fatalf("the allowed daemon removed nothing (%d files before, %d after)", len(before), len(after))
	}
}
