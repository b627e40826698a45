package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/retain-dev/retain/core/checkpoint"
)

// TestCleanupPreviewCLI: a checkpoint taken while deletes.lance's head was
// v3, then v4 and v5 committed (their manifests hidden, then put back).
func TestCleanupPreviewCLI(t *testing.T) {
	db := fixtureDB(t, "deletes", "branch-tag")
	hidden := t.TempDir()
	later := []string{"18446744073709551611.manifest", "18446744073709551610.manifest"} // v4, v5
	vdir := filepath.Join(db, "deletes.lance", "_versions")
	for _, n := range later {
		if err := os.Rename(filepath.Join(vdir, n), filepath.Join(hidden, n)); err != nil {
			t.Fatal(err)
		}
	}
	out, errs, code := retain(t, "checkpoint", "create", "nightly", db, "--json")
	var c checkpoint.Created
	if code != 0 || json.Unmarshal([]byte(out), &c) != nil {
		t.Fatalf("create: %d %s %s", code, out, errs)
	}
	for _, n := range later {
		if err := os.Rename(filepath.Join(hidden, n), filepath.Join(vdir, n)); err != nil {
			t.Fatal(err)
		}
	}
	before := filesUnder(t, db)
	cp := "checkpoint nightly (" + string(c.ID) + ")"

	if _, errs, code := retain(t, "cleanup", "preview", db); code != 2 || !strings.Contains(errs, "--keep-last") {
		t.Fatalf("no window: %d %s", code, errs)
	}

	out, errs, code = retain(t, "cleanup", "preview", db, "--keep-last", "1")
	if code != 0 {
		t.Fatalf("preview: %d %s", code, errs)
	}
	for _, want := range []string{"PROVISIONAL", "table deletes.lance", "table branch-tag.lance", cp, "REMOVE", "KEEP",
		"foreign tag v2-tag", "fork point of branch exp", "would be reclaimed", "total: 2 tables", "write outage", "no writer may commit", "deferring: "} {
		if !strings.Contains(out, want) {
			t.Fatalf("preview text lacks %q:\n%s", want, out)
		}
	}

	out, errs, code = retain(t, "cleanup", "preview", db, "--keep-last", "1", "--older-than", "1h", "--json")
	var rep struct {
		Store               string `json:"store"`
		Provisional         bool   `json:"provisional"`
		RunNeedsWriteOutage bool   `json:"run_needs_write_outage"`
		Tables              []struct {
			Table    string `json:"table"`
			Versions []struct {
				Branch  string   `json:"branch"`
				Version uint64   `json:"version"`
				Keep    bool     `json:"keep"`
				Reasons []string `json:"reasons"`
			} `json:"versions"`
			Totals struct {
				VersionsRemoved int   `json:"versions_removed"`
				BytesToDelete   int64 `json:"bytes_to_delete"`
			} `json:"totals"`
		} `json:"tables"`
		Totals struct {
			VersionsRemoved int   `json:"versions_removed"`
			BytesToDelete   int64 `json:"bytes_to_delete"`
		} `json:"totals"`
		DeferringCost struct {
			VersionsRemovable int   `json:"versions_removable"`
			BytesReclaimable  int64 `json:"bytes_reclaimable"`
			Since             string
		} `json:"deferring_cost"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil {
		t.Fatalf("preview --json: %d %s %s", code, out, errs)
	}
	if !rep.Provisional || !rep.RunNeedsWriteOutage || len(rep.Tables) != 2 || rep.Totals.VersionsRemoved == 0 ||
		rep.DeferringCost.VersionsRemovable != rep.Totals.VersionsRemoved || rep.DeferringCost.BytesReclaimable != rep.Totals.BytesToDelete || rep.DeferringCost.Since == "" {
		t.Fatalf("preview --json: %s", out)
	}
	for _, tb := range rep.Tables {
		if tb.Table != "deletes.lance" {
			continue
		}
		for _, v := range tb.Versions {
			pinned := slices.Contains(v.Reasons, cp)
			if (v.Version == 3) != pinned || v.Keep != (v.Version == 3 || v.Version == 5) {
				t.Fatalf("deletes v%d: %+v", v.Version, v)
			}
		}
	}

	if after := filesUnder(t, db); !slices.Equal(before, after) {
		t.Fatalf("preview changed the store:\nbefore %v\nafter  %v", before, after)
	}

	// A corrupt manifest refuses the whole store, naming the table.
	if err := os.WriteFile(filepath.Join(db, "branch-tag.lance", "_versions", "18446744073709551614.manifest"), []byte("junk"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errs, code = retain(t, "cleanup", "preview", db, "--keep-last", "1")
	if code != 1 || out != "" || !strings.Contains(errs, `table "branch-tag.lance"`) || !strings.Contains(errs, "18446744073709551614.manifest") {
		t.Fatalf("corrupt: %d %q %s", code, out, errs)
	}
}
