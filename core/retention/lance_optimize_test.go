package retention

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/retain-dev/retain/core/checkpoint"
	"github.com/retain-dev/retain/core/lance"
	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/internal/lancetest"
)

type optimizeStep struct {
	Op            string `json:"op"`
	Threw         string // "" when it did not throw
	Version       int
	Fragments     int
	UnindexedRows int
	Versions      []int
}

func optimizeOps(t *testing.T, dir string, ops ...map[string]any) []optimizeStep {
	t.Helper()
	var out struct{ Results []optimizeStep }
	lancetest.Node(t, "optimize.cjs", map[string]any{"dir": dir, "table": "t", "index": "id_idx", "ops": ops}, &out)
	for _, r := range out.Results {
		t.Logf("Lance %s: v%d, %d fragments, %d unindexed rows, versions %v, threw %q", r.Op, r.Version, r.Fragments, r.UnindexedRows, r.Versions, r.Threw)
	}
	return out.Results
}

// TestLanceOptimizeBesideRetainPins, with real LanceDB 0.39.0: once a
// retain pin is older than optimize()'s cut-off, optimize throws Lance's
// tagged-version error after compacting and before optimising indexes;
// optimize({cleanupOlderThan: new Date(0)}), the call the docs give,
// compacts and optimises indexes without throwing; retain's cleanup then
// removes the other old versions while Lance still reads the pinned one.
// Lance's auto-cleanup config stalls on the same pin, and
// LanceCleanupHazards reports both with their fix.
func TestLanceOptimizeBesideRetainPins(t *testing.T) {
	if testing.Short() {
		t.Skip("runs LanceDB")
	}
	dir := filepath.Join(t.TempDir(), "db")
	// v1 create, v2 index, v3..v5 one-row appends (one fragment each).
	lancetest.Node(t, "build.cjs", map[string]any{"dir": dir, "table": "t", "skipVersions": true, "steps": []map[string]any{
		{"op": "create", "rows": 3}, {"op": "createIndex", "column": "id"},
		{"op": "add", "rows": 1}, {"op": "add", "rows": 1}, {"op": "add", "rows": 1},
	}}, nil)
	s := open(t, dir, false)
	if _, err := checkpoint.Create(bg, s, "nightly", ""); err != nil {
		t.Fatal(err)
	}

	// Before any fix, LanceCleanupHazards warns with the call to make.
	_, infos, err := checkpoint.List(bg, s)
	if err != nil {
		t.Fatal(err)
	}
	hz := LanceCleanupHazards(bg, s, infos)
	if len(hz) != 1 || hz[0].Table != "t.lance" || len(hz[0].Pins) != 1 || hz[0].Pins[0].Version != 5 || hz[0].Pins[0].CommittedAt == nil ||
		hz[0].Error != "" || hz[0].AutoCleanup != nil || len(hz[0].Warnings) != 1 {
		t.Fatalf("hazards: %+v", hz)
	}
	pinnedAt := *hz[0].Pins[0].CommittedAt
	if time.Since(pinnedAt) > time.Minute || hz[0].OptimizeThrowsFrom == nil || !hz[0].OptimizeThrowsFrom.Equal(pinnedAt.Add(7*24*time.Hour)) ||
		!strings.Contains(hz[0].Warnings[0], LanceOptimizeCall) || !strings.Contains(hz[0].Warnings[0], "main v5 (checkpoint nightly)") {
		t.Fatalf("hazard: %+v", hz[0])
	}

	now := time.Now().UnixMilli()
	r := optimizeOps(t, dir,
		map[string]any{"op": "add", "rows": 1}, // v6, v7: unindexed rows, more fragments
		map[string]any{"op": "add", "rows": 1},
		// A cut-off newer than the pinned commit: what the default 7-day
		// cut-off is a week after the checkpoint.
		map[string]any{"op": "optimize", "cleanupOlderThanAt": now},
		map[string]any{"op": "add", "rows": 2},
		// The documented call.
		map[string]any{"op": "optimize", "cleanupOlderThanAt": 0},
		// Lance's auto-cleanup on every commit, removing all it may.
		map[string]any{"op": "setConfig", "config": map[string]string{"lance.auto_cleanup.interval": "1", "lance.auto_cleanup.older_than": "0s"}},
		map[string]any{"op": "add", "rows": 1},
		map[string]any{"op": "add", "rows": 1},
	)
	added, hazard, beforeFix, fixed, autoCleaned := r[1], r[2], r[3], r[4], r[7]
	// (a) The hazard: the throw, after compaction committed, with the
	// new rows left out of the index.
	if !strings.Contains(hazard.Threw, "tagged version(s) have been marked for cleanup") {
		t.Fatalf("optimize with a cut-off after the pinned commit did not throw Lance's tagged-version error: %+v", hazard)
	}
	if hazard.Fragments >= added.Fragments || hazard.UnindexedRows == 0 {
		t.Fatalf("the throwing optimize: %+v after %+v (want compaction done, index optimisation skipped)", hazard, added)
	}
	// (b) The fix: no throw, compaction and index optimisation done,
	// no version removed.
	if fixed.Threw != "" || fixed.Fragments >= beforeFix.Fragments || fixed.UnindexedRows != 0 || fixed.Versions[0] != 1 {
		t.Fatalf("%s: %+v after %+v (want no throw, fewer fragments, every row indexed, every version kept)", LanceOptimizeCall, fixed, beforeFix)
	}
	// Lance's auto-cleanup removes nothing while the pin is older than
	// its older_than.
	if autoCleaned.Versions[0] != 1 || len(autoCleaned.Versions) != autoCleaned.Version {
		t.Fatalf("auto-cleanup beside a pin: versions %v (want all of 1..%d: it stalls)", autoCleaned.Versions, autoCleaned.Version)
	}
	hz = LanceCleanupHazards(bg, s, infos)
	if len(hz) != 1 || hz[0].AutoCleanup == nil || hz[0].AutoCleanup.Interval != "1" || hz[0].AutoCleanup.OlderThan != "0s" ||
		hz[0].AutoCleanupStallsFrom == nil || !hz[0].AutoCleanupStallsFrom.Equal(pinnedAt) || len(hz[0].Warnings) != 2 ||
		!strings.Contains(hz[0].Warnings[1], "lance.auto_cleanup.interval=1, older_than=0s") {
		t.Fatalf("hazards with auto-cleanup set: %+v", hz)
	}

	// retain's cleanup removes every version but the pin and the head.
	rep, err := Run(bg, s, Policy{KeepLast: 1}, RunOptions{ConfirmWriteOutage: true})
	if err != nil || rep.Failed != 0 || rep.Totals.VersionsRemoved != autoCleaned.Version-2 {
		t.Fatalf("retain cleanup: %+v %v", rep, err)
	}
	var res struct {
		Results []map[string]any `json:"results"`
	}
	lancetest.Node(t, "refs.cjs", map[string]any{"dir": dir, "table": "t", "naming": "v2",
		"ops": []map[string]any{{"op": "count", "ref": pinTagOf(t, s, "t.lance")}, {"op": "count", "ref": 5}}}, &res)
	for _, c := range res.Results {
		if c["version"].(float64) != 5 || c["rows"].(float64) != 6 {
			t.Fatalf("Lance reads the pinned version as %v (want v5, 6 rows)", c)
		}
	}
	after := optimizeOps(t, dir, map[string]any{"op": "optimize", "cleanupOlderThanAt": 0})[0]
	if after.Threw != "" || after.Versions[0] != 5 || after.Versions[1] != autoCleaned.Version {
		t.Fatalf("after retain's cleanup: %+v (want v5, v%d, then optimize's commits)", after, autoCleaned.Version)
	}
}

// pinTagOf returns the name of the ogcp_ tag on table.
func pinTagOf(t *testing.T, s *storage.Store, table string) string {
	t.Helper()
	ds, err := lance.Open(s, table)
	if err != nil {
		t.Fatal(err)
	}
	tags, err := ds.ListTags(bg)
	if err != nil {
		t.Fatal(err)
	}
	for _, tg := range tags {
		if strings.HasPrefix(tg.Name, "ogcp_") {
			return tg.Name
		}
	}
	t.Fatalf("no ogcp_ tag on %s", table)
	return ""
}

// Two checkpoints on one table: the oldest pinned commit sets the date,
// whichever order the checkpoints come in, and each pin keeps its own
// commit time. The fixtures' tables need no LanceDB.
func TestLanceCleanupHazardsOldestPin(t *testing.T) {
	dir, _ := setup(t) // "nightly" pins deletes.lance v3
	s := open(t, dir, false)
	if _, err := checkpoint.Create(bg, s, "a-later", ""); err != nil { // v5
		t.Fatal(err)
	}
	_, infos, err := checkpoint.List(bg, s)
	if err != nil {
		t.Fatal(err)
	}
	ds, err := lance.Open(s, "deletes.lance")
	if err != nil {
		t.Fatal(err)
	}
	at := map[uint64]time.Time{}
	for _, n := range []uint64{3, 5} {
		v, err := ds.VersionAt(bg, n)
		if err != nil {
			t.Fatal(err)
		}
		m, err := ds.ReadManifest(bg, v)
		if err != nil {
			t.Fatal(err)
		}
		at[n] = m.Timestamp
	}
	if !at[3].Before(at[5]) {
		t.Fatalf("fixture commit times %v", at)
	}
	var h *LanceCleanupHazard
	hz := LanceCleanupHazards(bg, s, infos)
	for i := range hz {
		if hz[i].Table == "deletes.lance" {
			h = &hz[i]
		}
	}
	if len(hz) != 2 || h == nil || len(h.Pins) != 2 || h.Error != "" {
		t.Fatalf("hazards: %+v", hz)
	}
	if p := h.Pins; p[0].Version != 3 || p[0].Checkpoint != "nightly" || !p[0].CommittedAt.Equal(at[3]) ||
		p[1].Version != 5 || p[1].Checkpoint != "a-later" || !p[1].CommittedAt.Equal(at[5]) {
		t.Fatalf("pins: %+v", p)
	}
	if h.OptimizeThrowsFrom == nil || !h.OptimizeThrowsFrom.Equal(at[3].Add(LanceOptimizeCutoff)) ||
		!strings.Contains(h.Warnings[0], "retain pins main v3 (checkpoint nightly), main v5 (checkpoint a-later);") {
		t.Fatalf("hazard: %+v", h)
	}
}
