package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/retain-dev/retain/sdk/core"
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
}

// ReadState reads the record; a store the daemon never ran on has none
// (nil, nil).
func ReadState(ctx context.Context, s *core.Store) (*State, error) {
	b, _, err := s.ReadAll(ctx, StateKey)
	if errors.Is(err, core.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var st State
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, core.Errorf("daemon-state", StateKey, core.ErrUnknown, "the daemon's record does not parse: %v", err)
	}
	return &st, nil
}

func writeState(ctx context.Context, s *core.Store, st *State) error {
	st.Format = 1
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	_, err = s.PutBytes(ctx, StateKey, b, core.PutOptions{Mode: core.PutOverwrite})
	return err
}
