package retention

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/retain-dev/retain/core"
	"github.com/retain-dev/retain/core/checkpoint"
	"github.com/retain-dev/retain/core/checkpoint/protocol"
	"github.com/retain-dev/retain/core/claim"
	"github.com/retain-dev/retain/core/lance"
	"github.com/retain-dev/retain/internal/failpoint"
)

// Failpoints of cleanup run, in order.
const (
	FPRunAfterClaim    = "cleanup/after-claim"
	FPRunAfterBoundary = "cleanup/after-boundary"
	FPRunAfterTable    = "cleanup/after-table" // after each table
)

// RunFailpoints lists cleanup run's failpoints in order.
var RunFailpoints = []string{FPRunAfterClaim, FPRunAfterBoundary, FPRunAfterTable}

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
	// ConfirmWriteOutage must be true: the caller confirms no writer
	// commits to the store's tables while the run deletes.
	ConfirmWriteOutage bool
	// Actor recorded in the claim; default the claim's ($USER@host).
	Actor string
	// Scope of the store's writers; zero means claim.ScopeFor(loc).
	Scope core.Scope
	// OperationID names the run; default "cleanup-<new id>".
	OperationID string
}

// RunReport is what Run did.
type RunReport struct {
	OperationID string     `json:"operation_id"`
	StartedAt   time.Time  `json:"started_at"`
	FinishedAt  time.Time  `json:"finished_at"`
	Policy      PolicyEcho `json:"policy"`
	// Reconcile is the report of the reconcile run under the claim.
	Reconcile *protocol.Report `json:"reconcile,omitempty"`
	// BoundaryVersion is the registry version that published the
	// gc_boundary rows (0: nothing to clean, nothing committed).
	BoundaryVersion uint64                  `json:"boundary_version"`
	Boundaries      []checkpoint.GCBoundary `json:"boundaries"`
	Tables          []TableRun              `json:"tables"`
	Totals          RunTotals               `json:"totals"`
	// Failed counts tables whose cleanup failed.
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
	Error   string   `json:"error,omitempty"`
	Skipped bool     `json:"skipped,omitempty"`
	Notes   []string `json:"notes,omitempty"`
	err     error
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

// Run cleans every table of the store under the claim (issue 7,
// section 3): refuse without ConfirmWriteOutage; acquire the claim; refuse
// while create sidecars are pending; reconcile; recompute the plan
// (Preview, whose refusal of any root aborts before the first deletion);
// publish one gc_boundary row per planned table in one registry commit;
// then execute each table's plan with the Lance layer, fault-isolated and
// verifying the claim before each table; release the claim.
//
// A table's failure is recorded in its TableRun and does not stop the
// others; the returned error is nil then (check RunReport.Failed). A lost
// claim stops the run with claim.ErrLost.
func Run(ctx context.Context, s *core.Store, loc core.Location, p Policy, o RunOptions) (rep *RunReport, err error) {
	if !o.ConfirmWriteOutage {
		return nil, core.Errorf("cleanup-run", "", core.ErrInvalidArgument,
			"cleanup run needs a write outage: no writer may commit to the store's tables while it runs, because a commit in flight could reference files it deletes; stop the writers and confirm (--confirm-write-outage)")
	}
	if p.OlderThan == 0 && p.KeepLast == 0 {
		return nil, core.Errorf("cleanup-run", "", core.ErrInvalidArgument, "set --older-than and/or --keep-last: say which versions to keep (keep-last 1 keeps only the latest)")
	}
	scope := o.Scope
	if scope == core.ScopeNone {
		scope = claim.ScopeFor(loc)
	}
	op := o.OperationID
	if op == "" {
		op = "cleanup-" + string(checkpoint.NewID())
	}
	h, err := claim.Acquire(ctx, s, claim.Request{OperationID: op, Action: "cleanup", Actor: o.Actor, Scope: scope})
	if err != nil {
		return nil, err
	}
	defer func() {
		if rerr := h.Release(context.WithoutCancel(ctx)); rerr != nil && err == nil {
			err = rerr
		}
	}()
	failpoint.Hit(FPRunAfterClaim)
	rep = &RunReport{OperationID: op, StartedAt: time.Now().UTC(), Boundaries: []checkpoint.GCBoundary{}, Tables: []TableRun{}}

	pending, err := protocol.PendingSidecars(ctx, s)
	if err != nil {
		return rep, err
	}
	if len(pending) > 0 {
		return rep, fmt.Errorf("%w: %d (first %q): a checkpoint create is in flight or died; run `retain reconcile`, then cleanup again; nothing was deleted: %w",
			ErrSidecarsPending, len(pending), pending[0], core.Errorf("cleanup-run", pending[0], core.ErrPreconditionFailed, "recovery sidecars pending"))
	}
	popts := protocol.Options{Actor: o.Actor, Scope: scope}
	if rep.Reconcile, err = popts.ReconcileHeld(ctx, s, loc); err != nil {
		return rep, fmt.Errorf("%w: reconcile under the claim: %w", ErrRunRefused, err)
	}

	plan, err := Preview(ctx, s, p)
	if err != nil {
		return rep, err
	}
	rep.Policy = plan.Policy
	if err := h.Verify(ctx); err != nil {
		return rep, err
	}

	// Publish the boundaries in one commit before anything is deleted.
	reg := checkpoint.Open(s, checkpoint.Options{Scope: scope})
	rv, snap, err := reg.Head(ctx)
	if err != nil {
		return rep, err
	}
	if uint64(rv) != plan.RegistryVersion {
		return rep, fmt.Errorf("%w: the registry moved from version %d to %d under the claim; nothing was deleted", ErrRunRefused, plan.RegistryVersion, rv)
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	draft := snap.Next()
	digests := map[string]string{}
	for _, tp := range plan.Tables {
		if tp.Lance == nil {
			continue
		}
		t, ok := draft.TableByPath(tp.Table)
		if !ok {
			if t, err = draft.AddTable(checkpoint.NewID(), tp.Table, now); err != nil {
				return rep, err
			}
		}
		d := RootDigest(tp.Lance)
		digests[tp.Table] = d
		g := checkpoint.GCBoundary{TableID: t.ID, Path: tp.Table, Incarnation: t.Incarnation,
			Cutoff: cutoffText(plan.Policy, tp.Lance), RootDigest: d, OperationID: op, At: now}
		if err := draft.SetGCBoundary(g); err != nil {
			return rep, err
		}
		rep.Boundaries = append(rep.Boundaries, g)
	}
	if len(rep.Boundaries) > 0 {
		if _, err := reg.Commit(ctx, rv, draft); err != nil {
			return rep, fmt.Errorf("publishing the gc boundaries (nothing was deleted): %w", err)
		}
		rep.BoundaryVersion = uint64(draft.Version)
	}
	failpoint.Hit(FPRunAfterBoundary)

	for i, tp := range plan.Tables {
		tr := TableRun{Table: tp.Table, RootDigest: digests[tp.Table], Notes: tp.Notes}
		if tp.Lance == nil {
			tr.Skipped = true
			rep.Tables = append(rep.Tables, tr)
			continue
		}
		if err := h.Verify(ctx); err != nil {
			for _, rest := range plan.Tables[i:] {
				rep.Tables = append(rep.Tables, TableRun{Table: rest.Table, RootDigest: digests[rest.Table], Error: "not run: " + err.Error(), err: err})
				rep.Failed++
			}
			rep.FinishedAt = time.Now().UTC()
			return rep, err
		}
		runTable(ctx, s, tp, &tr)
		if tr.err != nil {
			rep.Failed++
		}
		rep.Tables = append(rep.Tables, tr)
		rep.Totals.Tables++
		rep.Totals.VersionsRemoved += tr.VersionsRemoved
		rep.Totals.FilesDeleted += tr.FilesDeleted
		rep.Totals.BytesDeleted += tr.BytesDeleted
		failpoint.Hit(FPRunAfterTable)
	}
	rep.FinishedAt = time.Now().UTC()
	return rep, nil
}

// runTable executes one table's plan; a panic or error is the table's.
func runTable(ctx context.Context, s *core.Store, tp TablePlan, tr *TableRun) {
	defer func() {
		if r := recover(); r != nil {
			tr.err = fmt.Errorf("cleanup of %s panicked: %v", tp.Table, r)
			tr.Error = tr.err.Error()
		}
	}()
	ds, err := lance.Open(s, tp.Table)
	if err == nil {
		var res *lance.Result
		res, err = ds.ExecuteCleanup(ctx, tp.Lance)
		if res != nil {
			tr.ManifestsDeleted = res.ManifestsDeleted
			tr.FilesDeleted = res.FilesDeleted
			tr.BytesDeleted = res.BytesDeleted
			tr.FailedDeletes = res.Failed
			tr.VersionsRemoved = res.ManifestsDeleted
		}
		if err == nil && len(res.Failed) > 0 {
			err = fmt.Errorf("%d object(s) could not be deleted (first %q: %s); the next cleanup finds them again", len(res.Failed), res.Failed[0].Key, res.Failed[0].Err)
		}
	}
	if err != nil {
		tr.err = err
		tr.Error = err.Error()
	}
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
func cutoffText(p PolicyEcho, lp *lance.Plan) string {
	var parts []string
	if p.Cutoff != nil {
		parts = append(parts, fmt.Sprintf("older than %s (cut-off %s)", p.OlderThan, p.Cutoff.Format(time.RFC3339)))
	}
	if p.KeepLast > 0 {
		parts = append(parts, fmt.Sprintf("keep-last %d", p.KeepLast))
	}
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
