// Package branch manages Lance branches store-wide, under retain's policy:
// the retention claim (core/storage/claim) serializes it with every other
// retention operation, and the checkpoint registry (checkpoint/registry)
// decides what must not be deleted. The Lance format itself — which
// objects a branch owns, which refs keep it — is lance's.
//
// Delete is `retain branch delete`; docs/cleanup.md, "Branch delete".
package branch

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/retain-dev/retain/core/authz"
	"github.com/retain-dev/retain/core/checkpoint"
	"github.com/retain-dev/retain/core/checkpoint/registry"
	"github.com/retain-dev/retain/core/failpoint"
	"github.com/retain-dev/retain/core/lance"
	"github.com/retain-dev/retain/core/refs/lifecycle"
	"github.com/retain-dev/retain/core/refs/refmeta"
	"github.com/retain-dev/retain/core/retention/runs"
	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/claim"
)

// Failpoints of Delete, in order (see internal/failpoint).
const (
	FPDeleteAfterClaim    = "branch-delete/after-claim"    // claim held, reconciled, nothing deleted
	FPDeleteAfterDeleting = "branch-delete/after-deleting" // every branch file says deleting, nothing deleted
	FPDeleteAfterRefs     = "branch-delete/after-refs"     // every branch file deleted, no folder yet
	FPDeleteMidTrees      = "branch-delete/mid-trees"      // after the first table's folder
	FPDeleteAfterTrees    = "branch-delete/after-trees"    // everything deleted, claim still held
)

// DeleteFailpoints lists the failpoints of Delete in order.
var DeleteFailpoints = []string{FPDeleteAfterClaim, FPDeleteAfterDeleting, FPDeleteAfterRefs, FPDeleteMidTrees, FPDeleteAfterTrees}

// Options configure Delete. The zero value is what the CLI uses.
type Options struct {
	// Actor recorded in the claim; default $USER@host.
	Actor string
	// Scope of the store's writers; zero means claim.ScopeFor(s.Location()).
	Scope storage.Scope
	// Gates are adapter gates held with the claim (storage.Store.WithGates).
	Gates []string
	// Table limits the delete to one table: its folder at the top of the
	// store ("t.lance"; "t" is taken as "t.lance"). Empty means every
	// table of the store that has the branch.
	Table string
	// OwnerDeadAttested is the operator's statement that the owner of a
	// creating or deleting branch, on another host, is dead (see
	// claim.Proof); on this host the tool proves it itself.
	OwnerDeadAttested string
	// StillDue, when set, judges the branch file again under the claim
	// (its whole metadata): false refuses with ErrBranchChanged — the
	// branch re-created without the expiry the caller judged, or its
	// expiry moved. The expiry reaper sets it.
	StillDue func(meta map[string]string) bool
	// Command names the command in authorization requests (the context's
	// "command"): "branch expire" for the daemon's expiry reaper, so a
	// policy can tell it from an operator's `branch delete`. Empty: the
	// action.
	Command string
}

func (o Options) scope(s *storage.Store) storage.Scope {
	if o.Scope != storage.ScopeNone {
		return o.Scope
	}
	return claim.ScopeFor(s.Location())
}

func (o Options) withGates(ctx context.Context, s *storage.Store, fn func(context.Context) error) error {
	if len(o.Gates) == 0 {
		return fn(ctx)
	}
	return s.WithGates(ctx, o.scope(s), o.Gates, fn)
}

// Deleted is what Delete did.
type Deleted struct {
	Branch      string `json:"branch"`
	Store       string `json:"store"`
	OperationID string `json:"operation_id"`
	// Tables are the tables the branch was deleted from, sorted.
	Tables       []TableDeleted `json:"tables"`
	FilesDeleted int            `json:"files_deleted"`
	BytesDeleted int64          `json:"bytes_deleted"`
	// Failed counts the tables whose delete did not finish (see their
	// Error); Delete then returns ErrIncomplete.
	Failed int `json:"failed"`
	// Reconciled is the reconcile run under the claim before anything
	// was decided.
	Reconciled *checkpoint.Report `json:"reconciled"`
}

// TableDeleted is the delete of the branch in one table.
type TableDeleted struct {
	Table string `json:"table"`
	// Tree is the branch's folder, <table>/tree/<branch>.
	Tree string `json:"tree"`
	// RefDeleted: this run deleted the branch file.
	RefDeleted bool `json:"ref_deleted"`
	// Resumed: the branch file was already gone — a delete that stopped
	// after it, or what a branch create refused by Lance left — and only
	// the folder's files were left to delete.
	Resumed bool `json:"resumed,omitempty"`
	// ParentBranch and ParentVersion are where the branch was forked
	// from, when its file was read ("main" for main).
	ParentBranch  string `json:"parent_branch,omitempty"`
	ParentVersion uint64 `json:"parent_version,omitempty"`
	FilesDeleted  int    `json:"files_deleted"`
	BytesDeleted  int64  `json:"bytes_deleted"`
	// KeptNested are folders of other branches nested inside this one's
	// (branch "x/y" inside "x"), which were kept.
	KeptNested []string             `json:"kept_nested,omitempty"`
	Failed     []lance.FailedDelete `json:"failed_deletes,omitempty"`
	Error      string               `json:"error,omitempty"`
	// StateBefore is the branch's lifecycle state when the delete began
	// (ready, creating, deleting; absent when its file was already gone).
	StateBefore lifecycle.State `json:"state_before,omitempty"`
	// TookOver: the branch was creating or deleting under a dead
	// process's operation, which this delete took over.
	TookOver *TookOver `json:"took_over,omitempty"`
}

// Delete deletes branch name from the store's tables with opts.
func Delete(ctx context.Context, s *storage.Store, name string, opts Options) (*Deleted, error) {
	return opts.Delete(ctx, s, name)
}

// Delete deletes branch name: from Options.Table, or from every table of
// the store that has it.
//
//  1. The name is checked before anything is read: "main" can never be
//     deleted, a name Lance refuses is invalid (both kind
//     storage.ErrInvalidArgument), and a name beginning with "main/" is
//     refused (lance.ErrBranchDeleteUnsafe: Lance's own delete of it
//     deletes the whole dataset).
//  2. Under the retention claim (claim.ErrHeld if another operation holds
//     it), and any Options.Gates: an unfinished cleanup run refuses
//     (runs.ErrOpen: its journaled plans name the branch's
//     versions); then the store is reconciled like before every
//     destructive operation (a conflict refuses, nothing deleted).
//  3. Every table is planned (lance.PlanBranchDelete): a table refuses
//     when the branch has child branches or tags, overlaps another
//     branch's folders, or its refs are malformed. Then the registry head:
//     a live checkpoint with a row on the branch in a table being deleted
//     from refuses (*CheckpointPinsBranchError). Any refusal in any table
//     refuses the whole command with *RefusedError, and nothing is
//     deleted anywhere. A branch found in no table is storage.ErrNotFound
//     (lance.ErrBranchNotFound), naming the branch and the store.
//  4. Every table's branch file is marked deleting (the lifecycle of
//     branch/lifecycle: a compare-and-swap on the file as planned, undone if one
//     table cannot be marked), then deleted (delete-if-version of that
//     state), then each table's folder (manifests first), verifying the
//     claim before each table. Branch files before folders: a crash leaves
//     an intact branch marked deleting (not listed by retain, resumed by
//     the next delete) or folders nothing references (leaked until the
//     delete runs again, which finds them and finishes), never a branch
//     that is listed but broken; see lance.DeleteBranchRef. A branch
//     creating or deleting under another operation is taken over only
//     with claim.Proof's proof that its process is dead
//     (*OwnerAliveError otherwise, as a table refusal); a refused delete
//     puts a branch an earlier delete left deleting back to ready.
//  5. The claim is released.
//
// A table whose folder could not be deleted completely is reported in
// its TableDeleted and Delete returns the report with ErrIncomplete; the
// other tables are still done.
func (o Options) Delete(ctx context.Context, s *storage.Store, name string) (res *Deleted, err error) {
	if err := lance.CheckBranchDeletable(name); err != nil {
		return nil, err
	}
	// Before the claim: a denial writes nothing.
	if err := authz.Check(ctx, authz.Request{Action: authz.ActionBranchDelete, Command: o.Command, Store: authz.StoreName(s), Table: o.Table, Branch: name}); err != nil {
		return nil, err
	}
	if err := s.Require(storage.FeatureReplaceIfVersion, o.scope(s)); err != nil {
		return nil, fmt.Errorf("a branch's lifecycle (deleting) is kept with replace-if-version on its branch file: %w", err)
	}
	store := s.Location().String()
	tables, err := o.tables(ctx, s, store)
	if err != nil {
		return nil, err
	}
	op := "branch-delete-" + string(registry.NewID())
	h, err := claim.Acquire(ctx, s, claim.Request{OperationID: op, Action: "branch-delete", Actor: o.Actor, Scope: o.scope(s)})
	if err != nil {
		return nil, err
	}
	defer func() {
		if rerr := h.Release(context.WithoutCancel(ctx)); rerr != nil && err == nil {
			err = rerr
		}
	}()
	// An unfinished cleanup run journaled plans that name this branch's
	// versions; deleting the branch under it would make them stale.
	open, err := runs.Open(ctx, s)
	if err != nil {
		return nil, err
	}
	if len(open) > 0 {
		return nil, fmt.Errorf("%w: %s: finish it with `retain cleanup run --resume` or drop it with `--abandon %s`, then delete the branch; nothing was deleted: %w",
			runs.ErrOpen, open[0], open[0], storage.Errorf("branch-delete", name, storage.ErrPreconditionFailed, "unfinished cleanup run"))
	}
	popts := checkpoint.Options{Actor: o.Actor, Scope: o.scope(s), Gates: o.Gates}
	rep, err := popts.ReconcileHeld(ctx, s)
	if err != nil {
		return nil, fmt.Errorf("branch delete %q: the reconcile run first, under the claim, failed; nothing was deleted: %w", name, err)
	}
	failpoint.Hit(FPDeleteAfterClaim)
	res = &Deleted{Branch: name, Store: store, OperationID: op, Tables: []TableDeleted{}, Reconciled: rep}
	err = o.withGates(ctx, s, func(ctx context.Context) error {
		plans, err := o.plan(ctx, s, h, op, name, tables, true)
		if err != nil {
			return err
		}
		if err := h.Verify(ctx); err != nil {
			return err
		}
		before, err := markDeleting(ctx, h, op, plans)
		if err != nil {
			return err
		}
		failpoint.Hit(FPDeleteAfterDeleting)
		// Plan again now that the mark is durable. A tag create writes its
		// tag, then reads the branch file (tag.Tags.Create): a tag, child
		// branch or pin that appeared since the first plan was written by a
		// process that either saw the mark and backed out, or is seen here.
		// A refusal now rolls the mark back to ready.
		first := map[string]tablePlan{}
		for _, tp := range plans {
			first[tp.table] = tp
		}
		if plans, err = o.plan(ctx, s, h, op, name, tables, false); err != nil {
			// Refused now: put every mark this delete made back to exactly
			// what it replaced (a creating branch stays creating, its owner
			// recorded), each a compare-and-swap on the mark.
			var re *RefusedError
			restored := restoreMarks(ctx, op, name, before)
			if errors.As(err, &re) {
				re.RolledBack = restored
			}
			return err
		}
		for i := range plans {
			// Report the state and takeover the delete started from, not
			// its own mark.
			if f, ok := first[plans[i].table]; ok {
				plans[i].life, plans[i].took = f.life, f.took
			}
		}
		return execute(ctx, h, op, plans, res)
	})
	if err != nil {
		if len(res.Tables) == 0 {
			return nil, err
		}
		return res, err
	}
	return res, nil
}

// tables names the tables the delete considers.
func (o Options) tables(ctx context.Context, s *storage.Store, store string) ([]string, error) {
	if o.Table == "" {
		return checkpoint.DiscoverTables(ctx, s)
	}
	t, err := findTable(ctx, s, store, o.Table, "branch-delete")
	if err != nil {
		return nil, err
	}
	return []string{t}, nil
}

// findTable returns table ("t" is taken as "t.lance") if it is a table
// at the top of the store, else storage.ErrNotFound.
func findTable(ctx context.Context, s *storage.Store, store, table, op string) (string, error) {
	t := strings.TrimSuffix(table, "/")
	if t == "" {
		return "", storage.Errorf(op, table, storage.ErrInvalidArgument, "a table is required")
	}
	if !strings.HasSuffix(t, checkpoint.TableSuffix) {
		t += checkpoint.TableSuffix
	}
	all, err := checkpoint.DiscoverTables(ctx, s)
	if err != nil {
		return "", err
	}
	for _, p := range all {
		if p == t {
			return t, nil
		}
	}
	return "", storage.Errorf(op, t, storage.ErrNotFound, "no table %q at the top of store %s", t, store)
}

// tablePlan is one table's plan.
type tablePlan struct {
	table string
	ds    *lance.Dataset
	plan  *lance.BranchDeletePlan
	// life is the lifecycle of the branch file (when there is one), took
	// the transition taken over from a dead process.
	life lifecycle.Record
	took *TookOver
}

// plan plans every table and applies the registry's policy; any refusal
// refuses all.
func (o Options) plan(ctx context.Context, s *storage.Store, h *claim.Handle, op, name string, tables []string, rollback bool) ([]tablePlan, error) {
	store := s.Location().String()
	var plans []tablePlan
	refused := &RefusedError{Branch: name, Store: store, Tables: []TableRefusal{}}
	present := map[string]bool{}
	for _, t := range tables {
		ds, err := lance.Open(s, t)
		if err != nil {
			return nil, err
		}
		p, err := ds.PlanBranchDelete(ctx, name)
		switch {
		case errors.Is(err, lance.ErrBranchNotFound):
			continue
		case isRefusal(err):
			present[t] = true
			refused.Tables = append(refused.Tables, tableRefusal(t, err))
			continue
		case err != nil:
			return nil, fmt.Errorf("branch delete %q: table %s: %w", name, t, err)
		}
		present[t] = true
		tp := tablePlan{table: t, ds: ds, plan: p}
		if o.StillDue != nil && (p.Ref == nil || !o.StillDue(p.Ref.Metadata)) {
			refused.Tables = append(refused.Tables, tableRefusal(t, refuse(ErrBranchChanged, storage.ErrPreconditionFailed,
				"branch %q of %s is no longer due (re-created, or its expiry moved, since it was judged); nothing was deleted", name, t)))
			continue
		}
		if p.Ref != nil {
			// The lifecycle: a creating or deleting branch of another
			// operation is taken over only from a dead owner.
			if tp.life, err = lifecycle.Parse(p.Ref.Metadata); err != nil {
				refused.Tables = append(refused.Tables, tableRefusal(t, refuse(lifecycle.ErrMalformed, storage.ErrPreconditionFailed,
					"branch %q of %s: %v; fix or remove its %s keys", name, t, err, refmeta.ReservedPrefix)))
				continue
			}
			if tp.took, err = takeOver(selfOwner(h), op, name, t, tp.life, o.OwnerDeadAttested); err != nil {
				refused.Tables = append(refused.Tables, tableRefusal(t, err))
				continue
			}
		}
		plans = append(plans, tp)
	}
	if len(present) == 0 {
		where := "in no table of store " + store
		if o.Table != "" {
			where = fmt.Sprintf("in table %s of store %s", tables[0], store)
		}
		return nil, &storage.Error{Op: "branch-delete", Key: name, Kind: storage.ErrNotFound, Err: lance.ErrBranchNotFound,
			Msg: fmt.Sprintf("branch %s exists %s (no branch file, and no files of its own in its tree/ folder)", storage.Quote(name), where)}
	}
	_, snap, err := registry.Open(s, registry.Options{Scope: o.scope(s)}).Head(ctx)
	if err != nil {
		return nil, err
	}
	refused.Pins = pinning(snap, name, present)
	if refused.Pins != nil {
		// A live checkpoint's pin tags on the branch are Lance tags too;
		// the pins refusal already says why they keep it.
		kept := refused.Tables[:0]
		for _, tr := range refused.Tables {
			if tr, ok := withoutPinTags(snap, refused.Pins, tr); ok {
				kept = append(kept, tr)
			}
		}
		refused.Tables = kept
	}
	if refused.Pins != nil || len(refused.Tables) > 0 {
		if rollback {
			refused.RolledBack = o.rollBackDeleting(ctx, s, h, op, name, present)
		}
		return nil, refused
	}
	return plans, nil
}

// rollBackDeleting is a refused delete's last step: a branch left
// deleting by an earlier delete that stopped before its branch file went
// (nothing of it was deleted) goes back to ready, so a branch that now
// must stay (a child, tag or checkpoint appeared) is listed again. Only
// transitions this operation may take over are rolled back; failures
// leave the branch deleting (not listed), which the next delete resumes.
func (o Options) rollBackDeleting(ctx context.Context, s *storage.Store, h *claim.Handle, op, name string, tables map[string]bool) []string {
	var out []string
	for _, t := range slices.Sorted(maps.Keys(tables)) {
		ds, err := lance.Open(s, t)
		if err != nil {
			continue
		}
		b, err := ds.ReadBranch(ctx, name)
		if err != nil {
			continue
		}
		l, err := lifecycle.Parse(b.Metadata)
		if err != nil || l.State != lifecycle.Deleting {
			continue
		}
		if _, err := takeOver(selfOwner(h), op, name, t, l, o.OwnerDeadAttested); err != nil {
			continue
		}
		if h.Verify(ctx) != nil {
			break
		}
		src := lifecycle.Source{Branch: b.ParentBranch, Version: b.ParentVersion}
		if _, err := ds.ReplaceBranchMetadata(ctx, name, b.Info.Version, lifecycle.Meta(b.Metadata, lifecycle.Ready, op, nil, src, time.Now())); err == nil {
			out = append(out, t)
		}
	}
	return out
}

// isRefusal: a reason the table refuses the delete, as opposed to a
// storage failure.
func isRefusal(err error) bool {
	var be *lance.BranchDeleteError
	return errors.As(err, &be) || errors.Is(err, lance.ErrMalformedBranch) || errors.Is(err, lance.ErrMalformedTag)
}

// pinning lists the live checkpoints with a row on branch in one of
// tables, or nil.
func pinning(snap *registry.Snapshot, branch string, tables map[string]bool) *CheckpointPinsBranchError {
	var out []PinningCheckpoint
	for _, c := range snap.Live() {
		pc := PinningCheckpoint{ID: c.ID, Name: c.Name}
		for _, r := range c.Rows {
			if r.Branch == branch && tables[r.Path] {
				pc.Tables = append(pc.Tables, PinnedTable{Path: r.Path, Version: r.Version})
			}
		}
		if len(pc.Tables) > 0 {
			sort.Slice(pc.Tables, func(i, j int) bool { return pc.Tables[i].Path < pc.Tables[j].Path })
			out = append(out, pc)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return &CheckpointPinsBranchError{Branch: branch, Checkpoints: out}
}

// withoutPinTags drops from a table's refusal the tags that are pins of
// the pinning checkpoints; ok is false when no reason is left.
func withoutPinTags(snap *registry.Snapshot, pins *CheckpointPinsBranchError, tr TableRefusal) (TableRefusal, bool) {
	var be *lance.BranchDeleteError
	if !errors.As(tr.Err, &be) || len(be.Tags) == 0 {
		return tr, true
	}
	pinTags := map[string]bool{}
	for _, pc := range pins.Checkpoints {
		c, err := snap.ByID(pc.ID)
		if err != nil {
			continue
		}
		names, err := c.TablePinTags()
		if err != nil {
			continue
		}
		for _, n := range names {
			pinTags[n] = true
		}
	}
	nb := *be
	nb.Tags = nil
	for _, tg := range be.Tags {
		if !pinTags[tg.Name] {
			nb.Tags = append(nb.Tags, tg)
		}
	}
	if len(nb.Tags) == len(be.Tags) {
		return tr, true
	}
	nb.Reasons = nil
	for _, r := range be.Reasons {
		if r != lance.ErrBranchHasTags || len(nb.Tags) > 0 {
			nb.Reasons = append(nb.Reasons, r)
		}
	}
	if len(nb.Reasons) == 0 {
		return tr, false
	}
	return tableRefusal(tr.Table, &nb), true
}

// execute deletes every branch file (each marked deleting by this
// operation), then every folder.
func execute(ctx context.Context, h *claim.Handle, op string, plans []tablePlan, res *Deleted) error {
	if err := h.Verify(ctx); err != nil {
		return err
	}
	rows := make([]TableDeleted, len(plans))
	refGone := make([]bool, len(plans))
	for i, tp := range plans {
		td := TableDeleted{Table: tp.table, Tree: tp.plan.Tree, KeptNested: tp.plan.Excluded, TookOver: tp.took}
		if r := tp.plan.Ref; r != nil {
			td.StateBefore = tp.life.State
			td.ParentBranch, td.ParentVersion = r.ParentBranch, r.ParentVersion
			if td.ParentBranch == "" {
				td.ParentBranch = registry.MainBranch
			}
		} else {
			td.Resumed = true
		}
		deleted, err := tp.ds.DeleteBranchRef(ctx, tp.plan)
		td.RefDeleted = deleted
		if err != nil {
			td.Error = "deleting the branch file: " + err.Error() + "; the branch and its folder were kept"
		} else {
			refGone[i] = true
		}
		rows[i] = td
	}
	failpoint.Hit(FPDeleteAfterRefs)
	var stop error
	first := true
	for i, tp := range plans {
		if !refGone[i] {
			continue
		}
		if stop == nil {
			stop = h.Verify(ctx)
		}
		if stop != nil {
			rows[i].Error = "folder not deleted: " + stop.Error() + "; nothing references it: delete the branch again to finish"
			continue
		}
		tr, err := tp.ds.DeleteBranchTree(ctx, tp.plan)
		if tr != nil {
			rows[i].FilesDeleted, rows[i].BytesDeleted, rows[i].Failed = tr.FilesDeleted, tr.BytesDeleted, tr.Failed
		}
		if err != nil {
			rows[i].Error = err.Error()
		}
		if first {
			first = false
			failpoint.Hit(FPDeleteMidTrees)
		}
	}
	failpoint.Hit(FPDeleteAfterTrees)
	for _, td := range rows {
		res.Tables = append(res.Tables, td)
		res.FilesDeleted += td.FilesDeleted
		res.BytesDeleted += td.BytesDeleted
		if td.Error != "" {
			res.Failed++
		}
	}
	if stop != nil {
		return stop
	}
	if res.Failed > 0 {
		return fmt.Errorf("%w: branch %q: %d of %d table(s) not finished (see the report); running the delete again finishes them",
			ErrIncomplete, res.Branch, res.Failed, len(res.Tables))
	}
	return nil
}

// markDeleting moves every planned branch file to deleting, each a
// compare-and-swap on the version planned: the decision to delete is
// durable before anything goes, and a file rewritten since the plan stops
// the delete. If one table cannot be marked, the marks made here are
// undone (each again a compare-and-swap) and nothing is deleted. Each
// plan's Ref becomes the marked file, whose exact version the branch
// file's delete then removes.
func markDeleting(ctx context.Context, h *claim.Handle, op string, plans []tablePlan) ([]markedBranch, error) {
	self := selfOwner(h)
	type mark struct {
		i    int
		meta map[string]string
	}
	var done []mark
	for i := range plans {
		tp := &plans[i]
		r := tp.plan.Ref
		if r == nil {
			continue
		}
		src := lifecycle.Source{Branch: r.ParentBranch, Version: r.ParentVersion}
		nb, err := tp.ds.ReplaceBranchMetadata(ctx, tp.plan.Branch, r.Info.Version,
			lifecycle.Meta(r.Metadata, lifecycle.Deleting, op, self, src, time.Now()))
		if err != nil {
			for _, m := range done {
				// Undo; a failed undo leaves the branch deleting (not
				// listed), which the next delete resumes.
				u := &plans[m.i]
				_, _ = u.ds.ReplaceBranchMetadata(context.WithoutCancel(ctx), u.plan.Branch, u.plan.Ref.Info.Version, m.meta)
			}
			return nil, fmt.Errorf("branch delete %q: table %s: marking the branch deleting: %w; nothing was deleted", tp.plan.Branch, tp.table, err)
		}
		done = append(done, mark{i, r.Metadata})
		tp.plan.Ref = &nb
	}
	out := make([]markedBranch, 0, len(done))
	for _, m := range done {
		out = append(out, markedBranch{table: plans[m.i].table, ds: plans[m.i].ds, meta: m.meta})
	}
	return out, nil
}

// markedBranch is a branch file markDeleting marked, and the metadata the
// mark replaced.
type markedBranch struct {
	table string
	ds    *lance.Dataset
	meta  map[string]string
}

// restoreMarks puts back the metadata of every branch file still carrying
// this operation's deleting mark; it returns the tables restored. A file
// that cannot be restored stays deleting (not listed), which the next
// delete resumes or rolls back.
func restoreMarks(ctx context.Context, op, name string, marks []markedBranch) []string {
	ctx = context.WithoutCancel(ctx)
	var out []string
	for _, m := range marks {
		b, err := m.ds.ReadBranch(ctx, name)
		if err != nil {
			continue
		}
		l, err := lifecycle.Parse(b.Metadata)
		if err != nil || l.State != lifecycle.Deleting || l.Op != op {
			continue
		}
		if _, err := m.ds.ReplaceBranchMetadata(ctx, name, b.Info.Version, m.meta); err == nil {
			out = append(out, m.table)
		}
	}
	return out
}
