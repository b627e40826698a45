package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const denyAliceDeletes = `permit(principal, action, resource);
forbid(principal == Retain::Actor::"alice", action == Retain::Action::"checkpoint delete", resource);
`

// snapshotRefs reads every registry object and pin tag file under db, so a
// denied command can be shown to have changed none of them.
func snapshotRefs(t *testing.T, db string) map[string]string {
	t.Helper()
	got := map[string]string{}
	err := filepath.WalkDir(db, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(db, p)
		if strings.HasPrefix(rel, filepath.Join("_retain", "registry")) || strings.Contains(rel, "_refs") {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			got[rel] = string(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func TestPolicyDeniesCheckpointDelete(t *testing.T) {
	db := fixtureDB(t, "v2-appends")
	pol := filepath.Join(t.TempDir(), "policy.cedar")
	if err := os.WriteFile(pol, []byte(denyAliceDeletes), 0o644); err != nil {
		t.Fatal(err)
	}
	// Create is permitted, and its decision is audited on stderr.
	_, errs, code := retain(t, "checkpoint", "create", "nightly", db, "--policy", pol, "--actor", "alice")
	if code != 0 || !strings.Contains(errs, `authz: allow checkpoint create on checkpoint "nightly"`) || !strings.Contains(errs, pol) {
		t.Fatalf("create: %d %s", code, errs)
	}
	before := snapshotRefs(t, db)
	if len(before) == 0 {
		t.Fatal("no registry objects to compare")
	}
	_, errs, code = retain(t, "checkpoint", "delete", "nightly", db, "--policy", pol, "--actor", "alice")
	if code != 1 {
		t.Fatalf("denied delete: exit %d, want 1: %s", code, errs)
	}
	for _, want := range []string{"authz: deny checkpoint delete", "checkpoint delete on checkpoint \"nightly\"", `actor "alice"`, "policy file " + pol, `forbid policy "policy1"`, "--actor"} {
		if !strings.Contains(errs, want) {
			t.Errorf("denied delete: stderr lacks %q:\n%s", want, errs)
		}
	}
	after := snapshotRefs(t, db)
	if len(after) != len(before) {
		t.Fatalf("registry and tags changed: %d files before, %d after", len(before), len(after))
	}
	for k, v := range before {
		if after[k] != v {
			t.Errorf("%s changed by a denied delete", k)
		}
	}
	// Reads are never gated.
	out, errs, code := retain(t, "checkpoint", "list", db, "--policy", pol, "--actor", "alice")
	if code != 0 || !strings.Contains(out, "nightly") {
		t.Fatalf("list under the policy: %d %s %s", code, out, errs)
	}
	// RETAIN_POLICY is the same as --policy.
	if _, errs, code := retainEnv(t, []string{"RETAIN_POLICY=" + pol}, "checkpoint", "delete", "nightly", db, "--actor", "alice"); code != 1 || !strings.Contains(errs, "authz: deny") {
		t.Fatalf("denied delete via %s: %d %s", policyEnv, code, errs)
	}
	// Without a policy nothing is authorized.
	if _, errs, code := retain(t, "checkpoint", "delete", "nightly", db, "--actor", "alice"); code != 0 || strings.Contains(errs, "authz:") {
		t.Fatalf("delete without a policy: %d %s", code, errs)
	}
}

func TestPolicyFileInvalid(t *testing.T) {
	db := fixtureDB(t, "v2-appends")
	pol := filepath.Join(t.TempDir(), "bad.cedar")
	if err := os.WriteFile(pol, []byte("permit(principal, action resource);\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, errs, code := retain(t, "checkpoint", "create", "nightly", db, "--policy", pol, "--actor", "alice")
	if code != 2 || !strings.Contains(errs, "policy file "+pol) || !strings.Contains(errs, "syntax error") {
		t.Fatalf("bad policy: %d %s", code, errs)
	}
	if _, errs, code := retain(t, "checkpoint", "create", "nightly", db, "--policy", pol+".missing", "--actor", "alice"); code != 2 || !strings.Contains(errs, pol+".missing") {
		t.Fatalf("missing policy: %d %s", code, errs)
	}
	if _, err := os.Stat(filepath.Join(db, "_retain", "registry")); err == nil {
		t.Fatal("a command with a bad policy wrote the registry")
	}
}
