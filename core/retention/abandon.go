package retention

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/retain-dev/retain/core/retention/runs"
	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/claim"
)

// openRunError is the refusal of a new run while runs are unfinished,
// with the commands that clear the first: resume or abandon it, or, when
// its journal does not parse (so it can never be resumed), abandon it.
func openRunError(ctx context.Context, s *storage.Store, open []string) error {
	op, store := open[0], s.Location().String()
	more := ""
	if len(open) > 1 {
		more = fmt.Sprintf(" (and %d more)", len(open)-1)
	}
	cause := storage.Errorf("cleanup-run", openKey(op), storage.ErrPreconditionFailed, "unfinished cleanup run")
	if _, _, err := ReadJournal(ctx, s, op); errors.Is(err, ErrCorruptJournal) || storage.KindOf(err) == storage.ErrNotFound {
		what := "does not parse"
		if !errors.Is(err, ErrCorruptJournal) {
			what = "is missing"
		}
		return fmt.Errorf("%w: %s%s, whose journal %s %s, so it cannot be resumed: inspect it, then close the run with `retain cleanup run %s --abandon %s` (its gc boundaries stay; the next run plans afresh); nothing was deleted: %w",
			runs.ErrOpen, op, more, JournalKey(op), what, store, op, err)
	}
	return fmt.Errorf("%w: %s%s: finish it with `retain cleanup run %s --resume --confirm-write-outage` (it carries out the plans it published) or drop it with `retain cleanup run %s --abandon %s`; nothing was deleted: %w",
		runs.ErrOpen, op, more, store, store, op, cause)
}

// abandonCorrupt closes run op whose journal does not parse (or, with
// missing, is gone while its open marker stays), under the claim h:
// nothing of it can be resumed, and without this no cleanup could ever run
// again (the open marker blocks every new run). It never reads the journal
// as a journal: its bytes are kept at corruptKey for inspection, the
// journaled plans are dropped (found by listing, as the journal naming
// them is unreadable), the journal is replaced — a compare-and-swap on
// exactly the bytes kept, or a create when it is missing — by an abandoned
// record saying so, and the open marker goes last, so a cut-short attempt
// is simply repeated. The run's published gc boundaries stay.
func abandonCorrupt(ctx context.Context, s *storage.Store, h *claim.Handle, op string, missing bool) (*Journal, error) {
	var raw []byte
	ver := ""
	if missing {
		if _, err := s.Stat(ctx, openKey(op)); err != nil {
			return nil, fmt.Errorf("cleanup run %s has no journal and no open marker: nothing to abandon: %w", op, err)
		}
	} else {
		b, info, err := s.ReadAll(ctx, JournalKey(op))
		if err != nil {
			return nil, err
		}
		raw, ver = b, info.Version
		if err := keepUnreadable(ctx, s, op, raw); err != nil {
			return nil, err
		}
	}
	if err := h.Verify(ctx); err != nil {
		return nil, err
	}
	plans, err := s.List(ctx, JournalPrefix+op+"/tables/", 0)
	if err != nil {
		return nil, fmt.Errorf("listing the journaled plans of %s: %w", op, err)
	}
	if len(plans) > 0 {
		keys := make([]string, len(plans))
		for i, p := range plans {
			keys[i] = p.Key
		}
		res, err := s.DeleteMany(ctx, keys)
		for _, r := range res {
			if err == nil && r.Err != nil {
				err = r.Err
			}
		}
		if err != nil {
			return nil, fmt.Errorf("dropping the journaled plans of %s: %w", op, err)
		}
	}
	what := fmt.Sprintf("the journal did not parse (%d bytes, kept at %s)", len(raw), corruptKey(op))
	if missing {
		what = "the journal was missing"
	}
	j := &Journal{Format: journalFormat, OperationID: op, State: StateAbandoned, Actor: h.Payload().Actor, StartedAt: time.Now().UTC(), Tables: []JournalTable{},
		Note: fmt.Sprintf("abandoned by %s: %s; its %d journaled plan(s) were dropped; its gc boundaries stay", h.Payload().Actor, what, len(plans))}
	jw := &journalWriter{s: s, j: j, ver: ver}
	write := jw.save
	if missing {
		write = jw.create
	}
	if err := write(ctx); err != nil {
		return nil, err
	}
	if err := s.Delete(ctx, openKey(op), storage.DeleteOptions{}); err != nil && storage.KindOf(err) != storage.ErrNotFound {
		return j, fmt.Errorf("closing run %s (%s): %w", op, openKey(op), err)
	}
	return j, nil
}

// keepUnreadable keeps the bytes of an unreadable journal at corruptKey
// (create-if-absent; the same bytes kept by a cut-short attempt do).
func keepUnreadable(ctx context.Context, s *storage.Store, op string, raw []byte) error {
	_, err := s.PutBytes(ctx, corruptKey(op), raw, storage.PutOptions{Mode: storage.PutCreateIfAbsent})
	if err == nil {
		return nil
	}
	if storage.KindOf(err) != storage.ErrAlreadyExists {
		return fmt.Errorf("keeping the unreadable journal of %s (nothing was changed): %w", op, err)
	}
	kept, _, err := s.ReadAll(ctx, corruptKey(op))
	if err != nil {
		return err
	}
	if !bytes.Equal(kept, raw) {
		return storage.Errorf("cleanup-abandon", corruptKey(op), storage.ErrPreconditionFailed,
			"%s already holds other bytes than the unreadable journal %s: inspect both; nothing was changed", corruptKey(op), JournalKey(op))
	}
	return nil
}
