package checkpoint

import (
	"strings"
	"testing"
	"time"
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
