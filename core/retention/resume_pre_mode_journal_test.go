package retention

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestOnlineResumeOfPreModeJournal: journals written before
// Journal.Mode existed (same format 1) carry no mode. An online run
// (older-than 336h, as the daemon runs it) interrupted before the upgrade
// is refused by the upgraded online daemon as "planned for a write outage"
// on every pass, and no new cleanup runs while it is open: the online
// daemon is wedged until an operator intervenes.
func TestOnlineResumeOfPreModeJournal(t *testing.T) {
	dir, _ := setup(t)
	op := "cleanup-old-build"
	j := `{"format":1,"operation_id":"cleanup-old-build","state":"running","started_at":"2026-11-30T00:00:00Z","updated_at":"2026-11-30T00:00:00Z",` +
		`"policy":{"older_than":"336h0m0s"},"boundary_version":0,"tables":[],"registry":{"remove":[],"kept":0,"state":"pending","deleted":0}}`
	for k, body := range map[string]string{JournalKey(op): j, openKey(op): JournalKey(op) + "\n"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, k)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, k), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, err := Resume(bg, open(t, dir, false), ResumeOptions{OperationID: op, Online: true})
	if errors.Is(err, ErrRunRefused) {
		t.Fatalf("an online run journaled before the mode field is refused by an online resume: %v", err)
	}
	if err != nil {
		t.Fatalf("resume: %v", err)
	}
}
