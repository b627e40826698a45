package registry

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/retain-dev/retain/core/storage"
)

func encodeT(t testing.TB, s *Snapshot) []byte {
	t.Helper()
	b, _, err := s.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// commitDraft turns a draft into what a reader gets back: encode, decode.
func commitDraft(t testing.TB, s *Snapshot) *Snapshot {
	t.Helper()
	out, err := decode(VersionKey(s.Version), encodeT(t, s), s.Version)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestReserveTombstoneReviveLifecycle(t *testing.T) {
	d := newDraft(t)
	a := reserveT(t, d, "nightly")
	if a.State != Live || a.Generation != 1 || a.RegistryVersion != 1 || len(a.Rows) != 2 || a.Tombstone != nil {
		t.Fatalf("reserved %+v", a)
	}
	// Insert-only.
	if _, err := d.Reserve(newCheckpoint(d, "nightly")); !errors.Is(err, ErrNameTaken) || !errors.Is(err, storage.ErrAlreadyExists) {
		t.Fatalf("second reserve: %v", err)
	}
	v1 := commitDraft(t, d)

	d = v1.Next()
	del := Deletion{OperationID: "op-del-1", At: t0.Add(time.Hour), Actor: "bob"}
	got, err := d.Tombstone(a.ID, del)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != Tombstoned || got.Tombstone == nil || got.Tombstone.DeleteOperationID != "op-del-1" || got.Tombstone.Generation != 1 {
		t.Fatalf("tombstoned %+v %+v", got, got.Tombstone)
	}
	for _, r := range got.Rows {
		if r.State != Tombstoned {
			t.Fatalf("row %+v not tombstoned", r)
		}
	}
	if r, _ := d.Reservation("nightly"); r.State != Tombstoned || r.Generation != 1 || r.CheckpointID != a.ID {
		t.Fatalf("reservation %+v", r)
	}
	if _, err := d.Tombstone(a.ID, del); !errors.Is(err, ErrAlreadyTombstoned) || !strings.Contains(err.Error(), "op-del-1") {
		t.Fatalf("second tombstone: %v", err)
	}
	if _, err := d.ByName("nightly"); !errors.Is(err, ErrCheckpointNotFound) || !strings.Contains(err.Error(), "op-del-1") {
		t.Fatalf("lookup of a deleted name: %v", err)
	}
	if len(d.Live()) != 0 {
		t.Fatalf("live: %+v", d.Live())
	}
	v2 := commitDraft(t, d)

	d = v2.Next()
	// Insert-only refuses a tombstoned name, and says how to reuse it.
	if _, err := d.Reserve(newCheckpoint(d, "nightly")); !errors.Is(err, ErrNameTombstoned) || !strings.Contains(err.Error(), "Revive(1") {
		t.Fatalf("reserve of a tombstoned name: %v", err)
	}
	if _, err := d.Revive(2, newCheckpoint(d, "nightly")); !errors.Is(err, ErrStaleGeneration) || !errors.Is(err, storage.ErrPreconditionFailed) {
		t.Fatalf("revive with the wrong generation: %v", err)
	}
	if _, err := d.Revive(1, newCheckpoint(d, "never-reserved")); !errors.Is(err, ErrCheckpointNotFound) {
		t.Fatalf("revive of an unknown name: %v", err)
	}
	// The old id never revives.
	old := newCheckpoint(d, "nightly")
	old.ID = a.ID
	if _, err := d.Revive(1, old); !errors.Is(err, ErrInvalidSnapshot) {
		t.Fatalf("revive with the old id: %v", err)
	}
	b, err := d.Revive(1, newCheckpoint(d, "nightly"))
	if err != nil {
		t.Fatal(err)
	}
	if b.ID == a.ID || b.Generation != 2 || b.State != Live || b.RegistryVersion != 3 {
		t.Fatalf("revived %+v", b)
	}
	if _, err := d.Revive(1, newCheckpoint(d, "nightly")); !errors.Is(err, ErrNameTaken) {
		t.Fatalf("revive of a live name: %v", err)
	}
	if c, err := d.ByName("nightly"); err != nil || c.ID != b.ID {
		t.Fatalf("by name: %+v %v", c, err)
	}
	if c, err := d.ByID(a.ID); err != nil || c.State != Tombstoned || c.Tombstone == nil {
		t.Fatalf("old id: %+v %v", c, err)
	}
	v3 := commitDraft(t, d)

	// Purge forgets the old checkpoint, keeps the name's generation.
	d = v3.Next()
	if err := d.Purge(b.ID); !errors.Is(err, ErrInvalidSnapshot) {
		t.Fatalf("purge of a live checkpoint: %v", err)
	}
	if err := d.Purge(a.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := d.ByID(a.ID); !errors.Is(err, ErrCheckpointNotFound) || !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("purged id: %v", err)
	}
	if len(d.Rows) != 2 || len(d.Tombstones) != 0 || len(d.Checkpoints) != 1 {
		t.Fatalf("after purge: %d rows, %d tombstones, %d headers", len(d.Rows), len(d.Tombstones), len(d.Checkpoints))
	}
	v4 := commitDraft(t, d)
	if r, _ := v4.Reservation("nightly"); r.Generation != 2 || r.CheckpointID != b.ID {
		t.Fatalf("reservation after purge %+v", r)
	}
}

func TestDraftsAndFailedEditsLeaveSnapshotsAlone(t *testing.T) {
	d := newDraft(t)
	reserveT(t, d, "a")
	head := commitDraft(t, d)
	before := encodeT(t, head)

	if _, err := head.Reserve(newCheckpoint(head, "b")); !errors.Is(err, ErrInvalidSnapshot) {
		t.Fatalf("edit of a non-draft: %v", err)
	}
	next := head.Next()
	reserveT(t, next, "b")
	if _, err := next.AddTable(testID(1500), "db/c.lance", t0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(encodeT(t, head), before) {
		t.Fatal("editing a draft changed the snapshot it came from")
	}

	// A failed edit leaves the draft as it was.
	snap := encodeT(t, next)
	bad := newCheckpoint(next, "c")
	bad.Pins = append(bad.Pins, bad.Pins[0]) // pinned twice
	for name, f := range map[string]func() error{
		"pinned twice": func() error { _, err := next.Reserve(bad); return err },
		"invalid name": func() error { _, err := next.Reserve(newCheckpoint(next, "__x")); return err },
		"no actor":     func() error { c := newCheckpoint(next, "c"); c.Actor = ""; _, err := next.Reserve(c); return err },
		"no time": func() error {
			c := newCheckpoint(next, "c")
			c.CreatedAt = time.Time{}
			_, err := next.Reserve(c)
			return err
		},
		"bad branch": func() error {
			c := newCheckpoint(next, "c")
			c.SourceBranch = ""
			_, err := next.Reserve(c)
			return err
		},
		"bad id": func() error { c := newCheckpoint(next, "c"); c.ID = "x"; _, err := next.Reserve(c); return err },
		"uncatalogued table": func() error {
			c := newCheckpoint(next, "c")
			c.Pins[0].TableID = testID(1999)
			_, err := next.Reserve(c)
			return err
		},
		"wrong path": func() error {
			c := newCheckpoint(next, "c")
			c.Pins[0].Path = "db/z.lance"
			c.Pins[0].PhysicalRef = physRef("db/z.lance", 7)
			_, err := next.Reserve(c)
			return err
		},
		"ref of another version": func() error {
			c := newCheckpoint(next, "c")
			c.Pins[0].PhysicalRef = physRef(c.Pins[0].Path, 8)
			_, err := next.Reserve(c)
			return err
		},
		"ref outside the table": func() error {
			c := newCheckpoint(next, "c")
			c.Pins[0].PhysicalRef = physRefV1("db/b.lance", 7) // only format 1 records a key
			_, err := next.Reserve(c)
			return err
		},
		"not a physical ref": func() error {
			c := newCheckpoint(next, "c")
			c.Pins[0].PhysicalRef = "x"
			_, err := next.Reserve(c)
			return err
		},
		"tombstone unknown": func() error {
			_, err := next.Tombstone(testID(1999), Deletion{OperationID: "op", At: t0, Actor: "x"})
			return err
		},
		"tombstone no op id": func() error {
			c, _ := next.ByName("a")
			_, err := next.Tombstone(c.ID, Deletion{At: t0, Actor: "x"})
			return err
		},
		"tombstone op id with space": func() error {
			c, _ := next.ByName("a")
			_, err := next.Tombstone(c.ID, Deletion{OperationID: "op 1", At: t0, Actor: "x"})
			return err
		},
		"duplicate table path": func() error { _, err := next.AddTable(testID(1600), "db/a.lance", t0); return err },
		"duplicate table id":   func() error { _, err := next.AddTable(testID(1000), "db/q.lance", t0); return err },
		"bad table path":       func() error { _, err := next.AddTable(testID(1601), "db/../x", t0); return err },
	} {
		err := f()
		if err == nil {
			t.Errorf("%s: accepted", name)
			continue
		}
		if !errors.Is(err, storage.ErrInvalidArgument) && !errors.Is(err, ErrCheckpointNotFound) {
			t.Errorf("%s: %v, want invalid argument or not found", name, err)
		}
		if !bytes.Equal(encodeT(t, next), snap) {
			t.Fatalf("%s: the failed edit changed the draft", name)
		}
	}
}

func TestCatalogIncarnations(t *testing.T) {
	d := newDraft(t)
	a := reserveT(t, d, "before")
	tb, _ := d.TableByPath("db/a.lance")
	if _, err := d.NewIncarnation(tb.ID, t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	// A new checkpoint must pin the current incarnation...
	stale := newCheckpoint(d, "stale")
	stale.Pins[0].Incarnation = 1
	if stale.Pins[0].TableID != tb.ID {
		t.Fatal("test setup: first pin is not db/a.lance")
	}
	if _, err := d.Reserve(stale); !errors.Is(err, ErrInvalidSnapshot) || !strings.Contains(err.Error(), "recreated") {
		t.Fatalf("pin of an old incarnation: %v", err)
	}
	c := newCheckpoint(d, "after")
	if _, err := d.Reserve(c); err != nil || c.Pins[0].Incarnation != 2 {
		t.Fatalf("pin of the new incarnation: %v %+v", err, c.Pins[0])
	}
	// ... while the old checkpoint's rows keep incarnation 1 and stay valid.
	s := commitDraft(t, d)
	old, _ := s.ByID(a.ID)
	if old.Rows[0].Incarnation != 1 {
		t.Fatalf("old row %+v", old.Rows[0])
	}
	// Same table, same version, different incarnation: different tags.
	t1, _ := TablePinTag(a.ID, old.Rows[0].Pin)
	p2 := old.Rows[0].Pin
	p2.Incarnation = 2
	t2, _ := TablePinTag(a.ID, p2)
	if t1 == t2 {
		t.Fatal("incarnation is not part of the table pin's digest")
	}
}

func TestLookupNameOrID(t *testing.T) {
	d := newDraft(t)
	a := reserveT(t, d, "a")
	if c, err := d.Lookup("a"); err != nil || c.ID != a.ID {
		t.Fatalf("by name: %v", err)
	}
	if c, err := d.Lookup(string(a.ID)); err != nil || c.Name != "a" {
		t.Fatalf("by id: %v", err)
	}
	// A name that is another checkpoint's id.
	b := reserveT(t, d, string(a.ID))
	if _, err := d.Lookup(string(a.ID)); !errors.Is(err, ErrAmbiguous) || !errors.Is(err, storage.ErrInvalidArgument) {
		t.Fatalf("ambiguous: %v", err)
	}
	if c, err := d.Lookup(string(b.ID)); err != nil || c.ID != b.ID {
		t.Fatalf("by the other id: %v", err)
	}
	if _, err := d.Lookup("zzz"); !errors.Is(err, ErrCheckpointNotFound) || !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("unknown: %v", err)
	}
	if _, err := d.Lookup(string(NewID())); !errors.Is(err, ErrCheckpointNotFound) {
		t.Fatalf("unknown id: %v", err)
	}
	names := []string{}
	for _, c := range d.Live() {
		names = append(names, c.Name)
	}
	if strings.Join(names, ",") != "a,"+string(a.ID) {
		t.Fatalf("live %v", names)
	}
}

func TestEncodingIsDeterministicAndRoundTrips(t *testing.T) {
	d := newDraft(t)
	for _, n := range []string{"z", "a", "m/x", "m"} {
		reserveT(t, d, n)
	}
	b1, r1, err := d.Encode()
	if err != nil {
		t.Fatal(err)
	}
	b2, r2, _ := d.Encode()
	if !bytes.Equal(b1, b2) || r1 != r2 {
		t.Fatal("Encode is not deterministic")
	}
	back := commitDraft(t, d)
	if b3 := encodeT(t, redraft(back)); !bytes.Equal(b3, b1) {
		t.Fatalf("decode+encode changed the bytes:\n%s\n%s", b1, b3)
	}
	if !bytes.Contains(b1, []byte(`"version":"00000000000000000001"`)) || !bytes.Contains(b1, []byte(`"gc_boundary":[]`)) {
		t.Fatalf("encoding: %s", b1)
	}
	if back.Ref() != r1 {
		t.Fatalf("decoded ref %v, encoded %v", back.Ref(), r1)
	}
}

// withVersion is a test hook: the same content at another version.
// redraft is a draft with exactly s's content (its version and prev too),
// to encode it again.
func redraft(s *Snapshot) *Snapshot {
	n := s.Next()
	n.Version, n.Prev = s.Version, s.Prev
	return n
}

// Every invariant breach in a stored version is ErrCorruptRegistry.
func TestDecodeRefusesCorruptSnapshots(t *testing.T) {
	d := newDraft(t)
	a := reserveT(t, d, "a")
	reserveT(t, d, "b")
	if _, err := d.Tombstone(a.ID, Deletion{OperationID: "op-1", At: t0, Actor: "x"}); err != nil {
		t.Fatal(err)
	}
	good := encodeT(t, d)
	if _, err := decode(VersionKey(1), good, 1); err != nil {
		t.Fatal(err)
	}
	edit := func(f func(m map[string]any)) []byte {
		var m map[string]any
		if err := json.Unmarshal(good, &m); err != nil {
			t.Fatal(err)
		}
		f(m)
		b, _ := json.Marshal(m)
		return b
	}
	list := func(m map[string]any, k string) []any { return m[k].([]any) }
	obj := func(m map[string]any, k string, i int) map[string]any { return list(m, k)[i].(map[string]any) }
	for name, body := range map[string][]byte{
		"not JSON":                  []byte("{"),
		"empty":                     {},
		"trailing data":             append(append([]byte{}, good...), []byte(`{}`)...),
		"unknown field":             edit(func(m map[string]any) { m["extra"] = 1 }),
		"format 3":                  edit(func(m map[string]any) { m["format"] = 3 }),
		"format 1 with prev":        edit(func(m map[string]any) { m["format"] = 1; m["prev"] = "sha256:" + strings.Repeat("0", 64) }),
		"prev not a digest":         edit(func(m map[string]any) { m["prev"] = "sha256:xyz" }),
		"version mismatch":          edit(func(m map[string]any) { m["version"] = "00000000000000000002" }),
		"numeric version":           edit(func(m map[string]any) { m["version"] = 1 }),
		"short version":             edit(func(m map[string]any) { m["version"] = "1" }),
		"invalid name":              edit(func(m map[string]any) { obj(m, "names", 0)["name"] = "__a" }),
		"unsorted names":            edit(func(m map[string]any) { n := list(m, "names"); n[0], n[1] = n[1], n[0] }),
		"bad state":                 edit(func(m map[string]any) { obj(m, "names", 1)["state"] = "dead" }),
		"generation 0":              edit(func(m map[string]any) { obj(m, "names", 1)["generation"] = 0 }),
		"live name, tombstoned hdr": edit(func(m map[string]any) { obj(m, "names", 0)["state"] = "live" }),
		"name and header disagree":  edit(func(m map[string]any) { obj(m, "names", 1)["generation"] = 2 }),
		"header without name":       edit(func(m map[string]any) { m["names"] = list(m, "names")[:1] }),
		"row state differs":         edit(func(m map[string]any) { obj(m, "rows", 0)["state"] = "live"; obj(m, "rows", 2)["state"] = "tombstoned" }),
		"row of unknown table":      edit(func(m map[string]any) { m["tables"] = list(m, "tables")[:1] }),
		"row bad physical ref":      edit(func(m map[string]any) { obj(m, "rows", 0)["physical_ref"] = "x" }),
		"row version differs":       edit(func(m map[string]any) { obj(m, "rows", 0)["version"] = 8 }),
		"missing tombstone":         edit(func(m map[string]any) { m["tombstones"] = []any{} }),
		"tombstone without op id":   edit(func(m map[string]any) { obj(m, "tombstones", 0)["delete_operation_id"] = "" }),
		"registry version ahead":    edit(func(m map[string]any) { obj(m, "checkpoints", 0)["registry_version"] = "00000000000000000002" }),
		"no created_at":             edit(func(m map[string]any) { obj(m, "checkpoints", 0)["created_at"] = "0001-01-01T00:00:00Z" }),
		"duplicate table path":      edit(func(m map[string]any) { obj(m, "tables", 1)["path"] = "db/a.lance" }),
		"gc_boundary not a list":    edit(func(m map[string]any) { m["gc_boundary"] = 1 }),
	} {
		_, err := decode(VersionKey(1), body, 1)
		if !errors.Is(err, ErrCorruptRegistry) || storage.KindOf(err) != storage.ErrUnknown {
			t.Errorf("%s: %v, want ErrCorruptRegistry of kind unknown", name, err)
		}
	}
	// gc_boundary rows this build does not interpret are carried verbatim.
	carried := edit(func(m map[string]any) { m["gc_boundary"] = []any{map[string]any{"table_id": "x", "version": 3}} })
	s, err := decode(VersionKey(1), carried, 1)
	if err != nil {
		t.Fatal(err)
	}
	if nb := encodeT(t, s.Next()); !bytes.Contains(nb, []byte(`"gc_boundary":[{"table_id":"x","version":3}]`)) {
		t.Fatalf("gc_boundary not carried: %s", nb)
	}
}
