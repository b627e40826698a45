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

// TestCleanupPreviewFromDaemonConfig: --config previews by the daemon's
// own window and rules, as its next retention pass would plan.
func TestCleanupPreviewFromDaemonConfig(t *testing.T) {
	db := fixtureDB(t, "deletes", "branch-tag")
	cfg := filepath.Join(t.TempDir(), "daemon.yaml")
	if err := os.WriteFile(cfg, []byte("retention:\n  keep_last: 1\n  writers_stopped: true\n  branches:\n    \"exp\": {keep_last: 9}\n  tables:\n    \"deletes\": {keep_last: 2}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errs, code := retain(t, "cleanup", "preview", db, "--config", cfg)
	if code != 0 {
		t.Fatalf("preview --config: %d %s", code, errs)
	}
	for _, want := range []string{"window: keep-last 9 (branch rule exp)", "window: keep-last 2 (table rule deletes)", "window: keep-last 1"} {
		if !strings.Contains(out, want) {
			t.Errorf("preview --config lacks %q:\n%s", want, out)
		}
	}
	if _, errs, code := retain(t, "cleanup", "preview", db, "--config", cfg, "--keep-last", "3"); code != 2 || !strings.Contains(errs, "--config takes the window") {
		t.Errorf("--config with a window: %d %s", code, errs)
	}
	empty := filepath.Join(t.TempDir(), "empty.yaml")
	os.WriteFile(empty, []byte("interval: 1h\n"), 0o644)
	if _, errs, code := retain(t, "cleanup", "preview", db, "--config", empty); code != 2 || !strings.Contains(errs, "sets no retention window") {
		t.Errorf("--config without a window: %d %s", code, errs)
	}
}
