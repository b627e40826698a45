package retention

// Carrying out a published run: table by table, with journal updates, retries and the close.

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
	"github.com/retain-dev/retain/core/checkpoint/registry"
	"github.com/retain-dev/retain/core/failpoint"
	"github.com/retain-dev/retain/core/internal/fanout"
	"github.com/retain-dev/retain/core/lance"
	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/claim"
)

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
