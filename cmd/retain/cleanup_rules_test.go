package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCleanupWindowFlags: --branch-window and --table-window reach the
// plan (each decision names its rule) and the run; a bad rule is a usage
// error.
func TestCleanupWindowFlags(t *testing.T) {
	db := fixtureDB(t, "deletes", "branch-tag")
	out, errs, code := retain(t, "cleanup", "preview", db, "--keep-last", "1", "--branch-window", "exp:keep-last=9", "--table-window", "deletes:keep-last=2")
	if code != 0 {
		t.Fatalf("preview: %d %s", code, errs)
	}
	for _, want := range []string{"branch rule exp: keep-last=9", "table rule deletes: keep-last=2", "window: keep-last 9 (branch rule exp)", "window: keep-last 2 (table rule deletes)"} {
		if !strings.Contains(out, want) {
			t.Errorf("preview lacks %q:\n%s", want, out)
		}
	}
	if _, errs, code := retain(t, "cleanup", "run", db, "--keep-last", "1", "--branch-window", "exp:keep-last=9", "--table-window", "deletes:keep-last=2", "--confirm-write-outage"); code != 0 {
		t.Fatalf("run: %d %s", code, errs)
	}
	for _, k := range []string{"deletes.lance/_versions/18446744073709551611.manifest", "branch-tag.lance/tree/exp/_versions/18446744073709551613.manifest"} {
		if _, err := os.Stat(filepath.Join(db, k)); err != nil {
			t.Errorf("%s, kept by a rule, is gone: %v", k, err)
		}
	}
	if _, err := os.Stat(filepath.Join(db, "deletes.lance/_versions/18446744073709551612.manifest")); err == nil {
		t.Error("deletes.lance v3, outside the table rule's keep-last 2, was kept")
	}
	for _, bad := range [][]string{{"--branch-window", "exp"}, {"--table-window", "x:keep-last=0"}} {
		if _, errs, code := retain(t, append([]string{"cleanup", "preview", db, "--keep-last", "1"}, bad...)...); code != 2 {
			t.Errorf("%q: %d %s", bad, code, errs)
		}
	}
	if _, errs, code := retain(t, "cleanup", "run", db, "--branch-window", "exp:keep-last=9", "--confirm-write-outage"); code != 2 || !strings.Contains(errs, "needs --older-than D and/or --keep-last N") {
		t.Errorf("rules without a window: %d %s", code, errs)
	}
}
