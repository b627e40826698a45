package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/retain-dev/retain/core/storage"
)

// StateKey is the daemon's record in the store: what `retain status`
// reads. It is written after each pass, by the daemon only.
const StateKey = "_retain/maintenance/state.json"

// State is the daemon's record of its passes.
type State struct {
	Format int `json:"format"`
	// Window is the retention window configured when the record was
	// written ("older than 168h, keep last 5"; "" when none).
	Window   string `json:"window"`
	Enabled  bool   `json:"enabled"`
	Interval string `json:"interval"`
	Every    string `json:"every"`
	// LastPass is when the last pass ended; LastRetention when the last
	// retention pass completed (the stamp); NextRetentionDue when the next
	// one is due.
	LastPass         *time.Time `json:"last_pass,omitempty"`
	LastRetention    *time.Time `json:"last_retention,omitempty"`
	NextRetentionDue *time.Time `json:"next_retention_due,omitempty"`
	// LastRetentionOperation is the cleanup operation of the stamp.
	LastRetentionOperation string `json:"last_retention_operation,omitempty"`
	// RetentionFailures counts retention passes that failed since the last
	// completed one; LastError is the latest failure.
	RetentionFailures int    `json:"retention_failures"`
	LastError         string `json:"last_error,omitempty"`
	// Daemon names the process that wrote the record.
	Daemon string `json:"daemon"`
	// Identity is the writer's --identity, when it had one: a replica
	// skips a store whose fresh record another identity wrote.
	Identity string `json:"identity,omitempty"`
}

// ReadState reads the record; a store the daemon never ran on has none
// (nil, nil).
func ReadState(ctx context.Context, s *storage.Store) (*State, error) {
	b, _, err := s.ReadAll(ctx, StateKey)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var st State
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, storage.Errorf("daemon-state", StateKey, storage.ErrUnknown, "the daemon's record does not parse: %v", err)
	}
	return &st, nil
}

func writeState(ctx context.Context, s *storage.Store, st *State) error {
	st.Format = 1
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	_, err = s.PutBytes(ctx, StateKey, b, storage.PutOptions{Mode: storage.PutOverwrite})
	return err
}

// mergeState writes st for a store other replicas keep too: it keeps the
// later stamp of the record it replaces and, where the store offers
// replace-if-version, writes only over the version it read (a lost race
// reads and merges again), so one replica's record never rolls back
// another's completed retention.
func mergeState(ctx context.Context, s *storage.Store, st *State) error {
	conditional := s.Require(storage.FeatureReplaceIfVersion, storage.ScopeGlobal) == nil && s.Require(storage.FeatureCreateIfAbsent, storage.ScopeGlobal) == nil
	for range 3 {
		b, info, err := s.ReadAll(ctx, StateKey)
		mode, ifv := storage.PutCreateIfAbsent, ""
		switch {
		case errors.Is(err, storage.ErrNotFound):
		case err != nil:
			return err
		default:
			mode, ifv = storage.PutReplaceIfVersion, info.Version
			var old State
			if json.Unmarshal(b, &old) == nil && old.LastRetention != nil && (st.LastRetention == nil || !old.LastRetention.Before(*st.LastRetention)) {
				st.LastRetention, st.NextRetentionDue, st.LastRetentionOperation = old.LastRetention, old.NextRetentionDue, old.LastRetentionOperation
			}
		}
		if !conditional {
			mode, ifv = storage.PutOverwrite, ""
		}
		st.Format = 1
		body, err := json.MarshalIndent(st, "", "  ")
		if err != nil {
			return err
		}
		_, err = s.PutBytes(ctx, StateKey, body, storage.PutOptions{Mode: mode, IfVersion: ifv})
		if errors.Is(err, storage.ErrPreconditionFailed) || errors.Is(err, storage.ErrAlreadyExists) {
			continue
		}
		return err
	}
	return storage.Errorf("daemon-state", StateKey, storage.ErrPreconditionFailed, "other replicas kept rewriting the record; it is written on the next pass")
}
