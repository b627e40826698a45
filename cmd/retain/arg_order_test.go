package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// retainIn runs the binary in dir, for relative paths.
func retainIn(t *testing.T, dir string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return out.String(), errb.String(), ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), 0
}

func oldOrderWarning(verb, what string) string {
	return "warning: `retain " + verb + " TABLE-URI " + what + "` is the old order; write `retain " + verb + " " + what + " TABLE-URI`"
}

// The table-first order of earlier releases still works, with a warning;
// the new order says nothing.
func TestOldArgumentOrderWarns(t *testing.T) {
	db := fixtureDB(t, "branch-tag")
	table := filepath.Join(db, "branch-tag.lance")
	tagWarn, branchWarn := oldOrderWarning("tag create", "TAG"), oldOrderWarning("branch show", "BRANCH")

	// Path, file:// URI, each tag command.
	for _, args := range [][]string{
		{"tag", "create", table, "old-1", "--meta", "k=v"},
		{"tag", "show", table, "old-1"},
		{"tag", "update", "file://" + table, "old-1", "--meta", "k=w"},
		{"tag", "resolve", "file://" + table, "old-1"},
		{"tag", "delete", table, "old-1"},
	} {
		out, errs, code := retain(t, args...)
		want := oldOrderWarning(strings.Join(args[:2], " "), "TAG")
		if code != 0 || !strings.Contains(errs, want) {
			t.Fatalf("retain %v: exit %d, want 0 and %q:\n%s%s", args, code, want, out, errs)
		}
	}
	// The new order: no warning.
	for _, args := range [][]string{
		{"tag", "create", "new-1", table},
		{"tag", "show", "new-1", "file://" + table},
		{"branch", "show", "exp", table},
		{"branch", "show", "team/x", table},
	} {
		if out, errs, code := retain(t, args...); code != 0 || strings.Contains(errs, "warning") {
			t.Fatalf("retain %v: exit %d:\n%s%s", args, code, out, errs)
		}
	}
	// --json: the warning is on stderr, stdout is the one object.
	out, errs, code := retain(t, "tag", "show", table, "new-1", "--json")
	if code != 0 || !strings.Contains(errs, oldOrderWarning("tag show", "TAG")) || !json.Valid([]byte(out)) {
		t.Fatalf("--json: exit %d:\n%s%s", code, out, errs)
	}
	// A branch name may hold a '/': old order with a nested branch name.
	if out, errs, code := retain(t, "branch", "show", table, "team/x"); code != 0 || !strings.Contains(errs, branchWarn) || !strings.Contains(out, "team/x") {
		t.Fatalf("branch show old order: exit %d:\n%s%s", code, out, errs)
	}
	// A relative table path that is a valid branch name ("db/t.lance") is
	// read as the table when it is one and the other argument is not.
	parent := filepath.Dir(db)
	rel := filepath.Join("db", "branch-tag.lance")
	if out, errs, code := retainIn(t, parent, "branch", "show", rel, "exp"); code != 0 || !strings.Contains(errs, branchWarn) {
		t.Fatalf("branch show %s exp: exit %d:\n%s%s", rel, code, out, errs)
	}
	if out, errs, code := retainIn(t, parent, "branch", "show", "exp", rel); code != 0 || strings.Contains(errs, "warning") {
		t.Fatalf("branch show exp %s: exit %d:\n%s%s", rel, code, out, errs)
	}
	// A bare "branch-tag.lance" is a valid tag name: the existing folder
	// decides.
	if out, errs, code := retainIn(t, db, "tag", "create", "branch-tag.lance", "rel-1"); code != 0 || !strings.Contains(errs, tagWarn) {
		t.Fatalf("tag create branch-tag.lance rel-1: exit %d:\n%s%s", code, out, errs)
	}
	if out, errs, code := retainIn(t, db, "tag", "create", "rel-2", "branch-tag.lance"); code != 0 || strings.Contains(errs, "warning") {
		t.Fatalf("tag create rel-2 branch-tag.lance: exit %d:\n%s%s", code, out, errs)
	}
	// A bad name in the old order is refused for its name (exit 2).
	if _, errs, code := retain(t, "tag", "create", table, "bad..name"); code != 2 || !strings.Contains(errs, tagWarn) || !strings.Contains(errs, `".."`) {
		t.Fatalf("bad name, old order: exit %d:\n%s", code, errs)
	}
	out, _, _ = retain(t, "tag", "list", table)
	for _, tg := range []string{"new-1", "rel-1", "rel-2"} {
		if !strings.Contains(out, tg) {
			t.Fatalf("tag %s missing:\n%s", tg, out)
		}
	}
	if strings.Contains(out, "old-1") {
		t.Fatalf("old-1 not deleted:\n%s", out)
	}
}

// Both readings valid (two tables, each a valid tag name): the new order,
// silently.
func TestBothArgumentOrdersValidPrefersNew(t *testing.T) {
	db := fixtureDB(t, "branch-tag", "v2-appends")
	if out, errs, code := retainIn(t, db, "tag", "create", "v2-appends.lance", "branch-tag.lance"); code != 0 || strings.Contains(errs, "warning") {
		t.Fatalf("exit %d:\n%s%s", code, out, errs)
	}
	out, _, _ := retain(t, "tag", "list", filepath.Join(db, "branch-tag.lance"))
	if !strings.Contains(out, "v2-appends.lance") {
		t.Fatalf("the tag is not on the last argument's table:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(db, "v2-appends.lance", "_refs", "tags", "branch-tag.lance.json")); err == nil {
		t.Fatal("read in the old order")
	}
}
