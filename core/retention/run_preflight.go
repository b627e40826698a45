package retention

// Before a run deletes anything: its checks, the reconcile under the claim, the plans and boundaries.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/retain-dev/retain/core/checkpoint"
	"github.com/retain-dev/retain/core/checkpoint/registry"
	"github.com/retain-dev/retain/core/lance"
	"github.com/retain-dev/retain/core/retention/runs"
	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/claim"
)

// checkRun refuses, before the claim is taken, a run whose options cannot
// be safe: an online window too short, a write outage not confirmed, or no
// rule saying which versions to keep.
func checkRun(p Policy, o RunOptions) error {
	if err := p.checkRules(); err != nil {
		return err
	}
	shortest, what := p.shortestWindow()
	switch {
	case o.Online && shortest < MinOnlineAge:
		return storage.Errorf("cleanup-run", "", storage.ErrInvalidArgument,
			"an online cleanup (writers may be committing) needs an older-than window of at least %s, got %s for %s: a writer may still build on a recent version; set a longer window, or stop the writers and confirm the write outage", MinOnlineAge, shortest, what)
	case !o.Online && !o.ConfirmWriteOutage:
		return storage.Errorf("cleanup-run", "", storage.ErrInvalidArgument,
			"cleanup run needs a write outage: no writer may commit to the store's tables while it runs, because a commit in flight could reference files it deletes; stop the writers and confirm (--confirm-write-outage)")
	}
	if p.OlderThan == 0 && p.KeepLast == 0 {
		return storage.Errorf("cleanup-run", "", storage.ErrInvalidArgument, "set --older-than and/or --keep-last: say which versions to keep (keep-last 1 keeps only the latest)")
	}
	return nil
}

// preflightRun refuses, under the claim, while a checkpoint create's
// sidecars are pending or another cleanup run is unfinished: either could
// hold roots this run cannot see.
func preflightRun(ctx context.Context, s *storage.Store) error {
	// The two listings side by side.
	var open []string
	var openErr error
	listed := make(chan struct{})
	go func() {
		defer close(listed)
		open, openErr = runs.Open(ctx, s)
	}()
	pending, err := checkpoint.PendingSidecars(ctx, s)
	<-listed
	if err != nil {
		return err
	}
	if len(pending) > 0 {
		return fmt.Errorf("%w: %d (first %q): a checkpoint create is in flight or died; run `retain reconcile`, then cleanup again; nothing was deleted: %w",
			ErrSidecarsPending, len(pending), pending[0], storage.Errorf("cleanup-run", pending[0], storage.ErrPreconditionFailed, "recovery sidecars pending"))
	}
	if openErr != nil {
		return openErr
	}
	if len(open) > 0 {
		return openRunError(ctx, s, open)
	}
	return nil
}

// reconcileUnderClaim reconciles the store under the run's claim, recording
// the result in rep. With IsolateReconcile, a conflict confined to one
// table skips that table (the map says why, by path); any other failure
// refuses the whole run.
func reconcileUnderClaim(ctx context.Context, s *storage.Store, o RunOptions, scope storage.Scope, rep *RunReport) (map[string]string, error) {
	popts := checkpoint.Options{Actor: o.Actor, Scope: scope}
	conflicted := map[string]string{}
	var err error
	if rep.Reconcile, err = popts.ReconcileHeld(ctx, s); err == nil {
		return conflicted, nil
	}
	// Lost authority is never isolated to a table: the registry that
	// would justify any deletion is in doubt.
	if !o.IsolateReconcile || !errors.Is(err, checkpoint.ErrConflicts) || errors.Is(err, checkpoint.ErrAuthorityLost) || rep.Reconcile == nil {
		first := ""
		if rep.Reconcile != nil && len(rep.Reconcile.Conflicts) > 0 {
			c := rep.Reconcile.Conflicts[0]
			first = fmt.Sprintf(" (first: %s %s %s: %s)", c.Kind, c.Path, c.Tag, c.Detail)
		}
		return nil, fmt.Errorf("%w: reconcile under the claim%s; nothing was deleted: %w", ErrRunRefused, first, err)
	}
	for _, c := range rep.Reconcile.Conflicts {
		if c.Path == "" || c.Path == registry.RegistryPath {
			return nil, fmt.Errorf("%w: reconcile under the claim: a store-wide conflict (%s): %w", ErrRunRefused, c.Detail, err)
		}
		if checkpoint.LostPinConflict(c) {
			// A checkpoint's version that is gone is a root no one can
			// honour: the store is refused, as Preview refuses it.
			return nil, fmt.Errorf("%w: reconcile under the claim: %s %s: %s; nothing was deleted: %w", ErrRunRefused, c.Kind, c.Path, c.Detail, err)
		}
		if conflicted[c.Path] == "" {
			conflicted[c.Path] = fmt.Sprintf("reconcile conflict (%s %s): %s; this table is skipped until `retain reconcile` settles it", c.Kind, c.Tag, c.Detail)
		}
	}
	return conflicted, nil
}

// runBoundaries is a run planned but not yet published: the registry head
// it was planned against, the draft carrying its gc_boundary rows, its
// journal, and each journal table's Lance plan (nil when nothing is
// deleted there).
type runBoundaries struct {
	reg   *registry.Registry
	rv    registry.Version
	draft *registry.Snapshot
	j     *Journal
	plans []*lance.Plan
}

// planBoundaries turns the store plan into one gc_boundary row per table
// with files to remove (recorded in rep.Boundaries) and the journal that
// will carry the run. It refuses if the registry moved since the plan was
// made. The plan's own registry head (read under the claim) is the one
// drafted on, without reading it again: the boundary commit is
// conditional on it, so a registry that moved since fails that commit and
// the run deletes nothing. pre, when it read that same head, is the
// registry's own cleanup read ahead.
func planBoundaries(ctx context.Context, s *storage.Store, scope storage.Scope, p Policy, plan *StorePlan, op string, h *claim.Handle, online bool, rep *RunReport, pre *registryPrefetch) (*runBoundaries, error) {
	reg := registry.Open(s, registry.Options{Scope: scope})
	rv, snap := registry.Version(plan.RegistryVersion), plan.snap
	var err error
	if snap == nil {
		if rv, snap, err = reg.Head(ctx); err != nil {
			return nil, err
		}
		if uint64(rv) != plan.RegistryVersion {
			return nil, fmt.Errorf("%w: the registry moved from version %d to %d under the claim; nothing was deleted", ErrRunRefused, plan.RegistryVersion, rv)
		}
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	draft := snap.Next()
	mode := ModeWriteOutage
	if online {
		mode = ModeOnline
	}
	j := &Journal{Format: journalFormat, OperationID: op, State: StateRunning, Mode: mode, Actor: h.Payload().Actor, StartedAt: rep.StartedAt,
		Policy: plan.Policy, BoundaryVersion: uint64(draft.Version), Tables: []JournalTable{}}
	var plans []*lance.Plan
	var bounds []registry.GCBoundary
	for _, tp := range plan.Tables {
		if tp.Lance == nil {
			jt := JournalTable{Table: tp.Table, State: TableSkipped, Error: strings.Join(tp.Notes, "; ")}
			if tp.Refused != "" {
				jt.State, jt.Error = TableRefused, tp.Refused
			}
			j.Tables = append(j.Tables, jt)
			plans = append(plans, nil)
			continue
		}
		if len(tp.Lance.Files) == 0 {
			// Nothing to remove: no boundary moves, no line is written.
			j.Tables = append(j.Tables, JournalTable{Table: tp.Table, State: TableDone})
			plans = append(plans, nil)
			continue
		}
		t, ok := draft.TableByPath(tp.Table)
		if !ok {
			if t, err = draft.AddTable(registry.NewID(), tp.Table, now); err != nil {
				return nil, err
			}
		}
		g := registry.GCBoundary{TableID: t.ID, Path: tp.Table, Incarnation: t.Incarnation,
			Cutoff: cutoffText(plan.Policy, tp.Table, tp.Lance), RootDigest: RootDigest(tp.Lance), OperationID: op, At: now,
			NewestRemoved: newestRemoved(tp.Lance)}
		bounds = append(bounds, g)
		j.Tables = append(j.Tables, JournalTable{Table: tp.Table, TableID: t.ID, Incarnation: t.Incarnation, RootDigest: g.RootDigest, Cutoff: g.Cutoff,
			PlanKey: planKey(op, len(plans)), State: TablePending}) // its object's key: set by groupPlans
		plans = append(plans, tp.Lance)
	}
	if err := setGCBoundaries(draft, bounds); err != nil {
		return nil, err
	}
	rep.Boundaries = append(rep.Boundaries, bounds...)
	var rr registryReads
	if pre != nil && pre.snap == snap {
		rr, err = pre.wait(ctx)
	} else {
		rr, err = readRegistry(ctx, s, snap)
	}
	if err != nil {
		return nil, &RefusedError{Key: registry.RegistryPath, Reason: "planning the registry's own cleanup", Cause: err}
	}
	j.Registry = planRegistryFrom(rr, snap, p, plan.PlannedAt, len(rep.Boundaries) > 0)
	if p.reviewed {
		// A reviewed plan lists what may be removed; the registry's own
		// history is not in it, so it is left for the next run.
		j.Registry = RegistryCleanup{Remove: []uint64{}, State: TableDone}
	}
	if len(rep.Boundaries) == 0 {
		j.BoundaryVersion = 0
	}
	return &runBoundaries{reg: reg, rv: rv, draft: draft, j: j, plans: plans}, nil
}

// finishQuiet reports a run with nothing to remove anywhere.
func finishQuiet(rep *RunReport, j *Journal, plan *StorePlan) {
	for _, jt := range j.Tables {
		tr := TableRun{Table: jt.Table, State: jt.State, Skipped: jt.State == TableSkipped, Notes: nonEmpty(jt.Error)}
		if jt.State == TableRefused {
			refusedRun(jt, &tr, plan)
			rep.Failed++
		}
		rep.Tables = append(rep.Tables, tr)
	}
	rep.Registry = j.Registry
	rep.FinishedAt = time.Now().UTC()
}
