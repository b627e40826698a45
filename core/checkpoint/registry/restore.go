package registry

import (
	"encoding/json"
	"slices"
	"time"
)

// Restore puts a checkpoint back live from its surviving pins: the one
// edit `retain registry recover` makes. c.ID is the id the pins' names
// carry, c.Pins the rows they prove.
//
//   - An id live in the draft keeps its header, name and generation; the
//     rows of the tables c pins are replaced by c's (a rewritten or
//     flipped row gives way to what the pin proves), and the header's
//     registry version becomes the draft's (its registry pin is rewritten
//     for the draft's Ref).
//   - An id the draft does not know is published under c.Name: reserved
//     if the name is free, revived if it is tombstoned; a name live for
//     another checkpoint is ErrNameTaken (the caller picks another name).
//   - A tombstoned id is refused: its pins are reclaimable, not restorable.
//
// Each pin's table is catalogued at its path with at least the pin's
// incarnation (added if unknown). A pin whose table id is catalogued at
// another path, or whose path is catalogued under another id, is
// ErrInvalidSnapshot: the caller pins that table afresh instead. Unlike
// Reserve, Restore does not check the GC boundary: the pins never left,
// so cleanup kept their versions whole. On error the draft is unchanged.
func (s *Snapshot) Restore(c NewCheckpoint, at time.Time) (Checkpoint, error) {
	const op = "restore"
	if err := s.mustDraft(op, string(c.ID)); err != nil {
		return Checkpoint{}, err
	}
	saved := s.lists()
	cp, err := s.restore(op, c, at)
	if err == nil {
		if verr := s.Validate(); verr != nil {
			err = errorf(op, string(c.ID), ErrInvalidSnapshot, "%v", verr)
		}
	}
	if err != nil {
		s.setLists(saved)
		return Checkpoint{}, err
	}
	return cp, nil
}

func (s *Snapshot) restore(op string, c NewCheckpoint, at time.Time) (Checkpoint, error) {
	if err := c.ID.Validate(); err != nil {
		return Checkpoint{}, err
	}
	seen := map[ID]bool{}
	for _, p := range c.Pins {
		if err := checkPin(p); err != nil {
			return Checkpoint{}, errorf(op, string(c.ID), ErrInvalidSnapshot, "%v", err)
		}
		if seen[p.TableID] {
			return Checkpoint{}, errorf(op, string(c.ID), ErrInvalidSnapshot, "table %s is pinned twice: a checkpoint has one row per table", p.TableID)
		}
		seen[p.TableID] = true
		if err := s.catalogAt(op, p, at); err != nil {
			return Checkpoint{}, err
		}
	}
	s.sortAll()
	if i, ok := s.headerIndex(c.ID); ok {
		if s.Checkpoints[i].State != Live {
			return Checkpoint{}, errorf(op, string(c.ID), ErrAlreadyTombstoned, "checkpoint %s is tombstoned: its pins are reclaimed by reconcile, not restored", c.ID)
		}
		s.Checkpoints[i].RegistryVersion = s.Version
		kept := s.Rows[:0:0]
		for _, r := range s.Rows {
			if r.CheckpointID == c.ID && (seen[r.TableID] || pinsPath(c.Pins, r.Path)) {
				continue
			}
			kept = append(kept, r)
		}
		s.Rows = kept
	} else {
		if s.idKnown(c.ID) {
			return Checkpoint{}, errorf(op, string(c.ID), ErrInvalidSnapshot, "the id %s was used before in this registry", c.ID)
		}
		if err := validateBranch(c.SourceBranch); err != nil {
			return Checkpoint{}, errorf(op, string(c.ID), ErrInvalidSnapshot, "source branch: %v", err)
		}
		if err := ValidateName(c.Name); err != nil {
			return Checkpoint{}, err
		}
		gen := uint64(1)
		if r, ok := s.Reservation(c.Name); ok {
			if r.State == Live {
				return Checkpoint{}, errorf(op, c.Name, ErrNameTaken, "checkpoint %s holds it (generation %d)", r.CheckpointID, r.Generation)
			}
			gen = r.Generation + 1
		}
		i, ok := s.nameIndex(c.Name)
		res := Reservation{Name: c.Name, State: Live, Generation: gen, CheckpointID: c.ID}
		if ok {
			s.Names[i] = res
		} else {
			s.Names = append(s.Names, res)
		}
		s.Checkpoints = append(s.Checkpoints, Header{ID: c.ID, Name: c.Name, Generation: gen, State: Live,
			SourceBranch: c.SourceBranch, RegistryVersion: s.Version, CreatedAt: c.CreatedAt.UTC(), Actor: c.Actor})
	}
	for _, p := range c.Pins {
		s.Rows = append(s.Rows, Row{CheckpointID: c.ID, Pin: p, State: Live})
	}
	s.sortAll()
	return s.ByID(c.ID)
}

// catalogAt makes sure p's table is catalogued at its path with at least
// its incarnation.
func (s *Snapshot) catalogAt(op string, p Pin, at time.Time) error {
	if t, ok := s.TableByPath(p.Path); ok && t.ID != p.TableID {
		return errorf(op, p.Path, ErrInvalidSnapshot, "the catalog has table %s at %q, the pin says table %s", t.ID, p.Path, p.TableID)
	}
	// A linear scan: tables appended in this edit are not sorted yet.
	i := slices.IndexFunc(s.Tables, func(t Table) bool { return t.ID == p.TableID })
	if i >= 0 {
		if s.Tables[i].Path != p.Path {
			return errorf(op, p.Path, ErrInvalidSnapshot, "the catalog has table %s at %q, the pin says %q", p.TableID, s.Tables[i].Path, p.Path)
		}
		if s.Tables[i].Incarnation < p.Incarnation {
			s.Tables[i].Incarnation = p.Incarnation
		}
		return nil
	}
	if at.IsZero() {
		return errorf(op, p.Path, ErrInvalidSnapshot, "first_seen must be set")
	}
	s.Tables = append(s.Tables, Table{ID: p.TableID, Path: p.Path, Incarnation: p.Incarnation, FirstSeen: at.UTC()})
	return nil
}

func pinsPath(ps []Pin, path string) bool {
	for _, p := range ps {
		if p.Path == path {
			return true
		}
	}
	return false
}

type snapshotLists struct {
	names       []Reservation
	checkpoints []Header
	rows        []Row
	tombstones  []Tombstone
	tables      []Table
	gc          []json.RawMessage
}

func (s *Snapshot) lists() snapshotLists {
	return snapshotLists{
		names:       append([]Reservation(nil), s.Names...),
		checkpoints: append([]Header(nil), s.Checkpoints...),
		rows:        append([]Row(nil), s.Rows...),
		tombstones:  append([]Tombstone(nil), s.Tombstones...),
		tables:      append([]Table(nil), s.Tables...),
		gc:          append([]json.RawMessage(nil), s.GCBoundary...),
	}
}

func (s *Snapshot) setLists(l snapshotLists) {
	s.Names, s.Checkpoints, s.Rows, s.Tombstones, s.Tables, s.GCBoundary = l.names, l.checkpoints, l.rows, l.tombstones, l.tables, l.gc
	s.normalize()
}

// NextAt is Next numbered v (v > s.Version) whose prev is prevDigest, the
// digest of version v-1's bytes as stored (DigestOf): registry recover
// builds on the newest version it trusts and publishes above every stored
// one, so versions that do not read stay in the history, never rewritten,
// and the chain goes on through them.
func (s *Snapshot) NextAt(v Version, prevDigest string) *Snapshot {
	n := s.Next()
	if v > n.Version {
		n.Version, n.Prev = v, prevDigest
		// Versions between s and v stay stored and may have rewritten
		// segments s references: reusing them here would make one segment
		// referenced by two separate runs of versions, which the
		// registry's cleanup relies on never happening (SegmentGarbage).
		// So the new version writes all its segments afresh.
		n.base = nil
	}
	return n
}
