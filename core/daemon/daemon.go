package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/retain-dev/retain/core/branch"
	"github.com/retain-dev/retain/core/checkpoint"
	"github.com/retain-dev/retain/core/checkpoint/registry"
	"github.com/retain-dev/retain/core/internal/fanout"
	"github.com/retain-dev/retain/core/lance"
	"github.com/retain-dev/retain/core/lease"
	"github.com/retain-dev/retain/core/retention"
	"github.com/retain-dev/retain/core/retention/runs"
	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/claim"
	"github.com/retain-dev/retain/core/tag"
)

// Daemon runs maintenance passes on one store.
type Daemon struct {
	// Store is the store the daemon keeps, at its location (Store.At): the
	// claim's scope and the logs come from it.
	Store   *storage.Store
	Config  Config
	Logger  hclog.Logger
	Metrics *Metrics
	// Now is the clock (nil: time.Now).
	Now func() time.Time
	// Identity names this replica in every claim it takes (as the claim's
	// host): a claim left by a process of the same identity that provably
	// stopped is this replica's to finish. "" is the host name.
	Identity string
	// Shared: other replicas keep the same store. Each pass then reads the
	// store's record first and is skipped when another replica finished
	// one within the interval (retention is due by the record's stamp,
	// not by this process's start), and the record is merged, not
	// overwritten. The fleet sets it.
	Shared bool

	guard         sync.Mutex // the in-flight guard: one pass at a time
	started       bool
	retryPending  bool // the last retention pass failed: retry on the next tick
	stateLoaded   bool
	lastRetention time.Time
	state         State
	last          atomic.Pointer[PassReport] // the last finished pass, for /readyz
	// refs remembers the ref files read, by their tokens, across passes: a
	// pass then reads only the tags and branches that changed, not every
	// live checkpoint's pins again (lance.RefCache).
	refs *lance.RefCache
	// reg remembers the registry versions and segments read: the
	// registry pins of unchanged checkpoints and the head's unchanged
	// segments cost a listing, not a get each (registry.Cache).
	reg *registry.Cache
}

// PassReport is what one pass did.
type PassReport struct {
	Started   time.Time `json:"started"`
	Finished  time.Time `json:"finished"`
	Enabled   bool      `json:"enabled"`
	Reconcile *checkpoint.Report
	// ReconcileError is why the reconcile part failed ("" when it did not).
	ReconcileError string
	// Checkpoints: what each schedule did (Config.Checkpoints).
	Checkpoints []ScheduleReport `json:",omitempty"`
	// RetentionDue: the pass ran (or tried) retention.
	RetentionDue bool
	// Resumed is the report of an unfinished run the pass finished first.
	Resumed   *retention.RunReport
	Retention *retention.RunReport
	// Leases is the reap of expired reader leases before the retention
	// run; LeasesError why it was incomplete (that only over-retains).
	Leases      *lease.Reaped `json:",omitempty"`
	LeasesError string        `json:",omitempty"`
	// Tags is the reap of expired tags (retain tag create --expires)
	// before the retention run; TagsError why it was incomplete.
	Tags      *tag.Reaped `json:",omitempty"`
	TagsError string      `json:",omitempty"`
	// Branches is the delete of expired branches (branch create
	// --expires) through the branch delete protocol; BranchesError why it
	// was incomplete.
	Branches      *branch.Reaped `json:",omitempty"`
	BranchesError string         `json:",omitempty"`
	// RetentionError is why retention failed or was skipped.
	RetentionError string
	// ClaimHolder names the holder when the claim was held by another.
	ClaimHolder string
	// RetentionCompleted: the stamp advanced.
	RetentionCompleted bool
	// Skipped says why a shared store's pass did nothing: another replica
	// finished one within the interval.
	Skipped string `json:",omitempty"`
	// TookOver is the proof on which the pass took over a claim its own
	// identity left behind.
	TookOver string `json:",omitempty"`
	// StateError is why the daemon's record could not be written.
	StateError string `json:",omitempty"`
}

// Err is why the pass failed, nil when it did not: its retention was due
// and did not complete, or its record could not be written. It decides
// the exit status of `retain daemon --once` and of a daemon stopped by a
// signal, so a supervisor sees a failed last pass.
func (r *PassReport) Err() error {
	switch {
	case r == nil:
		return nil
	case r.RetentionDue && !r.RetentionCompleted:
		return fmt.Errorf("retention did not complete: %s", r.RetentionError)
	case r.scheduleErr() != nil:
		return r.scheduleErr()
	case r.StateError != "":
		return fmt.Errorf("the daemon's record %s was not written: %s", StateKey, r.StateError)
	}
	return nil
}

// scheduleErr is the first schedule's failure, nil when none failed.
func (r *PassReport) scheduleErr() error {
	for _, c := range r.Checkpoints {
		if c.Error != "" {
			return fmt.Errorf("scheduled checkpoint %s (slot %s) failed: %s", c.Name, c.Slot.Format(time.RFC3339), c.Error)
		}
	}
	return nil
}

func (d *Daemon) now() time.Time {
	if d.Now != nil {
		return d.Now()
	}
	return time.Now()
}

func (d *Daemon) actor() string { return ActorOf(d.Config, d.Identity) }

// ActorOf is who a daemon acts as, in its claims, audit lines and
// authorization: the config's actor, else its identity, else
// retain-daemon@host.
func ActorOf(c Config, identity string) string {
	if c.Actor != "" {
		return c.Actor
	}
	if identity != "" {
		return identity
	}
	host, _ := os.Hostname()
	return "retain-daemon@" + host
}

// Run runs a pass at once and then one every interval until ctx ends. A
// pass in flight when ctx ends is finished first (its context is not
// cancelled: a deletion is never abandoned half-way); it releases the
// claim itself. Run then returns the last pass's Err.
func (d *Daemon) Run(ctx context.Context) error {
	if err := d.Config.Validate(); err != nil {
		return err
	}
	if d.Metrics == nil {
		d.Metrics = NewMetrics()
	}
	if d.Logger == nil {
		d.Logger = hclog.NewNullLogger()
	}
	d.loadState(ctx)
	d.Logger.Info("daemon started", "store", d.Store.Location().String(), "enabled", d.Config.IsEnabled(), "interval", d.Config.interval(),
		"window", d.window(), "retention_every", d.Config.every())
	if !d.Config.IsEnabled() {
		d.Logger.Warn("maintenance is disabled (enabled: false): no reconcile and no retention run; the retention window is NOT enforced")
	}
	ticker := time.NewTicker(d.Config.interval())
	defer ticker.Stop()
	var last *PassReport
	stopped := func() error {
		err := last.Err()
		if err != nil {
			d.Logger.Error("daemon stopped after a failed pass", "reason", context.Cause(ctx), "error", err)
			return err
		}
		d.Logger.Info("daemon stopped", "reason", context.Cause(ctx))
		return nil
	}
	for {
		last = d.Pass(context.WithoutCancel(ctx))
		if ctx.Err() != nil {
			// A signal during the pass: the pass is done, no new one starts
			// (a due tick would otherwise race the signal in the select).
			return stopped()
		}
		select {
		case <-ctx.Done():
			return stopped()
		case <-ticker.C:
		}
	}
}

// loadState reads the daemon's record once: the stamp and the failure
// count carry over a restart (and `--once`).
func (d *Daemon) loadState(ctx context.Context) {
	if d.stateLoaded {
		return
	}
	d.stateLoaded = true
	if d.Metrics == nil {
		d.Metrics = NewMetrics()
	}
	if d.Logger == nil {
		d.Logger = hclog.NewNullLogger()
	}
	st, err := ReadState(ctx, d.Store)
	if err != nil {
		d.Logger.Warn("the daemon's record cannot be read; retention runs on the first pass anyway", "key", StateKey, "error", err)
		return
	}
	if st == nil {
		return
	}
	d.state = *st
	if st.LastRetention != nil {
		d.lastRetention = *st.LastRetention
		d.Metrics.LastRetention.Set(float64(st.LastRetention.Unix()))
	}
	d.Metrics.RetentionFailures.Set(float64(st.RetentionFailures))
}

func (d *Daemon) window() string {
	var parts []string
	if d.Config.Retention.OlderThan > 0 {
		parts = append(parts, "older than "+time.Duration(d.Config.Retention.OlderThan).String())
	}
	if d.Config.Retention.KeepLast > 0 {
		parts = append(parts, fmt.Sprintf("keep last %d", d.Config.Retention.KeepLast))
	}
	rule := func(kind string, w WindowRule) string {
		var ps []string
		if w.OlderThan > 0 {
			ps = append(ps, "older than "+time.Duration(w.OlderThan).String())
		}
		if w.KeepLast > 0 {
			ps = append(ps, fmt.Sprintf("keep last %d", w.KeepLast))
		}
		return kind + " " + w.Pattern + ": " + strings.Join(ps, ", ")
	}
	for _, w := range d.Config.Retention.Branches {
		parts = append(parts, rule("branch rule", w))
	}
	for _, w := range d.Config.Retention.Tables {
		parts = append(parts, rule("table rule", w))
	}
	return strings.Join(parts, ", ")
}

// Pass runs one maintenance pass: reconcile, then retention when due, then
// the metrics and the record. A pass already in flight makes it return at
// once (nil).
func (d *Daemon) Pass(ctx context.Context) *PassReport {
	if !d.guard.TryLock() {
		d.Logger.Warn("a maintenance pass is still running; this tick is skipped")
		return nil
	}
	defer d.guard.Unlock()
	if d.Metrics == nil {
		d.Metrics = NewMetrics()
	}
	if d.Logger == nil {
		d.Logger = hclog.NewNullLogger()
	}
	first := !d.started
	d.started = true
	if d.refs == nil {
		d.refs = lance.NewRefCache()
	}
	if d.reg == nil {
		d.reg = registry.NewCache()
	}
	ctx = lance.WithRefCache(ctx, d.refs)
	ctx = registry.WithCache(ctx, d.reg)
	if first {
		d.loadState(ctx)
	}
	r := &PassReport{Started: d.now().UTC(), Enabled: d.Config.IsEnabled()}
	if d.Shared {
		// The record, not this process's start, says what is due: the
		// replicas share the work.
		first = false
		if why := d.sharedSkip(ctx); why != "" {
			r.Skipped = why
			r.Finished = r.Started
			// The store is kept: this replica's gauges say so, or they
			// would hold a stale failure or claim wait until it next works
			// on the store itself.
			d.Metrics.LastPassSuccess.Set(1)
			d.Metrics.LastPassTime.Set(float64(r.Finished.Unix()))
			d.Metrics.ClaimHeld.Set(0)
			d.last.Store(r)
			d.Logger.Debug("pass skipped", "why", why)
			return r
		}
	}
	d.Metrics.Passes.Inc()
	defer func() {
		r.Finished = d.now().UTC()
		d.Metrics.PassDuration.Observe(r.Finished.Sub(r.Started).Seconds())
		d.refreshMetrics(ctx)
		d.saveState(ctx, r)
		ok := 0.0
		if r.Err() == nil {
			ok = 1
			if r.ClaimHolder == "" && r.Enabled {
				d.Metrics.LastCompletedPass.Set(float64(r.Finished.Unix()))
			}
		}
		d.Metrics.LastPassSuccess.Set(ok)
		d.Metrics.LastPassTime.Set(float64(r.Finished.Unix()))
		d.last.Store(r)
	}()
	if !r.Enabled {
		return r
	}
	popts := checkpoint.Options{Actor: d.actor(), Host: d.Identity}
	d.Metrics.ClaimHeld.Set(0)

	// 1. Reconcile, online: no deletions of data.
	rep, err := popts.Reconcile(ctx, d.Store)
	// A cleanup run this identity left (resume != ""): the retention part
	// resumes exactly it, taking its claim over on the same proof, due or
	// not and with or without a window.
	took, resume := d.ownDeadClaim(ctx, err, r)
	if took {
		rep, err = popts.Reconcile(ctx, d.Store)
	}
	r.Reconcile = rep
	if rep != nil {
		d.Metrics.Pins.WithLabelValues("repaired").Set(float64(len(rep.Repaired)))
		d.Metrics.Pins.WithLabelValues("orphan").Set(float64(len(rep.Reclaimed)))
		d.Metrics.Pins.WithLabelValues("conflicting").Set(float64(len(rep.Conflicts)))
	}
	switch {
	case err == nil:
		d.Logger.Info("reconciled", "repaired", len(rep.Repaired), "reclaimed", len(rep.Reclaimed), "sidecars", len(rep.Sidecars))
	case errors.Is(err, claim.ErrHeld):
		r.ClaimHolder = holder(err)
		r.ReconcileError = err.Error()
		d.Metrics.ClaimWaits.Inc()
		d.claimHeld(err)
		d.Logger.Warn("reconcile skipped: the retention claim is held", "holder", r.ClaimHolder)
	default:
		r.ReconcileError = err.Error()
		d.Metrics.PassFailures.WithLabelValues("reconcile").Inc()
		d.Logger.Error("reconcile_failed", "error", err)
	}

	// 2. Scheduled checkpoints, before retention so that they pin what
	// the cleanup then keeps.
	var head *registry.Snapshot
	if err == nil && rep != nil {
		head = rep.Head()
	}
	d.scheduled(ctx, r, head)

	// 3. Retention, on the tail of the same pass.
	now := d.now()
	r.RetentionDue = resume != "" || d.Config.RetentionOn() && (first || d.retryPending || !now.Before(d.lastRetention.Add(d.Config.every())))
	if !r.RetentionDue {
		return r
	}
	// The reapers take the tables and refs this pass's reconcile read,
	// when it read them whole.
	var rec *checkpoint.Report
	if err == nil {
		rec = rep
	}
	err = d.retention(ctx, r, resume, rec)
	switch {
	case err == nil:
		r.RetentionCompleted = true
		d.retryPending = false
		d.lastRetention = d.now()
		d.state.RetentionFailures, d.state.LastError = 0, ""
		d.Metrics.RetentionFailures.Set(0)
		d.Metrics.LastRetention.Set(float64(d.lastRetention.Unix()))
		tot := r.Retention.Totals
		d.Logger.Info("retention_completed", "operation", r.Retention.OperationID, "tables", tot.Tables, "versions_removed", tot.VersionsRemoved,
			"files_removed", tot.FilesDeleted, "bytes_removed", tot.BytesDeleted, "next_due", d.lastRetention.Add(d.Config.every()).UTC().Format(time.RFC3339))
	case errors.Is(err, claim.ErrHeld):
		// Shared: the holder is doing this store's retention, and the
		// record it writes says when the next is due; retrying on the next
		// tick would run a second cleanup right after its.
		d.retryPending = !d.Shared
		r.ClaimHolder = holder(err)
		r.RetentionError = err.Error()
		d.Metrics.ClaimWaits.Inc()
		d.claimHeld(err)
		d.Logger.Warn("retention skipped: the retention claim is held by another process; retrying on the next tick", "holder", r.ClaimHolder)
	default:
		d.retryPending = true
		r.RetentionError = err.Error()
		d.state.RetentionFailures++
		d.state.LastError = err.Error()
		d.Metrics.RetentionFailures.Set(float64(d.state.RetentionFailures))
		d.Metrics.PassFailures.WithLabelValues("retention").Inc()
		d.Logger.Error("retention_failed", "error", err, "failures", d.state.RetentionFailures, "retry", "next tick")
	}
	return r
}

// retention finishes an unfinished run (first the one named by resume),
// then runs the window's cleanup when one is configured.
func (d *Daemon) retention(ctx context.Context, r *PassReport, resume string, rec *checkpoint.Report) error {
	open, err := runs.Open(ctx, d.Store)
	if err != nil {
		return err
	}
	if i := slices.Index(open, resume); i > 0 {
		open[0], open[i] = open[i], open[0]
	}
	if len(open) > 0 {
		d.Logger.Info("finishing an unfinished cleanup run first", "operation", open[0])
		rr, err := retention.Resume(ctx, d.Store, retention.ResumeOptions{OperationID: open[0], Actor: d.actor(), Host: d.Identity,
			Online: !d.Config.Retention.WritersStopped})
		r.Resumed = rr
		d.logRemovals(rr)
		if err != nil {
			return fmt.Errorf("finishing cleanup run %s: %w", open[0], err)
		}
	}
	if !d.Config.RetentionOn() {
		return nil
	}
	d.reapRefs(ctx, r, rec)
	d.reapBranches(ctx, r, rec)
	o := retention.RunOptions{Actor: d.actor(), Host: d.Identity, IsolateReconcile: true}
	if d.Config.Retention.WritersStopped {
		o.ConfirmWriteOutage = true
	} else {
		o.Online = true
	}
	rep, err := retention.Run(ctx, d.Store, d.Config.Policy(), o)
	r.Retention = rep
	d.logRemovals(rep)
	if err == nil && rep.Failed > 0 {
		err = fmt.Errorf("%d table(s) failed or went stale", rep.Failed)
	}
	return err
}

// logRemovals logs every removal of a run (the audit log in the store has
// the durable lines) and counts it.
func (d *Daemon) logRemovals(rep *retention.RunReport) {
	if rep == nil {
		return
	}
	for _, t := range rep.Tables {
		if t.FilesDeleted == 0 && t.Error == "" {
			continue
		}
		d.Metrics.VersionsRemoved.Add(float64(t.VersionsRemoved))
		d.Metrics.FilesRemoved.Add(float64(t.FilesDeleted))
		d.Metrics.BytesRemoved.Add(float64(t.BytesDeleted))
		args := []any{"table", t.Table, "versions_removed", t.VersionsRemoved, "files_removed", t.FilesDeleted, "bytes_removed", t.BytesDeleted,
			"operation", rep.OperationID, "cutoff", cutoffOf(rep, t.Table), "actor", d.actor()}
		if t.Error != "" {
			d.Logger.Error("table_cleanup_failed", append(args, "error", t.Error)...)
			continue
		}
		d.Logger.Info("removed", args...)
	}
	for _, t := range rep.Tables {
		for _, n := range t.Notes {
			d.Logger.Warn("table skipped or noted", "table", t.Table, "note", n)
		}
	}
	if rep.Registry.Deleted > 0 {
		d.Logger.Info("removed", "table", registry.RegistryPath, "versions_removed", rep.Registry.Deleted, "operation", rep.OperationID)
	}
}

func cutoffOf(rep *retention.RunReport, table string) string {
	for _, g := range rep.Boundaries {
		if g.Path == table {
			return g.Cutoff
		}
	}
	return ""
}

func holder(err error) string {
	var he *claim.HeldError
	if errors.As(err, &he) && he.Holder != nil {
		p := he.Holder
		return fmt.Sprintf("%s (%s, operation %s) on %s pid %d since %s", p.Actor, p.Action, p.OperationID, p.Host, p.PID, p.CreatedAt.Format(time.RFC3339))
	}
	return "unknown (the claim object could not be read)"
}

// refreshMetrics sets the checkpoint and boundary gauges from the store.
func (d *Daemon) refreshMetrics(ctx context.Context) {
	_, infos, err := checkpoint.List(ctx, d.Store)
	if err != nil {
		d.Logger.Warn("metrics: cannot list checkpoints", "error", err)
		return
	}
	h := checkpoint.Summarize(infos)
	d.Metrics.LiveCheckpoints.Set(float64(h.LiveCheckpoints))
	d.Metrics.PinnedVersions.Set(float64(h.PinnedVersions))
	d.Metrics.Pins.WithLabelValues("missing").Set(float64(h.Missing))
	if h.Other > 0 {
		d.Metrics.Pins.WithLabelValues("conflicting").Set(float64(h.Other))
	}
	if h.Oldest == nil {
		d.Metrics.OldestCheckpoint.Set(0)
	} else {
		d.Metrics.OldestCheckpoint.Set(d.now().Sub(*h.Oldest).Seconds())
	}
	_, snap, err := registry.Open(d.Store, registry.Options{}).Head(ctx)
	if err != nil {
		return
	}
	rows, err := snap.GCBoundaries()
	if err != nil {
		return
	}
	for _, g := range rows {
		d.Metrics.BoundaryTime.WithLabelValues(g.Path).Set(float64(g.At.Unix()))
		for _, nr := range g.NewestRemoved {
			d.Metrics.BoundaryRemoved.WithLabelValues(g.Path, nr.Branch).Set(float64(nr.Version))
		}
	}
}

// saveState writes the record after a pass; failing to write it is logged,
// never fatal (the stamp in memory still governs this process).
func (d *Daemon) saveState(ctx context.Context, r *PassReport) {
	st := &d.state
	st.Window, st.Enabled = d.window(), d.Config.IsEnabled()
	st.Interval, st.Every = d.Config.interval().String(), d.Config.every().String()
	host, _ := os.Hostname()
	st.Daemon = fmt.Sprintf("pid %d on %s", os.Getpid(), host)
	if d.Identity != "" {
		st.Daemon = fmt.Sprintf("%s (pid %d on %s)", d.Identity, os.Getpid(), host)
	}
	st.Identity = d.Identity
	end := r.Finished
	st.LastPass = &end
	if !d.lastRetention.IsZero() {
		lr := d.lastRetention.UTC()
		st.LastRetention = &lr
		next := lr.Add(d.Config.every())
		st.NextRetentionDue = &next
	}
	if d.retryPending {
		next := end.Add(d.Config.interval())
		st.NextRetentionDue = &next
	}
	if !d.Config.RetentionOn() || !d.Config.IsEnabled() {
		st.NextRetentionDue = nil
	}
	if r.RetentionCompleted && r.Retention != nil {
		st.LastRetentionOperation = r.Retention.OperationID
	}
	if d.Store.ReadOnly() || !d.Config.IsEnabled() {
		return // disabled: no background mutation at all, not even the record
	}
	if d.Shared && r.ClaimHolder != "" && !r.RetentionCompleted {
		return // the holder did this store's work; it writes the record
	}
	write := writeState
	if d.Shared {
		write = mergeState
	}
	if err := write(ctx, d.Store, st); err != nil {
		r.StateError = err.Error()
		d.Logger.Warn("the daemon's record could not be written", "key", StateKey, "error", err)
	}
}

// reapRefs removes the reader leases and the tags (tag create --expires)
// expired by more than the margin, so that the retention run that follows
// may remove what only they kept: one listing of each table's tags serves
// both, and none when the pass's reconcile (rec) read the tables and their
// refs already. A failure only over-retains: it is logged, and retention
// goes on. Refs read a little earlier are safe: every removal is
// conditional on the token read, and a lease or tag made since waits for
// the next pass.
func (d *Daemon) reapRefs(ctx context.Context, r *PassReport, rec *checkpoint.Report) {
	margin := time.Duration(d.Config.ExpiryMargin)
	lo := lease.ReapOptions{Now: d.now, Margin: margin}
	to := tag.ReapOptions{Now: d.now, Margin: margin, Scope: claim.ScopeFor(d.Store.Location())}
	leases, tags := lo.NewReaped(), to.NewReaped()
	r.Leases, r.Tags = leases, tags
	tables, err := passTables(ctx, d.Store, rec)
	if err != nil {
		r.LeasesError, r.TagsError = err.Error(), err.Error()
		d.Logger.Warn("reaping expired leases and tags skipped: the tables could not be listed; what they keep stays until the next retention pass", "error", err)
		return
	}
	leases.Tables, tags.Tables = len(tables), len(tables)
	type one struct {
		leases []lease.Judged
		tags   []tag.Expired
		errs   []string
	}
	per, err := fanout.Map(ctx, d.Store.Parallelism(), len(tables), func(ctx context.Context, i int) (one, error) {
		ds, err := lance.Open(d.Store, tables[i])
		var ts []lance.Tag
		if refs := rec.Refs(tables[i]); err == nil && refs != nil && refs.Dataset == ds.Root && refs.TagsErr == nil {
			ts = refs.Tags
		} else if err == nil {
			ts, err = ds.ListTags(ctx)
		}
		if err != nil {
			return one{leases: lease.ListFailed(tables[i], err), errs: []string{tables[i] + ": listing its tags: " + err.Error()}}, nil
		}
		var o one
		o.leases = lease.ReapTable(ctx, d.Store, tables[i], ts, lo)
		o.tags, o.errs = tag.ReapTable(ctx, ds, ts, to)
		return o, nil
	})
	if err != nil {
		r.LeasesError, r.TagsError = err.Error(), err.Error()
		return
	}
	for _, o := range per {
		leases.Add(o.leases)
		tags.Add(o.tags, o.errs)
	}
	for _, j := range leases.Leases {
		if j.Reaped {
			d.Metrics.LeasesReaped.Inc()
			d.Logger.Info("lease_reaped", "table", j.Table, "lease", j.ID, "version", j.Version, "branch", j.Branch, "holder", j.Holder,
				"expired", j.Expires.Format(time.RFC3339), "actor", d.actor())
		}
	}
	for _, e := range tags.Tags {
		if e.Removed {
			d.Metrics.TagsExpired.Inc()
			d.Logger.Info("tag_expired", "table", e.Table, "tag", e.Tag, "version", e.Version, "branch", e.Branch,
				"expired", e.Expires.Format(time.RFC3339), "actor", d.actor())
		}
	}
	if err := leases.Err(); err != nil {
		r.LeasesError = err.Error()
		d.Logger.Warn("reaping expired leases was incomplete; the versions they keep stay until the next retention pass", "error", err)
	}
	if err := tags.Err(); err != nil {
		r.TagsError = err.Error()
		d.Logger.Warn("removing expired tags was incomplete; the versions they keep stay until the next retention pass", "error", err)
	}
}

// passTables are the store's tables as the pass's reconcile listed them,
// or listed now when it did not.
func passTables(ctx context.Context, s *storage.Store, rec *checkpoint.Report) ([]string, error) {
	if rec != nil && rec.Tables != nil {
		return rec.Tables, nil
	}
	return checkpoint.DiscoverTables(ctx, s)
}

// reapBranches deletes the ready branches expired by more than the margin
// through the branch delete protocol; one a checkpoint pins (or that has
// tags or children) is refused by it and kept, with the reason logged.
func (d *Daemon) reapBranches(ctx context.Context, r *PassReport, rec *checkpoint.Report) {
	o := branch.ReapOptions{Now: d.now, Margin: time.Duration(d.Config.ExpiryMargin), Actor: d.actor(),
		Scope: claim.ScopeFor(d.Store.Location())}
	if rec != nil && rec.Tables != nil {
		o.Tables, o.Refs = rec.Tables, rec.Refs
	}
	rep, err := branch.ReapExpired(ctx, d.Store, o)
	r.Branches = rep
	if rep != nil {
		for _, e := range rep.Branches {
			switch {
			case e.Deleted:
				d.Metrics.BranchesExpired.Inc()
				d.Logger.Info("branch_expired", "table", e.Table, "branch", e.Branch, "expired", e.Expires.Format(time.RFC3339), "actor", d.actor())
			case strings.HasPrefix(e.Why, "kept: expired"):
				d.Logger.Warn("an expired branch was kept", "table", e.Table, "branch", e.Branch, "why", e.Why)
			}
		}
	}
	if err != nil {
		r.BranchesError = err.Error()
		d.Logger.Warn("deleting expired branches was incomplete; they stay until the next retention pass", "error", err)
	}
}
