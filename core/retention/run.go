package retention

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/retain-dev/retain/core/authz"
	"github.com/retain-dev/retain/core/checkpoint"
	"github.com/retain-dev/retain/core/checkpoint/registry"
	"github.com/retain-dev/retain/core/failpoint"
	"github.com/retain-dev/retain/core/internal/fanout"
	"github.com/retain-dev/retain/core/lance"
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
