package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/retain-dev/retain/core/retention"
)

// status warns per pinned table that LanceDB's optimize() throws once a
// pin is older than its 7-day cut-off, when, and what to call instead;
// with no checkpoint it says nothing about it.
func TestStatusWarnsOfLanceOptimize(t *testing.T) {
	db := fixtureDB(t, "v2-appends", "update")
	out, errs, code := retain(t, "status", db)
	if code != 0 || strings.Contains(out, "lance cleanup") {
		t.Fatalf("status without checkpoints: %d %s %s", code, out, errs)
	}
	if _, errs, code := retain(t, "checkpoint", "create", "nightly", db); code != 0 {
		t.Fatalf("create: %d %s", code, errs)
	}
	out, errs, code = retain(t, "status", db)
	for _, tb := range []string{"update.lance", "v2-appends.lance"} {
		if code != 0 || !strings.Contains(out, "lance cleanup  "+tb+": retain pins main v") || !strings.Contains(out, retention.LanceOptimizeCall) {
			t.Fatalf("status: %d\n%s\n%s", code, out, errs)
		}
	}
	out, _, code = retain(t, "status", db, "--json")
	var st struct {
		LanceCleanup []retention.LanceCleanupHazard `json:"lance_cleanup"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil || len(st.LanceCleanup) != 2 {
		t.Fatalf("status --json: %d %s", code, out)
	}
	for _, h := range st.LanceCleanup {
		if len(h.Pins) != 1 || h.Pins[0].CommittedAt == nil || h.OptimizeThrowsFrom == nil ||
			!h.OptimizeThrowsFrom.Equal(h.Pins[0].CommittedAt.Add(7*24*time.Hour)) || h.Error != "" {
			t.Fatalf("hazard: %+v", h)
		}
	}
}

// A store of many pinned tables gets the optimize() warning once, naming
// the table it hits first, not a line per table; --json keeps every table.
func TestStatusOptimizeWarningOnceForManyTables(t *testing.T) {
	db := fixtureDB(t, "v2-appends", "update", "deletes", "index", "v1-naming")
	if _, errs, code := retain(t, "checkpoint", "create", "nightly", db); code != 0 {
		t.Fatalf("create: %d %s", code, errs)
	}
	out, errs, code := retain(t, "status", db)
	if code != 0 || strings.Count(out, retention.LanceOptimizeCall) != 1 || !strings.Contains(out, "lance cleanup  5 pinned tables; first ") {
		t.Fatalf("status of 5 pinned tables: %d\n%s\n%s", code, out, errs)
	}
	out, _, _ = retain(t, "status", db, "--json")
	var st struct {
		LanceCleanup []retention.LanceCleanupHazard `json:"lance_cleanup"`
	}
	if json.Unmarshal([]byte(out), &st) != nil || len(st.LanceCleanup) != 5 {
		t.Fatalf("status --json: %s", out)
	}
}
