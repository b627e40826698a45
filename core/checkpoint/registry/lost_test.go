package registry

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/retain-dev/retain/core/storage"
)

// DropLostRow gives up one row, records it in the header, survives an
// encode/decode round trip, and refuses what would make the record lie.
func TestDropLostRow(t *testing.T) {
	d := newDraft(t)
	a := reserveT(t, d, "nightly")
	v1 := commitDraft(t, d)
	d = v1.Next()
	row := a.Rows[0]
	l := LostPin{Why: "version 7 is another commit now", Reason: "recreated by ingest", OperationID: "drop-lost-1", At: t0.Add(time.Hour), Actor: "bob"}
	got, err := d.DropLostRow(a.ID, row.TableID, l)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Rows) != len(a.Rows)-1 || len(got.Lost) != 1 || got.Lost[0].Path != row.Path || got.Lost[0].PhysicalRef != row.PhysicalRef {
		t.Fatalf("dropped: %+v", got)
	}
	if before, _ := v1.ByID(a.ID); len(before.Rows) != len(a.Rows) || len(before.Lost) != 0 {
		t.Fatalf("the draft's edit reached the snapshot it came from: %+v", before)
	}
	v2 := commitDraft(t, d)
	back, err := v2.ByID(a.ID)
	if err != nil || len(back.Lost) != 1 || back.Lost[0].Reason != "recreated by ingest" || !strings.Contains(back.Lost[0].String(), row.Path) {
		t.Fatalf("round trip: %+v %v", back, err)
	}

	d = v2.Next()
	if _, err := d.DropLostRow(a.ID, row.TableID, l); storage.KindOf(err) != storage.ErrNotFound {
		t.Errorf("dropping a row twice: %v", err)
	}
	bad := l
	bad.Reason = ""
	if _, err := d.DropLostRow(a.ID, a.Rows[1].TableID, bad); !errors.Is(err, ErrInvalidSnapshot) {
		t.Errorf("no reason: %v", err)
	}
	if _, err := d.DropLostRow(ID("aaaaaaaaaaaaaaaaaaaaaaaaaa"), row.TableID, l); !errors.Is(err, ErrCheckpointNotFound) {
		t.Errorf("unknown checkpoint: %v", err)
	}
	if _, err := d.Tombstone(a.ID, Deletion{OperationID: "op-del", At: t0.Add(2 * time.Hour), Actor: "bob"}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.DropLostRow(a.ID, a.Rows[1].TableID, l); !errors.Is(err, ErrAlreadyTombstoned) {
		t.Errorf("a deleted checkpoint: %v", err)
	}
}
