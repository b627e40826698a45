package registry

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/retain-dev/retain/core/storage"
)

func TestGCBoundaryRows(t *testing.T) {
	d := Empty().Next()
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	digest := "sha256:" + strings.Repeat("ab", 32)
	b := GCBoundary{TableID: NewID(), Path: "b.lance", Incarnation: 1, Cutoff: "keep-last 1", RootDigest: digest, OperationID: "cleanup-x", At: at}
	a := b
	a.TableID, a.Path = NewID(), "a.lance"
	for _, g := range []GCBoundary{b, a} {
		if err := d.SetGCBoundary(g); err != nil {
			t.Fatal(err)
		}
	}
	b.Cutoff = "keep-last 2"
	if err := d.SetGCBoundary(b); err != nil { // replaces, not appends
		t.Fatal(err)
	}
	bad := b
	bad.RootDigest = "md5:x"
	if err := d.SetGCBoundary(bad); err == nil {
		t.Fatal("a bad digest was accepted")
	}
	if err := Empty().SetGCBoundary(b); err == nil {
		t.Fatal("edited a non-draft")
	}
	body, _, err := d.Encode()
	if err != nil {
		t.Fatal(err)
	}
	s, err := decode(VersionKey(1), body, 1)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := s.Next().GCBoundaries()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0].TableID > rows[1].TableID {
		t.Fatalf("rows: %+v", rows)
	}
	for _, r := range rows {
		if r.TableID == b.TableID && r.Cutoff != "keep-last 2" {
			t.Fatalf("not replaced: %+v", r)
		}
	}
}

func TestCheckGCBoundary(t *testing.T) {
	d := Empty().Next()
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	tbl, err := d.AddTable(NewID(), "t.lance", at)
	if err != nil {
		t.Fatal(err)
	}
	g := GCBoundary{TableID: tbl.ID, Path: "t.lance", Incarnation: tbl.Incarnation, Cutoff: "keep-last 1",
		RootDigest: "sha256:" + strings.Repeat("ab", 32), OperationID: "cleanup-x", At: at,
		NewestRemoved: []BranchVersion{{Branch: "exp", Version: 3}, {Branch: "main", Version: 7}}}
	if err := d.SetGCBoundary(g); err != nil {
		t.Fatal(err)
	}
	pin := func(branch string, v, inc uint64) Pin {
		return Pin{TableID: tbl.ID, Incarnation: inc, Target: Target{Path: "t.lance", Branch: branch, Version: v}}
	}
	for _, c := range []struct {
		p      Pin
		behind bool
	}{
		{pin("main", 7, 1), true},
		{pin("main", 2, 1), true},
		{pin("main", 8, 1), false},
		{pin("exp", 3, 1), true},
		{pin("exp", 4, 1), false},
		{pin("other", 1, 1), false}, // nothing removed from that branch
		{pin("main", 2, 2), false},  // another incarnation: a recreated table
	} {
		err := d.CheckGCBoundary(c.p)
		if got := errors.Is(err, ErrBehindGCBoundary); got != c.behind {
			t.Errorf("%s v%d inc %d: behind=%v, err %v", c.p.Branch, c.p.Version, c.p.Incarnation, got, err)
		}
		if c.behind && !errors.Is(err, storage.ErrPreconditionFailed) {
			t.Errorf("kind: %v", err)
		}
	}
	// Reserve refuses a checkpoint whose pin is behind the boundary.
	_, err = d.Reserve(NewCheckpoint{ID: NewID(), Name: "old", SourceBranch: "main", CreatedAt: at, Actor: "t",
		Pins: []Pin{{TableID: tbl.ID, Incarnation: 1, Target: Target{Path: "t.lance", Branch: "main", Version: 5, PhysicalRef: physRef("t.lance", 5)}}}})
	if !errors.Is(err, ErrBehindGCBoundary) {
		t.Fatalf("reserve behind the boundary: %v", err)
	}
	unsorted := g
	unsorted.NewestRemoved = []BranchVersion{{Branch: "main", Version: 7}, {Branch: "exp", Version: 3}}
	if err := d.SetGCBoundary(unsorted); err == nil {
		t.Fatal("unsorted newest_removed accepted")
	}
}
