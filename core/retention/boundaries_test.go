package retention

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/retain-dev/retain/core/checkpoint/registry"
)

// boundaryDraft is a draft cataloguing n tables, the first withRows of
// them with a gc boundary already, and the boundary rows a run would set
// for all n.
func boundaryDraft(t testing.TB, n, withRows int) (*registry.Snapshot, []registry.GCBoundary) {
	t.Helper()
	now := time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)
	d := registry.Empty().Next()
	var rows, old []registry.GCBoundary
	for i := range n {
		tb, err := d.AddTable(registry.NewID(), fmt.Sprintf("t%05d.lance", i), now)
		if err != nil {
			t.Fatal(err)
		}
		g := registry.GCBoundary{TableID: tb.ID, Path: tb.Path, Incarnation: 1, Cutoff: "keep-last 1",
			RootDigest: "sha256:" + fmt.Sprintf("%064x", i), OperationID: "cleanup-old", At: now,
			NewestRemoved: []registry.BranchVersion{{Branch: "main", Version: 2}}}
		if i < withRows {
			old = append(old, g)
		}
		g.NewestRemoved = []registry.BranchVersion{{Branch: "main", Version: 2}}
		g.OperationID, g.At, g.NewestRemoved[0].Version = "cleanup-new", now.Add(time.Hour), 5
		rows = append(rows, g)
	}
	// A few rows one by one, as SetGCBoundary records them; many at once
	// (one by one costs the square of the rows).
	if len(old) <= 50 {
		for _, g := range old {
			if err := d.SetGCBoundary(g); err != nil {
				t.Fatal(err)
			}
		}
	} else if err := setGCBoundaries(d, old); err != nil {
		t.Fatal(err)
	}
	return d, rows
}

// setGCBoundaries leaves the draft exactly as one SetGCBoundary per row
// does: rows of tables with a boundary replaced, the others added, sorted
// by table id.
func TestSetGCBoundariesIsSetGCBoundaryPerRow(t *testing.T) {
	a, rows := boundaryDraft(t, 12, 5)
	b := a.Next()
	b.GCBoundary = append(b.GCBoundary[:0:0], a.GCBoundary...)
	for _, g := range rows[3:] {
		if err := a.SetGCBoundary(g); err != nil {
			t.Fatal(err)
		}
	}
	if err := setGCBoundaries(b, rows[3:]); err != nil {
		t.Fatal(err)
	}
	if len(a.GCBoundary) != 12 || len(b.GCBoundary) != len(a.GCBoundary) {
		t.Fatalf("%d rows one by one, %d at once; want 12", len(a.GCBoundary), len(b.GCBoundary))
	}
	for i := range a.GCBoundary {
		if !bytes.Equal(a.GCBoundary[i], b.GCBoundary[i]) {
			t.Errorf("row %d: one by one %s, at once %s", i, a.GCBoundary[i], b.GCBoundary[i])
		}
	}
	bad := rows[0]
	bad.OperationID = ""
	if err := setGCBoundaries(b, []registry.GCBoundary{bad}); !errors.Is(err, registry.ErrInvalidSnapshot) {
		t.Errorf("a row SetGCBoundary refuses: got %v, want registry.ErrInvalidSnapshot", err)
	}
}

// A run over 2,000 tables sets its boundaries in milliseconds: one
// SetGCBoundary per row decodes and re-encodes every row before it, which
// took seconds of CPU at 1,000 tables (a stall of about 120 round trips
// between planning and the boundary commit).
func TestSetGCBoundariesLinear(t *testing.T) {
	d, rows := boundaryDraft(t, 2000, 2000)
	start := time.Now()
	if err := setGCBoundaries(d, rows); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 1500*time.Millisecond {
		t.Errorf("setting 2,000 boundaries on a draft holding 2,000 took %v, want well under 1.5 s", took)
	}
}
