package registry

import (
	"fmt"
	"sort"
	"time"

	"github.com/retain-dev/retain/core/storage"
)

// NewCheckpoint is what the create protocol publishes: a fresh id (from
// NewID, chosen before any tag is created, since tag names contain it),
// the name, where it was taken from, who took it and one pin per table.
type NewCheckpoint struct {
	ID           ID
	Name         string
	SourceBranch string // "main" or a Lance branch name
	CreatedAt    time.Time
	Actor        string
	Pins         []Pin
}

// Deletion is what the delete protocol records in a tombstone.
type Deletion struct {
	OperationID string // fresh per delete operation; printable ASCII, no spaces
	At          time.Time
	Actor       string
}

// Checkpoint is one checkpoint as a snapshot describes it: its header, its
// rows (sorted by table id) and, when tombstoned, its tombstone.
type Checkpoint struct {
	Header
	Rows      []Row
	Tombstone *Tombstone
}

func (s *Snapshot) nameIndex(name string) (int, bool) {
	i := sort.Search(len(s.Names), func(i int) bool { return s.Names[i].Name >= name })
	return i, i < len(s.Names) && s.Names[i].Name == name
}

func (s *Snapshot) headerIndex(id ID) (int, bool) {
	i := sort.Search(len(s.Checkpoints), func(i int) bool { return s.Checkpoints[i].ID >= id })
	return i, i < len(s.Checkpoints) && s.Checkpoints[i].ID == id
}

func (s *Snapshot) tombIndex(id ID) (int, bool) {
	i := sort.Search(len(s.Tombstones), func(i int) bool { return s.Tombstones[i].CheckpointID >= id })
	return i, i < len(s.Tombstones) && s.Tombstones[i].CheckpointID == id
}

// rowRange is the half-open range of id's rows.
func (s *Snapshot) rowRange(id ID) (int, int) {
	lo := sort.Search(len(s.Rows), func(i int) bool { return s.Rows[i].CheckpointID >= id })
	hi := sort.Search(len(s.Rows), func(i int) bool { return s.Rows[i].CheckpointID > id })
	return lo, hi
}

func (s *Snapshot) view(i int) Checkpoint {
	h := s.Checkpoints[i]
	lo, hi := s.rowRange(h.ID)
	c := Checkpoint{Header: h, Rows: append([]Row(nil), s.Rows[lo:hi]...)}
	if j, ok := s.tombIndex(h.ID); ok {
		t := s.Tombstones[j]
		c.Tombstone = &t
	}
	return c
}

// Reservation returns the name's reservation, live or tombstoned.
func (s *Snapshot) Reservation(name string) (Reservation, bool) {
	if i, ok := s.nameIndex(name); ok {
		return s.Names[i], true
	}
	return Reservation{}, false
}

// ByID returns the checkpoint with that id, live or tombstoned (until it
// is purged). A missing id is ErrCheckpointNotFound (storage.ErrNotFound).
func (s *Snapshot) ByID(id ID) (Checkpoint, error) {
	if i, ok := s.headerIndex(id); ok {
		return s.view(i), nil
	}
	return Checkpoint{}, errorf("lookup", string(id), ErrCheckpointNotFound, "no checkpoint has this id in registry version %d", s.Version)
}

// ByName returns the live checkpoint holding the name. A name that is not
// reserved, or only tombstoned, is ErrCheckpointNotFound.
func (s *Snapshot) ByName(name string) (Checkpoint, error) {
	r, ok := s.Reservation(name)
	if !ok {
		return Checkpoint{}, errorf("lookup", name, ErrCheckpointNotFound, "no checkpoint has this name in registry version %d", s.Version)
	}
	if r.State != Live {
		msg := fmt.Sprintf("the checkpoint of this name (generation %d, id %s) was deleted", r.Generation, r.CheckpointID)
		if j, ok := s.tombIndex(r.CheckpointID); ok {
			msg += " by operation " + s.Tombstones[j].DeleteOperationID
		}
		return Checkpoint{}, errorf("lookup", name, ErrCheckpointNotFound, "%s", msg)
	}
	i, _ := s.headerIndex(r.CheckpointID)
	return s.view(i), nil
}

// Lookup resolves a name or an id, as `checkpoint show|delete <name-or-id>`
// take them: a live name, or an id (live or tombstoned). If ref is both a
// live name and the id of another checkpoint it is ErrAmbiguous; if it is
// neither, ErrCheckpointNotFound (saying so when the name was deleted).
func (s *Snapshot) Lookup(ref string) (Checkpoint, error) {
	byName, nameErr := s.ByName(ref)
	if !idOK(ref) {
		return byName, nameErr
	}
	byID, idErr := s.ByID(ID(ref))
	switch {
	case nameErr == nil && idErr == nil && byName.ID != byID.ID:
		return Checkpoint{}, errorf("lookup", ref, ErrAmbiguous, "it is the name of checkpoint %s and the id of checkpoint %q: pass the other checkpoint's id", byName.ID, byID.Name)
	case nameErr == nil:
		return byName, nil
	case idErr == nil:
		return byID, nil
	}
	if _, reserved := s.Reservation(ref); reserved {
		return Checkpoint{}, nameErr
	}
	return Checkpoint{}, errorf("lookup", ref, ErrCheckpointNotFound, "no checkpoint has this name or id in registry version %d", s.Version)
}

// Live returns every live checkpoint, sorted by name.
func (s *Snapshot) Live() []Checkpoint {
	var out []Checkpoint
	for _, r := range s.Names {
		if r.State != Live {
			continue
		}
		if i, ok := s.headerIndex(r.CheckpointID); ok {
			out = append(out, s.view(i))
		}
	}
	return out
}

// TableByID returns the catalog entry with that id.
func (s *Snapshot) TableByID(id ID) (Table, bool) {
	i := sort.Search(len(s.Tables), func(i int) bool { return s.Tables[i].ID >= id })
	if i < len(s.Tables) && s.Tables[i].ID == id {
		return s.Tables[i], true
	}
	return Table{}, false
}

// TableByPath returns the catalog entry at that path.
func (s *Snapshot) TableByPath(path string) (Table, bool) {
	for _, t := range s.Tables {
		if t.Path == path {
			return t, true
		}
	}
	return Table{}, false
}

func (s *Snapshot) mustDraft(op, key string) error {
	if !s.draft {
		return errorf(op, key, ErrInvalidSnapshot, "%v: call Next on the head snapshot and edit the draft", errNotDraft)
	}
	return nil
}

// idKnown reports whether id was ever used by this snapshot's history as
// far as it remembers: a header, a tombstone or a reservation names it.
func (s *Snapshot) idKnown(id ID) bool {
	if _, ok := s.headerIndex(id); ok {
		return true
	}
	for _, r := range s.Names {
		if r.CheckpointID == id {
			return true
		}
	}
	return false
}

// newHeader checks c and builds its header and rows at generation gen.
func (s *Snapshot) newHeader(op string, c NewCheckpoint, gen uint64) (Header, []Row, error) {
	bad := func(format string, args ...any) (Header, []Row, error) {
		return Header{}, nil, errorf(op, c.Name, ErrInvalidSnapshot, format, args...)
	}
	if err := c.ID.Validate(); err != nil {
		return Header{}, nil, err
	}
	if s.idKnown(c.ID) {
		return bad("the id %s is already used in this registry: ids are never reused; take a fresh one from NewID", c.ID)
	}
	if err := validateBranch(c.SourceBranch); err != nil {
		return bad("source branch: %v", err)
	}
	if err := checkTime("created_at", c.CreatedAt); err != nil {
		return bad("%v", err)
	}
	if err := checkText("the actor", c.Actor, maxActorBytes); err != nil {
		return bad("%v", err)
	}
	rows := make([]Row, 0, len(c.Pins))
	seen := map[ID]bool{}
	for _, p := range c.Pins {
		if err := checkPin(p); err != nil {
			return bad("%v", err)
		}
		if seen[p.TableID] {
			return bad("table %s is pinned twice: a checkpoint has one row per table", p.TableID)
		}
		seen[p.TableID] = true
		t, ok := s.TableByID(p.TableID)
		switch {
		case !ok:
			return bad("table %s is not in the catalog: add it (AddTable) in the same draft", p.TableID)
		case t.Path != p.Path:
			return bad("table %s is at %q in the catalog, the pin says %q", p.TableID, t.Path, p.Path)
		case t.Incarnation != p.Incarnation:
			return bad("table %s is in incarnation %d, the pin says %d: the table was recreated; capture again", p.TableID, t.Incarnation, p.Incarnation)
		}
		if err := s.CheckGCBoundary(p); err != nil {
			return Header{}, nil, err
		}
		rows = append(rows, Row{CheckpointID: c.ID, Pin: p, State: Live})
	}
	h := Header{ID: c.ID, Name: c.Name, Generation: gen, State: Live, SourceBranch: c.SourceBranch,
		RegistryVersion: s.Version, CreatedAt: c.CreatedAt.UTC(), Actor: c.Actor}
	return h, rows, nil
}

// Reserve publishes a checkpoint under a name that has never been reserved
// (insert-only): reservation (live, generation 1), header and rows. A live
// name is ErrNameTaken; a tombstoned one ErrNameTombstoned, whose message
// gives the generation to pass to Revive. The header's RegistryVersion is
// the draft's version. On error the draft is unchanged.
func (s *Snapshot) Reserve(c NewCheckpoint) (Checkpoint, error) {
	const op = "reserve"
	if err := s.mustDraft(op, c.Name); err != nil {
		return Checkpoint{}, err
	}
	if err := ValidateName(c.Name); err != nil {
		return Checkpoint{}, err
	}
	if r, ok := s.Reservation(c.Name); ok {
		if r.State == Live {
			return Checkpoint{}, errorf(op, c.Name, ErrNameTaken, "checkpoint %s holds it (generation %d)", r.CheckpointID, r.Generation)
		}
		return Checkpoint{}, errorf(op, c.Name, ErrNameTombstoned, "generation %d (checkpoint %s) is tombstoned: reuse the name with Revive(%d, ...)", r.Generation, r.CheckpointID, r.Generation)
	}
	h, rows, err := s.newHeader(op, c, 1)
	if err != nil {
		return Checkpoint{}, err
	}
	s.Names = append(s.Names, Reservation{Name: c.Name, State: Live, Generation: 1, CheckpointID: c.ID})
	s.Checkpoints = append(s.Checkpoints, h)
	s.Rows = append(s.Rows, rows...)
	s.sortAll()
	return s.ByID(c.ID)
}

// Revive reuses a tombstoned name: its reservation must be tombstoned at
// exactly generation gen (else ErrStaleGeneration; a live one is
// ErrNameTaken, an unknown one ErrCheckpointNotFound). It becomes live at
// gen+1 with the fresh id c.ID; the old checkpoint's id never revives (its
// tombstoned header and rows stay until Purge). On error the draft is
// unchanged.
func (s *Snapshot) Revive(gen uint64, c NewCheckpoint) (Checkpoint, error) {
	const op = "revive"
	if err := s.mustDraft(op, c.Name); err != nil {
		return Checkpoint{}, err
	}
	if err := ValidateName(c.Name); err != nil {
		return Checkpoint{}, err
	}
	i, ok := s.nameIndex(c.Name)
	if !ok {
		return Checkpoint{}, errorf(op, c.Name, ErrCheckpointNotFound, "the name was never reserved: publish with Reserve")
	}
	r := s.Names[i]
	switch {
	case r.State == Live:
		return Checkpoint{}, errorf(op, c.Name, ErrNameTaken, "checkpoint %s holds it (generation %d)", r.CheckpointID, r.Generation)
	case r.Generation != gen:
		return Checkpoint{}, errorf(op, c.Name, ErrStaleGeneration, "the name is tombstoned at generation %d, not %d: it was reused and deleted since it was read; capture again", r.Generation, gen)
	}
	h, rows, err := s.newHeader(op, c, gen+1)
	if err != nil {
		return Checkpoint{}, err
	}
	s.Names[i] = Reservation{Name: c.Name, State: Live, Generation: gen + 1, CheckpointID: c.ID}
	s.Checkpoints = append(s.Checkpoints, h)
	s.Rows = append(s.Rows, rows...)
	s.sortAll()
	return s.ByID(c.ID)
}

// Tombstone deletes a live checkpoint in the authority: its reservation,
// header and rows become tombstoned (the name keeps its generation) and a
// tombstone records d. An already tombstoned checkpoint is
// ErrAlreadyTombstoned, naming the operation that deleted it (a delete
// retried after an ambiguous commit compares it with its own). On error
// the draft is unchanged.
func (s *Snapshot) Tombstone(id ID, d Deletion) (Checkpoint, error) {
	const op = "tombstone"
	if err := s.mustDraft(op, string(id)); err != nil {
		return Checkpoint{}, err
	}
	hi, ok := s.headerIndex(id)
	if !ok {
		return Checkpoint{}, errorf(op, string(id), ErrCheckpointNotFound, "no checkpoint has this id in registry version %d", s.Version-1)
	}
	h := s.Checkpoints[hi]
	if h.State == Tombstoned {
		msg := "it was deleted"
		if j, ok := s.tombIndex(id); ok {
			msg += " by operation " + s.Tombstones[j].DeleteOperationID
		}
		return Checkpoint{}, errorf(op, string(id), ErrAlreadyTombstoned, "%s", msg)
	}
	if err := checkOpID(d.OperationID); err != nil {
		return Checkpoint{}, errorf(op, string(id), ErrInvalidSnapshot, "%v", err)
	}
	if err := checkTime("the deletion time", d.At); err != nil {
		return Checkpoint{}, errorf(op, string(id), ErrInvalidSnapshot, "%v", err)
	}
	if err := checkText("the actor", d.Actor, maxActorBytes); err != nil {
		return Checkpoint{}, errorf(op, string(id), ErrInvalidSnapshot, "%v", err)
	}
	ni, ok := s.nameIndex(h.Name)
	if !ok || s.Names[ni].CheckpointID != id {
		// Validate rules this out for anything read or committed.
		return Checkpoint{}, errorf(op, string(id), ErrInvalidSnapshot, "the name %q is not held by this checkpoint", h.Name)
	}
	s.Names[ni].State = Tombstoned
	s.Checkpoints[hi].State = Tombstoned
	lo, end := s.rowRange(id)
	for j := lo; j < end; j++ {
		s.Rows[j].State = Tombstoned
	}
	s.Tombstones = append(s.Tombstones, Tombstone{CheckpointID: id, Name: h.Name, Generation: h.Generation,
		DeleteOperationID: d.OperationID, DeletedAt: d.At.UTC(), Actor: d.Actor})
	s.sortAll()
	return s.ByID(id)
}

// Purge forgets a tombstoned checkpoint whose tags have all been reclaimed:
// its header, rows and tombstone leave the snapshot, so snapshots stay the
// size of what is live (plus one small reservation per name ever used,
// which keeps generations monotonic). A live checkpoint cannot be purged.
// Once purged, an id is no longer remembered except by the reservation
// that last held the name: that it is never reused rests on NewID's 128
// random bits, as for any id.
func (s *Snapshot) Purge(id ID) error {
	const op = "purge"
	if err := s.mustDraft(op, string(id)); err != nil {
		return err
	}
	hi, ok := s.headerIndex(id)
	if !ok {
		return errorf(op, string(id), ErrCheckpointNotFound, "no checkpoint has this id")
	}
	if s.Checkpoints[hi].State != Tombstoned {
		return errorf(op, string(id), ErrInvalidSnapshot, "the checkpoint is live: tombstone it and reclaim its tags first")
	}
	s.Checkpoints = append(s.Checkpoints[:hi], s.Checkpoints[hi+1:]...)
	lo, end := s.rowRange(id)
	s.Rows = append(s.Rows[:lo], s.Rows[end:]...)
	if j, ok := s.tombIndex(id); ok {
		s.Tombstones = append(s.Tombstones[:j], s.Tombstones[j+1:]...)
	}
	return nil
}

// AddTable catalogues a new table at path with a fresh stable id (from
// NewID) in incarnation 1. An id or path already catalogued is refused.
func (s *Snapshot) AddTable(id ID, path string, firstSeen time.Time) (Table, error) {
	const op = "add-table"
	if err := s.mustDraft(op, path); err != nil {
		return Table{}, err
	}
	if err := id.Validate(); err != nil {
		return Table{}, err
	}
	if _, ok := s.TableByID(id); ok {
		return Table{}, errorf(op, path, ErrInvalidSnapshot, "table id %s is already catalogued", id)
	}
	if t, ok := s.TableByPath(path); ok {
		return Table{}, errorf(op, path, ErrInvalidSnapshot, "table %s is already catalogued at this path: a recreated table gets NewIncarnation", t.ID)
	}
	if err := storage.ValidateKey(op, path); err != nil {
		return Table{}, errorf(op, path, ErrInvalidSnapshot, "%v", err)
	}
	if firstSeen.IsZero() {
		return Table{}, errorf(op, path, ErrInvalidSnapshot, "first_seen must be set")
	}
	t := Table{ID: id, Path: path, Incarnation: 1, FirstSeen: firstSeen.UTC()}
	s.Tables = append(s.Tables, t)
	s.sortAll()
	return t, nil
}

// NewIncarnation records that the table id was deleted and recreated at
// its path: its incarnation grows by one and FirstSeen is reset. Rows of
// earlier incarnations keep theirs.
func (s *Snapshot) NewIncarnation(id ID, firstSeen time.Time) (Table, error) {
	const op = "new-incarnation"
	if err := s.mustDraft(op, string(id)); err != nil {
		return Table{}, err
	}
	i := sort.Search(len(s.Tables), func(i int) bool { return s.Tables[i].ID >= id })
	if i == len(s.Tables) || s.Tables[i].ID != id {
		return Table{}, errorf(op, string(id), ErrCheckpointNotFound, "no table has this id in the catalog")
	}
	if firstSeen.IsZero() {
		return Table{}, errorf(op, string(id), ErrInvalidSnapshot, "first_seen must be set")
	}
	s.Tables[i].Incarnation++
	s.Tables[i].FirstSeen = firstSeen.UTC()
	return s.Tables[i], nil
}
