package retention

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/retain-dev/retain/core/authz"
	"github.com/retain-dev/retain/core/checkpoint"
	"github.com/retain-dev/retain/core/checkpoint/registry"
	"github.com/retain-dev/retain/core/failpoint"
	"github.com/retain-dev/retain/core/internal/fanout"
	"github.com/retain-dev/retain/core/lance"
	"github.com/retain-dev/retain/core/retention/runs"
	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/claim"
)

// Failpoints of cleanup run, in order.
const (
	FPRunAfterClaim    = "cleanup/after-claim"
	FPRunAfterBoundary = "cleanup/after-boundary"
	FPRunAfterTable    = "cleanup/after-table" // after each table
	// FPRunMidTable is inside a table: its removed manifests are deleted,
	// the rest of its files not yet.
	FPRunMidTable = lance.FPCleanupAfterManifests
)

// MinOnlineAge is the shortest older-than window an online run accepts.
const MinOnlineAge = time.Hour

// RunFailpoints lists cleanup run's failpoints in order.
var RunFailpoints = []string{FPRunAfterClaim, FPRunAfterBoundary, FPRunMidTable, FPRunAfterTable}

// Typed refusals of Run.
var (
	// ErrSidecarsPending: recovery sidecars of checkpoint creates are
	// pending; run `retain reconcile` first. Nothing was deleted.
	ErrSidecarsPending = errors.New("checkpoint create recovery sidecars are pending")
	// ErrRunRefused: the run was refused before anything was deleted
	// (reconcile found conflicts, the registry moved under the claim).
	ErrRunRefused = errors.New("cleanup run refused")
)

// RunOptions configure Run.
type RunOptions struct {
	// ConfirmWriteOutage: the caller confirms no writer commits to the
	// store's tables while the run deletes. Either it or Online is needed.
	ConfirmWriteOutage bool
	// Online runs while writers may commit (the maintenance daemon), as
	// Lance's own cleanup does: only with a time window of at least
	// MinOnlineAge, so that no version a writer may still be building on is
	// removed; unreferenced files younger than the safety window are kept
	// and each table's plan is re-checked right before its deletions (a
	// commit since planning makes the table stale, untouched).
	Online bool
	// Actor recorded in the claim; default the claim's ($USER@host).
	Actor string
	// Scope of the store's writers; zero means claim.ScopeFor(s.Location()).
	Scope storage.Scope
	// Host names this process's host in the claim (claim.Request.Host);
	// default os.Hostname(). The fleet daemon puts its identity here.
	Host string
	// OperationID names the run; default "cleanup-<new id>".
	OperationID string
	// Progress, if set, is called after each table.
	Progress func(Progress)
	// IsolateReconcile: a reconcile conflict on a table skips that table
	// (loudly, in its notes) instead of refusing the whole run; a conflict
	// of the registry still refuses. The maintenance daemon sets it.
	IsolateReconcile bool
	// Reviewed, if set, is the reviewed plan to apply (`cleanup run
	// --plan`): the window is the plan's (its cut-off fixed; the Policy
	// passed must be zero), and the run refuses with a *PlanStaleError,
	// before anything is deleted, unless the plan it makes under the claim
	// has the same roots and removes nothing the reviewed plan does not
	// list. The registry's own old versions, which a reviewed plan does not
	// list, are left for the next run.
	Reviewed *ReviewedPlan
}

func (o RunOptions) scope(s *storage.Store) storage.Scope {
	if o.Scope != storage.ScopeNone {
		return o.Scope
	}
	return claim.ScopeFor(s.Location())
}

// RunReport is what Run did.
type RunReport struct {
	OperationID string     `json:"operation_id"`
	StartedAt   time.Time  `json:"started_at"`
	FinishedAt  time.Time  `json:"finished_at"`
	Policy      PolicyEcho `json:"policy"`
	// Reconcile is the report of the reconcile run under the claim.
	Reconcile *checkpoint.Report `json:"reconcile,omitempty"`
	// BoundaryVersion is the registry version that published the
	// gc_boundary rows (0: nothing to clean, nothing committed).
	BoundaryVersion uint64                `json:"boundary_version"`
	Boundaries      []registry.GCBoundary `json:"boundaries"`
	Tables          []TableRun            `json:"tables"`
	Totals          RunTotals             `json:"totals"`
	// Registry is the registry's own cleanup.
	Registry RegistryCleanup `json:"registry"`
	// Resumed: this report is of a resumption (Resume).
	Resumed bool `json:"resumed,omitempty"`
	// Failed counts tables whose cleanup failed or whose plan went stale.
	Failed int `json:"failed"`
}

// TableRun is one table's outcome.
type TableRun struct {
	Table            string               `json:"table"`
	RootDigest       string               `json:"root_digest,omitempty"`
	VersionsRemoved  int                  `json:"versions_removed"`
	ManifestsDeleted int                  `json:"manifests_deleted"`
	FilesDeleted     int                  `json:"files_deleted"`
	BytesDeleted     int64                `json:"bytes_deleted"`
	FailedDeletes    []lance.FailedDelete `json:"failed_deletes,omitempty"`
	// Error is why the table's cleanup failed ("" when it did not).
	Error   string     `json:"error,omitempty"`
	Skipped bool       `json:"skipped,omitempty"`
	State   TableState `json:"state,omitempty"`
	Notes   []string   `json:"notes,omitempty"`
	err     error
	// started: deleting began; remaining: what it did not get confirmed.
	started   bool
	remaining []string
}

// Err is the table's error, nil when it did not fail.
func (t TableRun) Err() error { return t.err }

// RunTotals sums the run up.
type RunTotals struct {
	Tables          int   `json:"tables"`
	VersionsRemoved int   `json:"versions_removed"`
	FilesDeleted    int   `json:"files_deleted"`
	BytesDeleted    int64 `json:"bytes_deleted"`
}

// Progress is one step of a run, for a terminal display.
type Progress struct {
	OperationID string `json:"operation_id"`
	// Table is the table just carried out ("" for the registry step).
	Table string     `json:"table"`
	State TableState `json:"state"`
	// Done and Total count tables (the registry step not included).
	Done, Total int
	// BytesDeleted is the run's running total.
	BytesDeleted int64
}

// Run cleans every table of the store under the claim (issue 7, section
// 3): refuse without ConfirmWriteOutage; acquire the claim; refuse while
// create sidecars are pending or another run is unfinished; reconcile;
// recompute the plan (Preview, whose refusal of any root aborts before the
// first deletion); journal every table's plan; publish one gc_boundary row
// per planned table in one registry commit; then carry out each table's
// plan with the Lance layer, fault-isolated and verifying the claim before
// each table; then the registry's own old versions; release the claim.
//
// The claim is released only when the run is complete or durably
// resumable (its plans journaled, its boundaries published): a run that
// stops part-way returns an *IncompleteError (ErrRunIncomplete), and
// Resume finishes it. An error that is not ErrRunIncomplete means nothing
// was deleted.
func Run(ctx context.Context, s *storage.Store, p Policy, o RunOptions) (rep *RunReport, err error) {
	if o.Reviewed != nil {
		if p.OlderThan != 0 || p.KeepLast != 0 || len(p.Tables)+len(p.Branches) > 0 {
			return nil, storage.Errorf("cleanup-run", "", storage.ErrInvalidArgument, "a reviewed plan carries its window: pass no --older-than, --keep-last, --table-window or --branch-window with --plan")
		}
		if got := s.Location().String(); got != o.Reviewed.Store {
			return nil, fmt.Errorf("%w: the plan is of store %s, not %s: make and review a plan of this store (`retain cleanup preview STORE --out plan.json`)", ErrPlanInvalid, o.Reviewed.Store, got)
		}
		if p, err = o.Reviewed.policy(); err != nil {
			return nil, err
		}
	}
	if err := checkRun(p, o); err != nil {
		return nil, err
	}
	// Before the claim, so a denial writes nothing; the allow is kept in
	// ctx for the run's audit records.
	if ctx, err = authz.CheckNote(ctx, authz.Request{Action: authz.ActionCleanupRun, Command: "cleanup run", Store: authz.StoreName(s)}); err != nil {
		return nil, err
	}
	scope := o.scope(s)
	op := o.OperationID
	if op == "" {
		op = "cleanup-" + string(registry.NewID())
	}
	if err := checkOp(op); err != nil {
		return nil, err
	}
	h, err := claim.Acquire(ctx, s, claim.Request{OperationID: op, Action: "cleanup", Actor: o.Actor, Scope: scope, Host: o.Host})
	if err != nil {
		return nil, err
	}
	defer func() {
		if rerr := release(ctx, h); rerr != nil && err == nil {
			err = rerr
		}
	}()
	failpoint.Hit(FPRunAfterClaim)
	rep = &RunReport{OperationID: op, StartedAt: time.Now().UTC(), Boundaries: []registry.GCBoundary{}, Tables: []TableRun{}}

	if err := preflightRun(ctx, s); err != nil {
		return rep, err
	}
	conflicted, err := reconcileUnderClaim(ctx, s, o, scope, rep)
	if err != nil {
		return rep, err
	}
	if len(conflicted) > 0 {
		p.Skip = conflicted
	}
	// What reconcile just read under this claim (the registry head, the
	// tables, the pinned manifests) is not read again.
	p.verified, p.verifiedAt = rep.Reconcile.CommitVerified, uint64(rep.Reconcile.RegistryVersion)
	p.refs = rep.Reconcile.Refs
	if head := rep.Reconcile.Head(); head != nil && head.Version == rep.Reconcile.RegistryVersion {
		p.head, p.tables = head, rep.Reconcile.Tables
	}
	// The registry's own cleanup is read while the tables are planned.
	var pre *registryPrefetch
	pctx, stopPrefetch := context.WithCancel(ctx)
	defer stopPrefetch()
	if !p.reviewed {
		p.onHead = func(snap *registry.Snapshot) { pre = prefetchRegistry(pctx, s, snap) }
	}
	plan, err := Preview(ctx, s, p)
	if err != nil {
		return rep, err
	}
	rep.Policy = plan.Policy
	if o.Reviewed != nil {
		if err := o.Reviewed.check(plan); err != nil {
			return rep, err
		}
	}
	if err := h.Verify(ctx); err != nil {
		return rep, err
	}

	b, err := planBoundaries(ctx, s, scope, p, plan, op, h, o.Online, rep, pre)
	if err != nil {
		return rep, err
	}
	if len(rep.Boundaries) == 0 && len(b.j.Registry.Remove) == 0 {
		// Nothing to remove anywhere: nothing is journaled or committed,
		// and the pass stays quiet.
		finishQuiet(rep, b.j, plan)
		return rep, nil
	}
	jw, err := publishRun(ctx, s, b, rep)
	if err != nil {
		return rep, err
	}
	failpoint.Hit(FPRunAfterBoundary)
	err = execute(ctx, s, h, jw, rep, o.Progress, b.plans)
	for i := range rep.Tables {
		if rep.Tables[i].State == TableRefused {
			refusedRun(JournalTable{Table: rep.Tables[i].Table, Error: rep.Tables[i].Error}, &rep.Tables[i], plan)
		}
	}
	return rep, err
}

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

// publishRun journals the plans, marks the run open, then publishes the
// boundaries in one commit, before anything is deleted.
func publishRun(ctx context.Context, s *storage.Store, b *runBoundaries, rep *RunReport) (*journalWriter, error) {
	j, op := b.j, b.j.OperationID
	// The plans side by side; every one is written before the journal
	// that names them.
	keys, bodies, err := groupPlans(op, j.Tables, b.plans)
	if err != nil {
		return nil, fmt.Errorf("journaling the plans (nothing was deleted): %w", err)
	}
	err = fanout.Each(ctx, s.Parallelism(), len(keys), func(ctx context.Context, i int) error {
		if _, err := s.PutBytes(ctx, keys[i], bodies[i], storage.PutOptions{Mode: storage.PutCreateIfAbsent}); err != nil {
			return fmt.Errorf("journaling the plans (%s; nothing was deleted): %w", keys[i], err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	jw := &journalWriter{s: s, j: j}
	if err := jw.create(ctx); err != nil {
		return nil, fmt.Errorf("%w (nothing was deleted)", err)
	}
	if _, err := s.PutBytes(ctx, openKey(op), []byte(JournalKey(op)+"\n"), storage.PutOptions{Mode: storage.PutCreateIfAbsent}); err != nil {
		return nil, fmt.Errorf("marking the run open (nothing was deleted): %w", err)
	}
	if len(rep.Boundaries) == 0 {
		return jw, nil
	}
	_, err = b.reg.Commit(ctx, b.rv, b.draft)
	if err != nil {
		// A lost response may hide a commit that landed: the version
		// carrying this run's rows decides.
		if ok, perr := boundariesPublished(ctx, s, j, &RunReport{}); perr == nil && ok {
			err = nil
			if _, hb, herr := b.reg.HeadUnverified(ctx); herr == nil && hb.Version == b.draft.Version {
				_ = b.reg.WriteHeadRecord(ctx, hb.Version, hb) // it landed; Commit gave up before its record
			}
		}
	}
	if err != nil {
		// Not published: the run must never resume. Close it.
		j.State, j.Note = StateAbandoned, "the gc boundary commit failed; nothing was deleted"
		if cerr := closeRun(ctx, jw); cerr != nil {
			err = fmt.Errorf("%w; closing the run: %v", err, cerr)
		}
		return nil, fmt.Errorf("publishing the gc boundaries (nothing was deleted): %w", err)
	}
	rep.BoundaryVersion = uint64(b.draft.Version)
	return jw, nil
}

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

// execute carries out the journaled plans not yet done, then the
// registry's own cleanup, and closes or suspends the run. plans, when not
// nil, are the journaled plans as this process planned and wrote them (by
// journal table): they are carried out without reading them back. A
// resume (plans nil) reads each from the journal.
func execute(ctx context.Context, s *storage.Store, h *claim.Handle, jw *journalWriter, rep *RunReport, progress func(Progress), plans []*lance.Plan) error {
	j := jw.j
	au := &auditor{s: s, op: j.OperationID, actor: h.Payload().Actor}
	pr := newPlanReader(s)
	total, done := planCounts(j)
	runs := make([]TableRun, len(j.Tables))
	var pending []int
	for i := range j.Tables {
		jt := &j.Tables[i]
		tr := TableRun{Table: jt.Table, RootDigest: jt.RootDigest, State: jt.State}
		if jt.State == TableSkipped {
			tr.Skipped = true
			if jt.Error != "" {
				tr.Notes = []string{jt.Error}
			}
		}
		if jt.State == TableRefused {
			// Not cleaned: a failure of the run, though nothing is left
			// to resume of it.
			refusedRun(*jt, &tr, nil)
			rep.Failed++
		}
		runs[i] = tr
		if jt.State == TablePending || jt.State == TableFailed {
			pending = append(pending, i)
		}
	}
	// The pending tables side by side. Each checks the claim right before
	// its deletions; the journal is saved after each table, saves of
	// tables finishing together coalescing into one (a table whose "done"
	// was not saved yet is carried out again by a resume, which deletes
	// nothing twice).
	// A failed claim check (or journal save) stops every table: those not
	// started are not run, and those deleting are cancelled (their deletes
	// are journaled plans, so a resume finishes them), so that no table
	// deletes past the moment this run knows it no longer holds the store.
	runCtx, cancelRun := context.WithCancelCause(ctx)
	defer cancelRun(nil)
	x := &executor{jw: jw, rep: rep, runs: runs, done: done, cancel: cancelRun}
	started := make([]bool, len(j.Tables))
	_ = fanout.Each(runCtx, s.Parallelism(), len(pending), func(ctx context.Context, k int) error {
		i := pending[k]
		started[i] = true
		if stop := x.stopped(); stop != nil {
			x.notRun(i, stop)
			return nil
		}
		if err := h.Verify(ctx); err != nil {
			x.stop(err)
			x.notRun(i, err)
			return nil
		}
		tr := runs[i] // this table's own entry: no other goroutine touches it
		var mem *lance.Plan
		if i < len(plans) {
			mem = plans[i]
		}
		outcome := runTable(ctx, s, au, pr, j.Tables[i], &tr, mem)
		gen := x.record(i, tr)
		// The outcome's audit line is written while the journal is saved:
		// neither waits for the other.
		var werr error
		written := make(chan struct{})
		go func() {
			defer close(written)
			if outcome != nil {
				werr = outcome()
			}
		}()
		x.saveThrough(ctx, gen)
		<-written
		if werr != nil {
			// The "removing" line stands for these deletions.
			x.note(i, "the audit line of the outcome was not written: "+werr.Error())
		}
		if progress != nil {
			x.mu.Lock()
			progress(Progress{OperationID: j.OperationID, Table: j.Tables[i].Table, State: j.Tables[i].State, Done: x.done, Total: total, BytesDeleted: rep.Totals.BytesDeleted})
			x.mu.Unlock()
		}
		failpoint.Hit(FPRunAfterTable)
		return nil
	})
	for _, i := range pending {
		if !started[i] { // the run's context ended before the table's turn
			x.notRun(i, context.Cause(runCtx))
		}
	}
	stop := x.stopErr
	if stop == nil && ctx.Err() != nil {
		stop = context.Cause(ctx)
	}
	rep.Tables = append(rep.Tables, runs...)
	if stop == nil && (j.Registry.State == TablePending || j.Registry.State == TableFailed) {
		if stop = h.Verify(ctx); stop == nil {
			cleanRegistry(ctx, s, au, &j.Registry)
			if err := jw.save(ctx); err != nil {
				stop = err
			}
		}
	}
	rep.Registry = j.Registry
	rep.FinishedAt = time.Now().UTC()
	return finishExecute(ctx, jw, total, x.done, stop)
}

// executor is the shared state of execute's table workers: the journal,
// the report and the first reason to stop, under mu; saveMu serializes
// journal writes, each of which covers every table recorded before it.
type executor struct {
	jw   *journalWriter
	rep  *RunReport
	runs []TableRun

	mu      sync.Mutex
	done    int
	stopErr error
	gen     int // bumped by every record
	cancel  context.CancelCauseFunc

	saveMu sync.Mutex
	saved  int // the gen the journal object holds
}

func (x *executor) stopped() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.stopErr
}

func (x *executor) stop(err error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.stopErr == nil {
		x.stopErr = err
		x.cancel(err)
	}
}

// note adds a note to table i's report.
func (x *executor) note(i int, n string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.runs[i].Notes = append(x.runs[i].Notes, n)
}

// notRun reports table i as not run because of stop.
func (x *executor) notRun(i int, stop error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.runs[i].Error, x.runs[i].err = "not run: "+stop.Error(), stop
	x.rep.Failed++
}

// record puts what table i's run did into its journal entry and the
// report, and returns the generation a save must reach to hold it.
func (x *executor) record(i int, tr TableRun) int {
	x.mu.Lock()
	defer x.mu.Unlock()
	if executeTable(&x.jw.j.Tables[i], &tr, x.rep) {
		x.done++
	}
	x.runs[i] = tr
	x.gen++
	return x.gen
}

// saveThrough returns once the journal object holds generation gen: it
// saves, unless a save since gen was recorded already did.
func (x *executor) saveThrough(ctx context.Context, gen int) {
	x.saveMu.Lock()
	defer x.saveMu.Unlock()
	if x.saved >= gen {
		return
	}
	x.mu.Lock()
	g := x.gen
	b, err := x.jw.encode()
	x.mu.Unlock()
	if err == nil {
		err = x.jw.put(ctx, b)
	}
	if err != nil {
		x.stop(err)
		return
	}
	x.saved = g
}

// planCounts is how many tables the run journaled a plan for, and how many
// of them are done (or stale: nothing left to do).
func planCounts(j *Journal) (total, done int) {
	for _, t := range j.Tables {
		if t.PlanKey != "" {
			total++
			if t.State == TableDone || t.State == TableStale {
				done++
			}
		}
	}
	return total, done
}

// executeTable carries out one pending or failed table's plan, records the
// attempt in its journal entry and the report, and reports whether the
// table is now done (or stale).
// executeTable records in the journal entry jt and in rep what one
// attempt at the table did (tr, from runTable), and reports whether the
// table is finished.
func executeTable(jt *JournalTable, tr *TableRun, rep *RunReport) bool {
	jt.Attempts++
	if tr.started {
		// What this attempt did not get confirmed is all that is left.
		jt.Retry = nil
		if tr.err != nil && len(tr.remaining) <= maxRetryKeys {
			jt.Retry = tr.remaining
		}
	}
	jt.VersionsRemoved += tr.VersionsRemoved
	jt.FilesDeleted += tr.FilesDeleted
	jt.BytesDeleted += tr.BytesDeleted
	finished := false
	switch {
	case tr.err == nil:
		jt.State, jt.Error = TableDone, ""
		finished = true
	case errors.Is(tr.err, lance.ErrPlanStale):
		jt.State, jt.Error = TableStale, tr.Error
		finished = true
		rep.Failed++
	default:
		jt.State, jt.Error = TableFailed, tr.Error
		rep.Failed++
	}
	tr.State = jt.State
	rep.Totals.Tables++
	rep.Totals.VersionsRemoved += tr.VersionsRemoved
	rep.Totals.FilesDeleted += tr.FilesDeleted
	rep.Totals.BytesDeleted += tr.BytesDeleted
	return finished
}

// finishExecute closes a run whose every plan is carried out, or marks it
// incomplete and says what is left and the first failure.
func finishExecute(ctx context.Context, jw *journalWriter, total, done int, stop error) error {
	j := jw.j
	if stop == nil && j.finished() {
		j.State = StateComplete
		if err := closeRun(ctx, jw); err != nil {
			return &IncompleteError{OperationID: j.OperationID, Done: done, Left: 0, Cause: err}
		}
		return nil
	}
	// Durably resumable: the plans are journaled and the boundaries
	// published. Say so in the journal (best effort: a journal still
	// saying "running" resumes the same way).
	j.State = StateIncomplete
	if err := jw.save(ctx); err != nil && stop == nil {
		stop = err
	}
	ie := &IncompleteError{OperationID: j.OperationID, Done: done, Left: total - done + boolInt(j.Registry.State == TableFailed), Cause: stop}
	for _, t := range j.Tables {
		if t.State == TableFailed && ie.FirstFailure == "" {
			ie.FirstFailure = t.Table + ": " + t.Error
		}
	}
	if ie.FirstFailure == "" && j.Registry.State == TableFailed {
		ie.FirstFailure = "registry: " + j.Registry.Error
	}
	return ie
}

func nonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// closeRun saves the journal's final state, then drops the plans and the
// open marker (OpenRuns finishes that part if it is cut short).
func closeRun(ctx context.Context, jw *journalWriter) error {
	if err := jw.save(ctx); err != nil {
		return err
	}
	return tidy(ctx, jw.s, jw.j)
}

// Abandon closes an unfinished run without carrying out the rest of it,
// under the claim (taken over like Resume when the run's own process
// died). Its published boundaries stay: versions behind them remain
// refused as checkpoint targets. The next run plans afresh. A journal that
// does not parse is closed without being read (abandonCorrupt).
func Abandon(ctx context.Context, s *storage.Store, op string, o ResumeOptions) (j *Journal, err error) {
	if ctx, err = authz.CheckNote(ctx, authz.Request{Action: authz.ActionCleanupRun, Command: "cleanup abandon", Store: authz.StoreName(s)}); err != nil {
		return nil, err
	}
	if j, _, err = ReadJournal(ctx, s, op); err != nil && !errors.Is(err, ErrCorruptJournal) && storage.KindOf(err) != storage.ErrNotFound {
		return nil, err
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
	j, ver, err := ReadJournal(ctx, s, op)
	if errors.Is(err, ErrCorruptJournal) || storage.KindOf(err) == storage.ErrNotFound {
		return abandonCorrupt(ctx, s, h, op, !errors.Is(err, ErrCorruptJournal))
	}
	if err != nil {
		return nil, err
	}
	if j.State == StateComplete || j.State == StateAbandoned {
		return j, storage.Errorf("cleanup-abandon", JournalKey(op), storage.ErrPreconditionFailed, "cleanup run %s is already %s", op, j.State)
	}
	j.State, j.Note = StateAbandoned, "abandoned by "+h.Payload().Actor
	return j, closeRun(ctx, &journalWriter{s: s, j: j, ver: ver})
}

// release gives the claim back. Its delete names the exact claim object
// (delete-if-version), so repeating it after a failure whose outcome is
// unknown is safe: that idempotence, not the error's kind, is what allows
// the retry. "Already gone" after a failed attempt is our own delete.
func release(ctx context.Context, h *claim.Handle) error {
	ctx = context.WithoutCancel(ctx)
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		err = h.Release(ctx)
		switch {
		case err == nil:
			return nil
		case attempt > 0 && errors.Is(err, storage.ErrNotFound):
			return nil // our earlier delete landed; its response was lost
		case errors.Is(err, claim.ErrLost):
			return err // gone or replaced before we released: say so
		}
	}
	return err
}

// runTable carries out one journaled plan (mem: the plan as journaled by
// this process, nil: read it from the journal); a panic or error is the
// table's. Its removals are framed by audit lines: no "removing" line, no
// deletion. The line of the outcome is returned to be written (nil when
// there is none to write).
func runTable(ctx context.Context, s *storage.Store, au *auditor, pr *planReader, jt JournalTable, tr *TableRun, mem *lance.Plan) (outcome func() error) {
	defer func() {
		if r := recover(); r != nil {
			tr.err = fmt.Errorf("cleanup of %s panicked: %v", jt.Table, r)
			tr.Error = tr.err.Error()
		}
	}()
	lp, err := mem, error(nil)
	if lp == nil {
		lp, err = pr.read(ctx, jt)
	}
	if err == nil && len(jt.Retry) > 0 {
		// An earlier attempt deleted the rest, confirmed: only what it
		// left is carried out (and counted) again.
		lp = onlyFiles(lp, jt.Retry)
	}
	var line *AuditRecord
	if err == nil {
		versions, files, bytes := planned(lp)
		if files > 0 {
			line = &AuditRecord{Event: AuditRemoving, Table: jt.Table, Cutoff: jt.Cutoff, RootDigest: jt.RootDigest,
				Versions: versions, FilesPlanned: files, BytesPlanned: bytes}
			if err = au.write(ctx, *line); err != nil {
				err = fmt.Errorf("nothing deleted: %w", err)
				line = nil
			}
		}
	}
	if err == nil {
		var ds *lance.Dataset
		if ds, err = lance.Open(s, jt.Table); err == nil {
			var res *lance.Result
			res, err = ds.ExecuteCleanup(ctx, lp)
			if res != nil {
				tr.ManifestsDeleted = res.ManifestsDeleted
				tr.FilesDeleted = res.FilesDeleted
				tr.BytesDeleted = res.BytesDeleted
				tr.FailedDeletes = res.Failed
				tr.VersionsRemoved = res.ManifestsDeleted
				tr.started, tr.remaining = res.Started, res.Remaining
			}
			if err == nil && res != nil && len(res.Failed) > 0 {
				err = fmt.Errorf("%w: %d object(s) could not be deleted (first %q: %s)", lance.ErrDeletesFailed, len(res.Failed), res.Failed[0].Key, res.Failed[0].Err)
			}
			// A delete the store did not confirm keeps the table failed and
			// the run resumable, even when only unreferenced files are
			// left: the report says what happened, and `--resume` retries.
		}
	}
	if err != nil {
		tr.err = err
		tr.Error = err.Error()
	}
	if line != nil {
		line.Event, line.Error = AuditRemoved, ""
		if err != nil {
			line.Event, line.Error = AuditRemoveFailed, err.Error()
		}
		line.VersionsRemoved, line.FilesRemoved, line.BytesRemoved = tr.VersionsRemoved, tr.FilesDeleted, tr.BytesDeleted
		line.FilesFailed = len(tr.FailedDeletes)
		for _, f := range tr.FailedDeletes[:min(len(tr.FailedDeletes), auditFailedKeys)] {
			line.Failed = append(line.Failed, f.Key)
		}
		out := *line
		return func() error { return au.write(ctx, out) }
	}
	return nil
}

// onlyFiles is lp with only the files of keys left to delete (an earlier
// attempt's remainder), in the plan's order: removed manifests first.
func onlyFiles(lp *lance.Plan, keys []string) *lance.Plan {
	left := make(map[string]bool, len(keys))
	for _, k := range keys {
		left[k] = true
	}
	out := *lp
	out.Files = nil
	for _, f := range lp.Files {
		if left[f.Key] {
			out.Files = append(out.Files, f)
		}
	}
	return &out
}

// maxRetryKeys bounds the keys a journal keeps to retry; beyond it a
// resume carries out the whole plan again (deleting what is already gone
// is a no-op, but it is counted again).
const maxRetryKeys = 10000

// newestRemoved is, per branch, the newest version the plan removes.
func newestRemoved(lp *lance.Plan) []registry.BranchVersion {
	newest := map[string]uint64{}
	for _, v := range lp.Versions {
		b := v.Branch
		if b == "" {
			b = registry.MainBranch
		}
		if !v.Keep && v.Version > newest[b] {
			newest[b] = v.Version
		}
	}
	out := make([]registry.BranchVersion, 0, len(newest))
	for b, v := range newest {
		out = append(out, registry.BranchVersion{Branch: b, Version: v})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Branch < out[j].Branch })
	return out
}

// RootDigest is "sha256:<hex>" over the sorted lines naming what a table's
// plan keeps ("keep <branch> v<n> <manifest key>") and removes ("remove
// <key>"): the same plan always gives the same digest.
func RootDigest(lp *lance.Plan) string {
	var lines []string
	for _, v := range lp.Versions {
		if v.Keep {
			lines = append(lines, fmt.Sprintf("keep %s %s", lance.VersionID{Branch: v.Branch, Version: v.Version}, v.Key))
		}
	}
	for _, f := range lp.Files {
		lines = append(lines, "remove "+f.Key)
	}
	sort.Strings(lines)
	sum := sha256.Sum256([]byte(strings.Join(lines, "\n")))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// cutoffText describes the window and the newest removed version of each
// branch.
func cutoffText(p PolicyEcho, table string, lp *lance.Plan) string {
	var parts []string
	if p.Cutoff != nil {
		parts = append(parts, fmt.Sprintf("older than %s (cut-off %s)", p.OlderThan, p.Cutoff.Format(time.RFC3339)))
	}
	if p.KeepLast > 0 {
		parts = append(parts, fmt.Sprintf("keep-last %d", p.KeepLast))
	}
	parts = append(parts, rulesText(p, table, lp)...)
	newest := map[string]uint64{}
	for _, v := range lp.Versions {
		if !v.Keep && v.Version > newest[v.Branch] {
			newest[v.Branch] = v.Version
		}
	}
	if len(newest) == 0 {
		parts = append(parts, "nothing removed")
	} else {
		var bs []string
		for b := range newest {
			bs = append(bs, b)
		}
		sort.Strings(bs)
		var rs []string
		for _, b := range bs {
			rs = append(rs, lance.VersionID{Branch: b, Version: newest[b]}.String())
		}
		parts = append(parts, "newest removed: "+strings.Join(rs, ", "))
	}
	return strings.Join(parts, "; ")
}
