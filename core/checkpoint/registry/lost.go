package registry

import (
	"fmt"
	"time"

	"github.com/retain-dev/retain/core/storage"
)

// LostPin records a table pin a checkpoint gave up: the version it pinned
// is provably gone (no manifest under either name, or another commit: the
// table was deleted and recreated). The checkpoint keeps every other pin
// and says, in its header, what it no longer holds and why.
type LostPin struct {
	Pin
	// Why is what retain saw; Reason the operator's words.
	Why         string    `json:"why"`
	Reason      string    `json:"reason"`
	OperationID string    `json:"operation_id"`
	At          time.Time `json:"at"`
	Actor       string    `json:"actor"`
}

const maxWhyBytes = 1024

func (l LostPin) check() error {
	if err := checkPin(l.Pin); err != nil {
		return err
	}
	if err := checkText("why", l.Why, maxWhyBytes); err != nil {
		return err
	}
	if err := checkText("the reason", l.Reason, maxWhyBytes); err != nil {
		return err
	}
	if err := checkOpID(l.OperationID); err != nil {
		return err
	}
	if err := checkTime("the time", l.At); err != nil {
		return err
	}
	return checkText("the actor", l.Actor, maxActorBytes)
}

// DropLostRow removes live checkpoint id's row of table tableID and records
// it in the header's Lost list. The caller has proven the pinned version
// gone; this only keeps the record consistent. On error the draft is
// unchanged.
func (s *Snapshot) DropLostRow(id, tableID ID, l LostPin) (Checkpoint, error) {
	const op = "drop-lost"
	if err := s.mustDraft(op, string(id)); err != nil {
		return Checkpoint{}, err
	}
	hi, ok := s.headerIndex(id)
	if !ok {
		return Checkpoint{}, errorf(op, string(id), ErrCheckpointNotFound, "no checkpoint has this id in registry version %d", s.Version-1)
	}
	if s.Checkpoints[hi].State != Live {
		return Checkpoint{}, errorf(op, string(id), ErrAlreadyTombstoned, "the checkpoint is deleted: it pins nothing")
	}
	lo, end := s.rowRange(id)
	at := -1
	for j := lo; j < end; j++ {
		if s.Rows[j].TableID == tableID {
			at = j
		}
	}
	if at < 0 {
		return Checkpoint{}, errorf(op, string(tableID), storage.ErrNotFound, "checkpoint %s pins no table with this id", id)
	}
	l.Pin = s.Rows[at].Pin
	l.At = l.At.UTC()
	if err := l.check(); err != nil {
		return Checkpoint{}, errorf(op, string(id), ErrInvalidSnapshot, "%v", err)
	}
	if len(s.Checkpoints[hi].Lost) >= maxLostPins {
		return Checkpoint{}, errorf(op, string(id), ErrInvalidSnapshot, "the checkpoint already records %d lost pins", maxLostPins)
	}
	h := &s.Checkpoints[hi]
	h.Lost = append(append([]LostPin(nil), h.Lost...), l)
	s.Rows = append(append([]Row(nil), s.Rows[:at]...), s.Rows[at+1:]...)
	return s.ByID(id)
}

// maxLostPins bounds a header: a checkpoint pins one version per table.
const maxLostPins = 100_000

// String says what was lost, for reports.
func (l LostPin) String() string {
	return fmt.Sprintf("%s %s v%d (dropped %s by %s: %s; %s)", l.Path, l.Branch, l.Version, l.At.Format(time.RFC3339), l.Actor, l.Why, l.Reason)
}
