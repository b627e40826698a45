// Package runs is the index of unfinished cleanup runs: a marker object
// per run under _retain/cleanup/open/, written before the run deletes
// anything and dropped once its journal says the run is closed. It is the
// part of the cleanup journal that other protocols consult (a branch
// delete refuses while a run is open), kept apart from package retention
// so that they need not import it.
//
//	_retain/cleanup/<op>/run.json   the run's journal (package retention)
//	_retain/cleanup/open/<op>       present while the run is unfinished
package runs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/retain-dev/retain/core/storage"
)

const (
	// Prefix holds every cleanup run's objects.
	Prefix = "_retain/cleanup/"
	// OpenPrefix holds the markers of unfinished runs.
	OpenPrefix = Prefix + "open/"
	// Format is the newest journal format this build reads.
	Format = 2
	// Complete and Abandoned are the journal states of a closed run.
	Complete  = "complete"
	Abandoned = "abandoned"
)

// ErrOpen: an unfinished cleanup run exists; resume it (or abandon it)
// before a new run may plan, or a branch its plans name may be deleted.
var ErrOpen = errors.New("an unfinished cleanup run exists")

// JournalKey is the key of the run journal of operation op.
func JournalKey(op string) string { return Prefix + op + "/run.json" }

// OpenKey is the key of operation op's open marker.
func OpenKey(op string) string { return OpenPrefix + op }

// CheckOp refuses an operation id that is not one path segment.
func CheckOp(op string) error {
	if op == "" || strings.ContainsAny(op, "/\\") || op == "." || op == ".." || len(op) > 200 {
		return storage.Errorf("cleanup-journal", op, storage.ErrInvalidArgument, "%s is not a cleanup operation id (see `retain status STORE` for the unfinished runs)", storage.Quote(op))
	}
	return nil
}

// closed is what Open reads of a journal: whether it says the run is
// closed, and the plan objects to drop with its marker.
type closed struct {
	Format      int    `json:"format"`
	OperationID string `json:"operation_id"`
	State       string `json:"state"`
	Tables      []struct {
		PlanKey string `json:"plan_key"`
	} `json:"tables"`
}

// Open lists the operation ids of unfinished cleanup runs: one listing
// request in the common case of none. A marker left by a run whose journal
// already says complete or abandoned (closing it was cut short) is tidied
// away and not listed (on a writable store); a marker whose journal cannot
// be read, or reads as anything else, is listed (fail closed: it blocks
// new runs until resumed or abandoned).
func Open(ctx context.Context, s *storage.Store) ([]string, error) {
	objs, err := s.List(ctx, OpenPrefix, 0)
	if err != nil {
		return nil, fmt.Errorf("listing unfinished cleanup runs: %w", err)
	}
	var ops []string
	for _, o := range objs {
		op := strings.TrimPrefix(o.Key, OpenPrefix)
		if planKeys, ok := isClosed(ctx, s, op); ok {
			if !s.ReadOnly() {
				if err := Tidy(ctx, s, op, planKeys); err != nil {
					return nil, err
				}
			}
			continue
		}
		ops = append(ops, op)
	}
	return ops, nil
}

func isClosed(ctx context.Context, s *storage.Store, op string) ([]string, bool) {
	if CheckOp(op) != nil {
		return nil, false
	}
	b, _, err := s.ReadAll(ctx, JournalKey(op))
	if err != nil {
		return nil, false
	}
	var j closed
	if err := json.NewDecoder(bytes.NewReader(b)).Decode(&j); err != nil ||
		j.Format < 1 || j.Format > Format || j.OperationID != op || (j.State != Complete && j.State != Abandoned) {
		return nil, false
	}
	var keys []string
	for _, t := range j.Tables {
		keys = append(keys, t.PlanKey)
	}
	return keys, true
}

// Tidy drops the plans and the open marker of closed run op, the marker
// last: a tidy cut short is finished by the next Open.
func Tidy(ctx context.Context, s *storage.Store, op string, planKeys []string) error {
	var keys []string
	seen := map[string]bool{}
	for _, k := range planKeys {
		if k != "" && !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	if len(keys) > 0 {
		res, err := s.DeleteMany(ctx, keys)
		if err == nil {
			for _, r := range res {
				if r.Err != nil {
					err = r.Err
				}
			}
		}
		if err != nil {
			return fmt.Errorf("dropping the journaled plans of closed run %s: %w", op, err)
		}
	}
	if err := s.Delete(ctx, OpenKey(op), storage.DeleteOptions{}); err != nil {
		return fmt.Errorf("closing run %s (%s): %w", op, OpenKey(op), err)
	}
	return nil
}
