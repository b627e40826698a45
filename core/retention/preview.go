// Package retention plans the cleanup of a whole store: every Lance table
// of it, with the versions live checkpoints pin added to each table's root
// set. Preview is read-only and provisional: it takes no claim and writes
// nothing; Run (`retain cleanup run`) recomputes the plan under the claim
// and deletes.
//
// Root set of a table (issue 7, section 1):
//   - every live branch head, Lance tags (foreign tags and retain's own
//     "ogcp_" pin tags) and fork points of child branches: kept by
//     lance.PlanCleanup itself;
//   - every version a live checkpoint pins: passed to lance.PlanCleanup as
//     an extra root with the reason "checkpoint <name> (<id>)", so the
//     preview names the checkpoint even when its pin tag protects the same
//     version;
//   - the operator's window (OlderThan and/or KeepLast).
//
// Failure to resolve or read any root — an unreadable registry, a corrupt
// manifest, a malformed tag or branch file, a pinned version that is gone
// or is another commit — refuses the whole store's preview with a
// *RefusedError naming the table and the key. Nothing is planned partially.
//
// Two refusals are the table's alone: a kept version (a head, a pinned,
// tagged or windowed version) referencing a file the table's listings do
// not show as recorded (lance.ErrKeptVersionBroken), and, in a table no
// live checkpoint pins, a manifest that cannot be read or sets a feature
// retain does not know (lance.ErrCorruptManifest, ErrUnknownFeature). That
// table is planned with nothing to delete and its TablePlan says why (*TableRefusedError);
// the other tables are planned as usual. Each table's check stands on its
// own listings — tables share no files cleanup could delete (a base path
// into another table is outside the family, never deleted) — so a broken
// table risks nothing of the others.
package retention

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/retain-dev/retain/core/checkpoint"
	"github.com/retain-dev/retain/core/checkpoint/registry"
	"github.com/retain-dev/retain/core/internal/fanout"
	"github.com/retain-dev/retain/core/lance"
	"github.com/retain-dev/retain/core/storage"
)

// ErrPreviewRefused: the store's cleanup plan was refused because a root
// could not be resolved or read. Nothing is planned for any table.
var ErrPreviewRefused = errors.New("cleanup plan refused")

// ErrTableRefused: one table's cleanup was refused (a kept version of it is
// broken) and nothing of that table is deleted; the other tables were
// planned. Run reports the table as failed.
var ErrTableRefused = errors.New("cleanup of a table refused")

// TableRefusedError is the refusal of one table. It matches ErrTableRefused
// and its cause (lance.ErrKeptVersionBroken, lance.ErrCleanupRefused).
type TableRefusedError struct {
	Table string
	Cause error
}

func (e *TableRefusedError) Error() string {
	why := e.Cause.Error()
	var kf *lance.KeptFileError
	if errors.As(e.Cause, &kf) {
		// In the preview's words; the Lance layer's own next step is said
		// below, with the commands.
		k := *kf
		k.Reasons = make([]string, len(kf.Reasons))
		for i, r := range kf.Reasons {
			k.Reasons[i] = reason(branchOrMain(kf.Version.Branch), r)
		}
		why = k.Error()
	}
	return fmt.Sprintf("cleanup of table %q refused: %s; nothing of this table is deleted (the other tables are not held back): %s",
		e.Table, why, keptNextStep(e.Cause))
}

func (e *TableRefusedError) Unwrap() []error { return []error{ErrTableRefused, e.Cause} }

// refusedRun fills in tr for a table refused at planning: its error is the
// plan's own when plan is at hand, else the journal's words.
func refusedRun(jt JournalTable, tr *TableRun, plan *StorePlan) {
	tr.State, tr.Error = TableRefused, jt.Error
	tr.err = fmt.Errorf("%w: %s", ErrTableRefused, jt.Error)
	if plan == nil {
		return
	}
	for _, tp := range plan.Tables {
		if tp.Table == jt.Table && tp.err != nil {
			tr.err = tp.err
		}
	}
}

func branchOrMain(b string) string {
	if b == "" {
		return registry.MainBranch
	}
	return b
}

// unreadable: a manifest of the table cannot be read or is not understood.
// With no checkpoint pinning the table, that is the table's refusal alone:
// nothing of it is deleted, and no other table depends on what it says.
// A pinned table stays a store-wide refusal (a pin that cannot be honoured
// in full is a root in doubt).
func unreadable(err error) bool {
	return errors.Is(err, lance.ErrCorruptManifest) || errors.Is(err, lance.ErrUnknownFeature)
}

// keptNextStep says what clears a broken kept version, by what keeps it.
func keptNextStep(err error) string {
	var kf *lance.KeptFileError
	if !errors.As(err, &kf) {
		switch {
		case errors.Is(err, lance.ErrUnknownFeature):
			return "upgrade retain to a release that knows the feature (`retain --version` says which this is), then run the cleanup again"
		case errors.Is(err, lance.ErrCorruptManifest):
			return "restore the manifest named (from a backup or the store's object versioning), then run the cleanup again"
		}
		return "restore what is missing, then run the cleanup again"
	}
	steps := []string{"restore the file (from a backup or the store's object versioning)"}
	var latest, checkpoint, window bool
	for _, r := range kf.Reasons {
		switch {
		case r == "latest":
			latest = true
		case strings.HasPrefix(r, "extra root: checkpoint"), strings.HasPrefix(r, "tag ogcp_"):
			checkpoint = true
		case strings.HasPrefix(r, "tag "):
			steps = append(steps, fmt.Sprintf("drop the tag that keeps it (`retain tag delete %s TABLE-URI`)", strings.TrimPrefix(r, "tag ")))
		case strings.HasPrefix(r, "fork point of branch "):
			steps = append(steps, fmt.Sprintf("delete the branch forked from it (`retain branch delete %s STORE`)", strings.TrimPrefix(r, "fork point of branch ")))
		case strings.HasPrefix(r, "keep-last "), strings.HasPrefix(r, "not older than the cut-off"):
			window = true
		}
	}
	if checkpoint {
		steps = append(steps, "delete the checkpoint that pins it (`retain checkpoint delete NAME-OR-ID STORE`) if it may go")
	}
	if window {
		steps = append(steps, "run with a window that does not keep it (a smaller --keep-last or --older-than)")
	}
	if latest {
		// The head cannot be released: only the file brings it back.
		return steps[0] + ": it is the latest version of its branch, which Lance cannot read either; then run the cleanup again"
	}
	return strings.Join(steps, ", or ") + "; then run the cleanup again"
}

// RefusedError is a refusal of the whole store's plan. It matches
// ErrPreviewRefused and its cause (lance.ErrCleanupRefused,
// lance.ErrCorruptManifest, registry.ErrCorruptRegistry, ...).
type RefusedError struct {
	// Table is the table folder ("t.lance"); "" for the registry or the
	// store as a whole.
	Table string
	// Key is the object that caused the refusal ("" when none).
	Key    string
	Reason string
	Cause  error
}

func (e *RefusedError) Error() string {
	var b strings.Builder
	b.WriteString("cleanup plan of the store refused")
	if e.Table != "" {
		fmt.Fprintf(&b, ": table %q", e.Table)
	}
	if e.Key != "" {
		fmt.Fprintf(&b, ": key %q", e.Key)
	}
	if e.Reason != "" {
		b.WriteString(": " + e.Reason)
	}
	if e.Cause != nil {
		b.WriteString(": " + e.Cause.Error())
	}
	b.WriteString("; no table was planned: fix the object named (or run `retain reconcile`), then preview again")
	return b.String()
}

func (e *RefusedError) Unwrap() []error {
	if e.Cause == nil {
		return []error{ErrPreviewRefused}
	}
	return []error{ErrPreviewRefused, e.Cause}
}

// Policy is the operator's window. At least one of OlderThan and KeepLast
// must be set; a version is kept when either keeps it.
type Policy struct {
	// OlderThan: versions committed more than this long before Now may be
	// removed. 0: no time window.
	OlderThan time.Duration
	// KeepLast keeps the newest KeepLast versions of each branch.
	KeepLast int
	// Tables and Branches set the window per table and per branch pattern
	// (rules.go says which wins). The policy's own window still applies to
	// everything no rule matches, and to the registry's own history.
	Tables   []Rule
	Branches []Rule
	// Now is the clock (nil: time.Now).
	Now func() time.Time
	// Skip leaves tables out (table → why, shown as the table's note): their
	// roots are not resolved and nothing of them is planned. Run sets it
	// with IsolateReconcile for tables reconcile could not settle.
	Skip map[string]string
	// verified, set by Run from the reconcile it ran under the same claim:
	// the pinned commits that reconcile read at registry version
	// verifiedAt. Root planning at that version takes them as read rather
	// than read each pinned manifest a second time.
	verified   func(registry.Row) bool
	verifiedAt uint64
	// onHead, set by Run, is called with the registry head as soon as root
	// planning has read it, before any table is planned.
	onHead func(*registry.Snapshot)
	// head and tables, set by Run from the reconcile under its claim, are
	// the registry head and the store's tables that reconcile read: root
	// planning takes them rather than read them again.
	head   *registry.Snapshot
	tables []string
	// refs, set by Run from the same reconcile, is a table's refs as it
	// read them (nil: read them): planning takes them rather than list
	// _refs/ again; the plan's recheck before deleting catches any change.
	refs func(root string) *lance.Refs
	// cutoffAt, set by Run from a reviewed plan, is the cut-off itself
	// (OlderThan is then its echo): the reviewed window, not one counted
	// back from now.
	cutoffAt *time.Time
	// reviewed: the run applies a reviewed plan, which lists no registry
	// history to remove.
	reviewed bool
}

// StorePlan is the provisional cleanup plan of a store. Its JSON form is
// what `retain cleanup preview --json` prints (docs/cleanup.md).
type StorePlan struct {
	// Provisional is always true: `run` recomputes under the claim.
	Provisional     bool         `json:"provisional"`
	PlannedAt       time.Time    `json:"planned_at"`
	Policy          PolicyEcho   `json:"policy"`
	RegistryVersion uint64       `json:"registry_version"`
	Checkpoints     []Checkpoint `json:"checkpoints"`
	Tables          []TablePlan  `json:"tables"`
	Totals          Totals       `json:"totals"`
	// snap is the registry head the plan was made against.
	snap *registry.Snapshot
}

// PolicyEcho is the window the plan was made with.
type PolicyEcho struct {
	OlderThan string     `json:"older_than,omitempty"`
	Cutoff    *time.Time `json:"cutoff,omitempty"`
	KeepLast  int        `json:"keep_last,omitempty"`
	// Tables and Branches are the per-reference rules, in order, their
	// cut-offs fixed at the plan's time.
	Tables   []RuleEcho `json:"tables,omitempty"`
	Branches []RuleEcho `json:"branches,omitempty"`
}

// Checkpoint is a live checkpoint whose pins are roots.
type Checkpoint struct {
	Name string `json:"name"`
	ID   string `json:"id"`
	Pins int    `json:"pins"`
}

// TablePlan is one table's plan.
type TablePlan struct {
	// Table is the table's folder at the top of the store ("t.lance").
	Table    string            `json:"table"`
	Versions []VersionDecision `json:"versions"`
	Totals   TableTotals       `json:"totals"`
	Notes    []string          `json:"notes,omitempty"`
	// Refused says why the table's cleanup was refused ("" when it was
	// not): nothing of it is planned or deleted.
	Refused string `json:"refused,omitempty"`
	// Lance is the Lance layer's full plan (files to delete and why); not
	// printed.
	Lance *lance.Plan `json:"-"`
	err   error
}

// Err is the table's refusal (a *TableRefusedError), nil when none.
func (tp TablePlan) Err() error { return tp.err }

// VersionDecision is one version of one branch of a table.
type VersionDecision struct {
	Branch    string    `json:"branch"` // "main" for main
	Version   uint64    `json:"version"`
	Timestamp time.Time `json:"timestamp"`
	Keep      bool      `json:"keep"`
	// Reasons say why it is kept ("branch head main", "checkpoint n (id)",
	// "window: keep-last 2", "window: committed at or after the cut-off",
	// "foreign tag T", "checkpoint pin tag ogcp_...", "fork point of
	// branch B") or why it is removed.
	Reasons []string `json:"reasons"`
}

// TableTotals sums one table up.
type TableTotals struct {
	VersionsKept    int   `json:"versions_kept"`
	VersionsRemoved int   `json:"versions_removed"`
	FilesToDelete   int   `json:"files_to_delete"`
	BytesToDelete   int64 `json:"bytes_to_delete"`
	// OldestRemovable is the commit time of the oldest removed version.
	OldestRemovable *time.Time `json:"oldest_removable,omitempty"`
}

// Totals sums the store up: what deferring cleanup keeps accumulating.
type Totals struct {
	Tables          int        `json:"tables"`
	VersionsKept    int        `json:"versions_kept"`
	VersionsRemoved int        `json:"versions_removed"`
	FilesToDelete   int        `json:"files_to_delete"`
	BytesToDelete   int64      `json:"bytes_to_delete"`
	OldestRemovable *time.Time `json:"oldest_removable,omitempty"`
}

// Preview plans the cleanup of every table of store s under p, reading
// only: root planning (ResolveRoots: the registry head, the tables, each
// pinned version's manifest), then what lance.PlanCleanup reads for each
// table. Any root it cannot resolve refuses the whole store with a
// *RefusedError.
func Preview(ctx context.Context, s *storage.Store, p Policy) (*StorePlan, error) {
	if p.OlderThan == 0 && p.KeepLast == 0 {
		return nil, storage.Errorf("cleanup-preview", "", storage.ErrInvalidArgument, "set --older-than and/or --keep-last: say which versions to keep (keep-last 1 keeps only the latest)")
	}
	if p.OlderThan < 0 || p.KeepLast < 0 {
		return nil, storage.Errorf("cleanup-preview", "", storage.ErrInvalidArgument, "older-than %s / keep-last %d: neither may be negative", p.OlderThan, p.KeepLast)
	}
	if err := p.checkRules(); err != nil {
		return nil, err
	}
	now := time.Now()
	if p.Now != nil {
		now = p.Now()
	}
	now = now.UTC()
	plan := &StorePlan{Provisional: true, PlannedAt: now, Policy: PolicyEcho{KeepLast: p.KeepLast},
		Checkpoints: []Checkpoint{}, Tables: []TablePlan{}}
	var cutoff time.Time
	if p.OlderThan > 0 {
		cutoff = now.Add(-p.OlderThan)
		if p.cutoffAt != nil {
			cutoff = *p.cutoffAt
		}
		plan.Policy.OlderThan = p.OlderThan.String()
		plan.Policy.Cutoff = &cutoff
	}
	plan.Policy.Tables, plan.Policy.Branches = echoRules(p.Tables, now), echoRules(p.Branches, now)

	rs, err := resolveRootsFrom(ctx, s, p.Skip, p.verifiedBy, p.head, p.tables)
	if err != nil {
		return nil, err
	}
	plan.RegistryVersion = rs.RegistryVersion
	plan.Checkpoints = rs.Checkpoints
	plan.snap = rs.snap
	if p.onHead != nil {
		p.onHead(rs.snap)
	}

	// Every table is planned side by side; a failure that refuses the
	// whole store is the first in table order.
	// Manifests parsed ahead stay near manifestBudget in all, however many
	// tables are planned at once: one table alone reads far ahead, 32 at
	// once each a few.
	width := min(s.Parallelism(), max(1, len(rs.Tables)))
	depth := max(2, manifestBudget/width)
	tps, err := fanout.Map(ctx, s.Parallelism(), len(rs.Tables), func(ctx context.Context, i int) (TablePlan, error) {
		// Removed versions are planned from their transactions where Lance
		// wrote ones retain models, from their manifests otherwise: the
		// same plan, a few percent of the bytes for a long history.
		var refs *lance.Refs
		if p.refs != nil {
			refs = p.refs(rs.Tables[i].Table)
		}
		bws, err := branchWindows(plan.Policy, rs.Tables[i].Table)
		if err != nil {
			return TablePlan{}, &RefusedError{Table: rs.Tables[i].Table, Reason: "its window rules", Cause: err}
		}
		return planTable(ctx, rs.Tables[i], lance.Policy{OlderThan: cutoff, KeepLast: p.KeepLast,
			Branches: bws, ExtraRoots: rs.Tables[i].Extra,
			Now: func() time.Time { return now }, ReadAhead: depth, FromTransactions: true, Refs: refs})
	})
	if err != nil {
		return nil, err
	}
	for i := range tps {
		if e, ok, _ := tableRule(plan.Policy.Tables, tps[i].Table); ok && tps[i].Lance != nil {
			tps[i].Notes = append([]string{fmt.Sprintf("table rule %s (%s) is this table's window, except on branches a branch rule matches", e.Pattern, e)}, tps[i].Notes...)
		}
	}
	plan.Tables = append(plan.Tables, tps...)
	for _, tp := range plan.Tables {
		plan.Totals.Tables++
		plan.Totals.VersionsKept += tp.Totals.VersionsKept
		plan.Totals.VersionsRemoved += tp.Totals.VersionsRemoved
		plan.Totals.FilesToDelete += tp.Totals.FilesToDelete
		plan.Totals.BytesToDelete += tp.Totals.BytesToDelete
		if o := tp.Totals.OldestRemovable; o != nil && (plan.Totals.OldestRemovable == nil || o.Before(*plan.Totals.OldestRemovable)) {
			plan.Totals.OldestRemovable = o
		}
	}
	return plan, nil
}

// verifiedBy is the verified check for root planning at registry version
// rv: nil unless Run's reconcile read the pins at that very version.
func (p Policy) verifiedBy(rv uint64) func(registry.Row) bool {
	if p.verified == nil || rv != p.verifiedAt {
		return nil
	}
	return p.verified
}

// manifestBudget bounds the manifests a store-wide plan reads ahead in all.
const manifestBudget = 64

// planTable plans one table's cleanup. A table that cannot be planned
// safely is refused alone (its TablePlan says why); an error refuses the
// whole store.
func planTable(ctx context.Context, tr TableRoots, lp lance.Policy) (TablePlan, error) {
	t := tr.Table
	if tr.Skipped != "" {
		return TablePlan{Table: t, Versions: []VersionDecision{}, Notes: []string{tr.Skipped}}, nil
	}
	plan, err := tr.Dataset.PlanCleanup(ctx, lp)
	if err != nil {
		if errors.Is(err, lance.ErrNotDataset) && len(tr.Extra) == 0 {
			// A table being created or half deleted: nothing to plan.
			return TablePlan{Table: t, Versions: []VersionDecision{},
				Notes: []string{"no manifest: a table being created or half deleted; skipped"}}, nil
		}
		if errors.Is(err, lance.ErrKeptVersionBroken) || len(tr.Extra) == 0 && unreadable(err) {
			te := &TableRefusedError{Table: t, Cause: err}
			return TablePlan{Table: t, Versions: []VersionDecision{}, Refused: te.Error(), err: te}, nil
		}
		re := &RefusedError{Table: t, Reason: "planning the table's cleanup", Cause: err}
		var ce *lance.CleanupError
		if errors.As(err, &ce) {
			re.Key = ce.Key
		}
		return TablePlan{}, re
	}
	return tablePlan(t, plan), nil
}

// checkPin confirms a checkpoint row's version exists on its branch and is
// still the commit the row names.
func checkPin(ctx context.Context, ds *lance.Dataset, r root) error {
	t := ds.Root
	who := fmt.Sprintf("checkpoint %s (%s) pins %s v%d", r.name, r.row.CheckpointID, r.row.Branch, r.row.Version)
	ref, err := lance.ParsePhysRef(r.row.PhysicalRef)
	if err != nil {
		return &RefusedError{Table: t, Key: registry.RegistryPath, Reason: who + ": its physical ref does not parse", Cause: err}
	}
	bds := ds
	if r.row.Branch != registry.MainBranch {
		if bds, err = ds.Branch(r.row.Branch); err != nil {
			return &RefusedError{Table: t, Reason: who + ": bad branch", Cause: err}
		}
	}
	if got, err := bds.VerifyPhysRef(ctx, ref); err != nil {
		reason := who + ": the pinned version cannot be read"
		way := checkpoint.DropLostCommand(r.row.CheckpointID, r.row.Path)
		switch {
		case errors.Is(err, storage.ErrNotFound):
			reason = who + ": the pinned version is missing: restore it from a backup, or give the pin up with `" + way + "`"
		case errors.Is(err, lance.ErrPhysRefMismatch) && checkpoint.ProvesOtherCommit(ref, got):
			reason = who + ": the pinned version is no longer the commit the checkpoint names (the table was recreated): give the pin up with `" + way + "`"
		case errors.Is(err, lance.ErrPhysRefMismatch):
			reason = who + ": the pinned version's manifest is not the one the checkpoint recorded, and nothing in it proves it another commit: restore the recorded manifest (from the backup or copy it came from)"
		}
		return &RefusedError{Table: t, Key: bds.PinnedManifestKey(ref), Reason: reason, Cause: err}
	}
	return nil
}

func tablePlan(t string, lp *lance.Plan) TablePlan {
	tp := TablePlan{Table: t, Versions: make([]VersionDecision, 0, len(lp.Versions)), Notes: append([]string(nil), lp.Notes...), Lance: lp}
	tags, branches := lp.RefsRead()
	tp.Notes = append(tp.Notes, lifetimeNotes(tags, branches, lp.PlannedAt)...)
	for _, v := range lp.Versions {
		b := v.Branch
		if b == "" {
			b = registry.MainBranch
		}
		d := VersionDecision{Branch: b, Version: v.Version, Timestamp: v.Timestamp.UTC(), Keep: v.Keep, Reasons: make([]string, 0, len(v.Reasons))}
		for _, r := range v.Reasons {
			d.Reasons = append(d.Reasons, reason(b, r))
		}
		if v.Keep {
			tp.Totals.VersionsKept++
		} else {
			tp.Totals.VersionsRemoved++
			if ts := d.Timestamp; tp.Totals.OldestRemovable == nil || ts.Before(*tp.Totals.OldestRemovable) {
				tp.Totals.OldestRemovable = &ts
			}
		}
		tp.Versions = append(tp.Versions, d)
	}
	tp.Totals.FilesToDelete = lp.Totals.FilesToDelete
	tp.Totals.BytesToDelete = lp.Totals.BytesToDelete
	return tp
}

// reason rewrites a Lance plan reason in the terms of issue 7.
func reason(branch, r string) string {
	switch {
	case r == "latest":
		return "branch head " + branch
	case strings.HasPrefix(r, "keep-last "):
		return "window: " + r
	case strings.HasPrefix(r, "not older than the cut-off "):
		return "window: committed at or after the cut-off " + strings.TrimPrefix(r, "not older than the cut-off ")
	case strings.HasPrefix(r, "tag "):
		name := strings.TrimPrefix(r, "tag ")
		if registry.IsLeaseTag(name) {
			return "reader lease " + name
		}
		if registry.IsReservedTag(name) {
			return "checkpoint pin tag " + name
		}
		return "foreign tag " + name
	case strings.HasPrefix(r, "extra root: "):
		return strings.TrimPrefix(r, "extra root: ")
	case strings.HasPrefix(r, "removed: "):
		r = strings.TrimPrefix(r, "removed: ")
		return strings.Replace(r, "; not the latest, tagged, a fork point or an extra root", "; no branch head, tag, fork point or checkpoint keeps it", 1)
	}
	return r
}
