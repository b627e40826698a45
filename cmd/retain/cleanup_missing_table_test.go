package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A pinned table deleted outright: cleanup preview refuses the store and
// names the way out, as reconcile does; the drop-lost command it names,
// pasted, gives that pin up and the store plans again. Before, preview
// said only that the table no longer exists.
func TestCleanupPreviewOfMissingPinnedTableNamesDropLost(t *testing.T) {
	db := fixtureDB(t, "deletes", "branch-tag")
	if _, errs, code := retain(t, "checkpoint", "create", "nightly", db); code != 0 {
		t.Fatalf("create: %d %s", code, errs)
	}
	if err := os.RemoveAll(filepath.Join(db, "deletes.lance")); err != nil {
		t.Fatal(err)
	}
	_, errs, code := retain(t, "cleanup", "preview", db, "--keep-last", "1")
	if code == 0 || !strings.Contains(errs, "no longer exists") {
		t.Fatalf("preview with a pinned table gone: %d %s", code, errs)
	}
	cmd := heldCommand(t, errs, "retain checkpoint drop-lost ", db)
	if out, code := runShell(t, strings.Replace(cmd, "--reason WHY", "--reason 'deleted by hand'", 1)); code != 0 {
		t.Fatalf("the drop-lost command preview names, pasted: %s: exit %d %s", cmd, code, out)
	}
	if out, errs, code := retain(t, "cleanup", "preview", db, "--keep-last", "1"); code != 0 {
		t.Fatalf("preview after drop-lost: %d %s %s", code, out, errs)
	}
}
