package retention

// Resuming a run under the plans it published.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/retain-dev/retain/core/authz"
	"github.com/retain-dev/retain/core/checkpoint/registry"
	"github.com/retain-dev/retain/core/retention/runs"
	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/claim"
)

// ResumeOptions configure Resume.
type ResumeOptions struct {
	// OperationID picks the run; "" means the only unfinished one.
	OperationID string
	// Actor and Scope as in RunOptions.
	Actor string
	Scope storage.Scope
	// Host names this host for the claim's proof (default os.Hostname).
	Host string
	// Progress, if set, is called after each table.
	Progress func(Progress)
	// Online: writers may be committing (the daemon). Only a run planned
	// online is resumed then.
	Online bool
}

// Resume finishes an unfinished run from its journal (issue 7, section
// 3.6): it carries out the journaled plans of the tables not yet done,
// each checked against the root digest the run published in its
// gc_boundary row, never a recomputed plan. A claim the run still holds
// is taken over only with proof that its process cannot resume (as `retain
// claim takeover` requires); a run whose boundaries were never published
// deleted nothing and is abandoned.
func Resume(ctx context.Context, s *storage.Store, o ResumeOptions) (rep *RunReport, err error) {
	if ctx, err = authz.CheckNote(ctx, authz.Request{Action: authz.ActionCleanupRun, Command: "cleanup resume", Store: authz.StoreName(s)}); err != nil {
		return nil, err
	}
	op := o.OperationID
	if op == "" {
		open, err := runs.Open(ctx, s)
		if err != nil {
			return nil, err
		}
		switch len(open) {
		case 0:
			return nil, storage.Errorf("cleanup-resume", runs.OpenPrefix, storage.ErrNotFound, "no unfinished cleanup run: nothing to resume")
		case 1:
			op = open[0]
		default:
			return nil, storage.Errorf("cleanup-resume", runs.OpenPrefix, storage.ErrInvalidArgument, "%d unfinished cleanup runs (%s): name one with --resume-op", len(open), strings.Join(open, ", "))
		}
	}
	j, ver, err := ReadJournal(ctx, s, op)
	if err != nil {
		return nil, err
	}
	if j.State == StateComplete || j.State == StateAbandoned {
		return nil, storage.Errorf("cleanup-resume", JournalKey(op), storage.ErrPreconditionFailed, "cleanup run %s is %s: nothing to resume", op, j.State)
	}
	h, err := resumeClaim(ctx, s, op, o)
	if err != nil {
		return nil, err
	}
	defer func() {
		if rerr := release(ctx, h); rerr != nil && err == nil {
			err = rerr
		}
	}()
	// Re-read under the claim: the journal is only advanced by its holder,
	// and the run may have completed or been abandoned meanwhile.
	if j, ver, err = ReadJournal(ctx, s, op); err != nil {
		return nil, err
	}
	if j.State == StateComplete || j.State == StateAbandoned {
		return nil, storage.Errorf("cleanup-resume", JournalKey(op), storage.ErrPreconditionFailed, "cleanup run %s is %s: nothing to resume", op, j.State)
	}
	mode := j.Mode
	if mode == "" {
		// A journal from before the mode was recorded: its window says
		// whether its plan is one an online run could have made.
		mode = ModeWriteOutage
		if d, err := time.ParseDuration(j.Policy.OlderThan); err == nil && d >= MinOnlineAge {
			mode = ModeOnline
		}
	}
	if o.Online && mode != ModeOnline {
		return nil, fmt.Errorf("%w: cleanup run %s was planned for a write outage (%s); an online resume (writers may be committing) does not carry it out: resume it during an outage with `retain cleanup run --resume --confirm-write-outage`, or abandon it: %w",
			ErrRunRefused, op, mode, storage.Errorf("cleanup-resume", JournalKey(op), storage.ErrPreconditionFailed, "plan made for a write outage"))
	}
	jw := &journalWriter{s: s, j: j, ver: ver}
	rep = &RunReport{OperationID: op, StartedAt: time.Now().UTC(), Policy: j.Policy, BoundaryVersion: j.BoundaryVersion,
		Boundaries: []registry.GCBoundary{}, Tables: []TableRun{}, Resumed: true}
	published, err := boundariesPublished(ctx, s, j, rep)
	if err != nil {
		return rep, err
	}
	if !published {
		j.State, j.Note = StateAbandoned, "resume found the gc boundary commit never happened; nothing was deleted"
		if err := closeRun(ctx, jw); err != nil {
			return rep, err
		}
		return rep, fmt.Errorf("%w: cleanup run %s never published its gc boundaries, so it deleted nothing; it is closed: run cleanup again", ErrRunRefused, op)
	}
	j.Resumes++
	err = execute(ctx, s, h, jw, rep, o.Progress, nil)
	return rep, err
}

// resumeClaim acquires the claim for op, or takes over the claim a crashed
// process of the same run left, with the same proof a takeover needs.
func resumeClaim(ctx context.Context, s *storage.Store, op string, o ResumeOptions) (*claim.Handle, error) {
	scope := o.Scope
	if scope == storage.ScopeNone {
		scope = claim.ScopeFor(s.Location())
	}
	req := claim.Request{OperationID: op, Action: "cleanup-resume", Actor: o.Actor, Scope: scope, Host: o.Host}
	h, err := claim.Acquire(ctx, s, req)
	var held *claim.HeldError
	if err == nil || !errors.As(err, &held) || held.Holder == nil || held.Holder.OperationID != op {
		return h, err
	}
	// The run's own claim, left by a process that stopped: take it over
	// only with proof that process cannot continue.
	h, terr := claim.Takeover(ctx, s, claim.TakeoverRequest{Request: req, Token: held.Holder.OwnerToken,
		Reason: "resume cleanup run " + op})
	if terr != nil {
		if errors.Is(terr, claim.ErrNoProof) {
			// Its process may be running: the claim is held, not broken.
			return nil, held
		}
		return nil, fmt.Errorf("the claim is still held by cleanup run %s (pid %d on %s), which may be running: %w", op, held.Holder.PID, held.Holder.Host, terr)
	}
	return h, nil
}

// boundariesPublished checks the run's boundary version: published by this
// run with the journal's digests, or never published.
func boundariesPublished(ctx context.Context, s *storage.Store, j *Journal, rep *RunReport) (bool, error) {
	if j.BoundaryVersion == 0 {
		return true, nil // nothing to publish: only the registry's own cleanup
	}
	snap, err := registry.Open(s, registry.Options{}).Read(ctx, registry.Version(j.BoundaryVersion))
	if errors.Is(err, storage.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	rows, err := snap.GCBoundaries()
	if err != nil {
		return false, storage.Errorf("cleanup-resume", registry.VersionKey(registry.Version(j.BoundaryVersion)), storage.ErrUnknown, "%v", err)
	}
	byID := map[registry.ID]registry.GCBoundary{}
	mine := 0
	for _, g := range rows {
		byID[g.TableID] = g
		if g.OperationID == j.OperationID {
			mine++
		}
	}
	if mine == 0 {
		return false, nil // another commit took that version number
	}
	for _, t := range j.Tables {
		if t.PlanKey == "" {
			continue
		}
		g, ok := byID[t.TableID]
		if !ok || g.OperationID != j.OperationID || g.RootDigest != t.RootDigest {
			return false, storage.Errorf("cleanup-resume", registry.VersionKey(registry.Version(j.BoundaryVersion)), storage.ErrPreconditionFailed,
				"registry version %d does not carry run %s's boundary of %s with root digest %s: nothing is resumed", j.BoundaryVersion, j.OperationID, t.Table, t.RootDigest)
		}
		rep.Boundaries = append(rep.Boundaries, g)
	}
	return true, nil
}
