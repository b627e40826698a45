package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A bad daemon config is refused (exit 2) at its file and line, before the
// store is opened.
func TestDaemonConfigErrorNamesLine(t *testing.T) {
	db := fixtureDB(t, "v2-appends")
	cfg := filepath.Join(t.TempDir(), "retain.yaml")
	os.WriteFile(cfg, []byte("# nightly\nretention:\n  keep_last: 3\n  writers_stopped: true\nintervl: 2h\n"), 0o644)
	_, errs, code := retain(t, "daemon", db, "--config", cfg, "--once")
	if want := "retain: " + cfg + `:5: unknown key "intervl" (did you mean "interval"?)`; code != 2 || !strings.Contains(errs, want) {
		t.Fatalf("exit %d, want 2 and %q:\n%s", code, want, errs)
	}
	os.WriteFile(cfg, []byte("retention:\n  keep_last: 3\n  older_than: 10m\n"), 0o644)
	if out, errs, code := retain(t, "daemon", db, "--config", cfg, "--once", "--json"); code != 2 || !strings.Contains(errs, cfg+":3: retention runs online") || !strings.Contains(out, `"kind": "invalid argument"`) {
		t.Fatalf("online window too short: exit %d\n%s\n%s", code, out, errs)
	}
}
