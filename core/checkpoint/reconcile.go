package checkpoint

import (
	"context"
	"errors"
	"fmt"

	"github.com/retain-dev/retain/core/authz"
	"github.com/retain-dev/retain/core/checkpoint/registry"
	"github.com/retain-dev/retain/core/failpoint"
	"github.com/retain-dev/retain/core/internal/fanout"
	"github.com/retain-dev/retain/core/lance"
	"github.com/retain-dev/retain/core/storage"
)

// Failpoints of reconcile, in order.
const (
	FPReconcileAfterClaim    = "reconcile/after-claim"
	FPReconcileAfterSidecars = "reconcile/after-sidecars"
	FPReconcileAfterRepair   = "reconcile/after-repair"
	FPReconcileAfterReclaim  = "reconcile/after-reclaim"
)

// ReconcileFailpoints lists reconcile's failpoints in order.
var ReconcileFailpoints = []string{FPReconcileAfterClaim, FPReconcileAfterSidecars, FPReconcileAfterRepair, FPReconcileAfterReclaim}

// Sidecar outcomes.
const (
	SidecarFinished   = "finished"    // the registry has the checkpoint: sidecar deleted
	SidecarRolledBack = "rolled-back" // it does not: its tags and the sidecar deleted
)

// Conflict kinds. A conflict is never acted on: reconcile leaves the
// table (or sidecar) as it is and reports it.
const (
	ConflictPinLost            = "pin-lost"            // a live row's version is gone: its tag cannot be recreated
	ConflictIncarnationChanged = "incarnation-changed" // a live row's version is another commit now
	ConflictWrongTarget        = "wrong-target"        // a pin tag points elsewhere than its name's target
	ConflictTableMissing       = "table-missing"       // a live row's table is gone
	ConflictUnknownReserved    = "unknown-reserved"    // an ogcp_ tag that is not a v1 pin tag
	ConflictMalformedTag       = "malformed-tag"       // a tag file that cannot be read
	ConflictSidecar            = "sidecar"             // a sidecar that cannot be read or resolved
	ConflictRegistryVersion    = "registry-version"    // a live checkpoint's registry version is missing
	// ConflictAuthority: a pin no intact registry record explains (its
	// checkpoint unknown to the registry, live but without a row naming
	// it, or a create whose commit the registry no longer shows). It is
	// never reclaimed, and while one exists nothing is reclaimed anywhere
	// in the store: the registry that would justify any deletion is in
	// doubt. `retain registry recover` rebuilds the checkpoints.
	ConflictAuthority = "authority-lost"
)

// PinEvent is one tag reconcile repaired or reclaimed.
type PinEvent struct {
	Path         string      `json:"path"`
	Tag          string      `json:"tag"`
	CheckpointID registry.ID `json:"checkpoint_id"`
	Name         string      `json:"name,omitempty"`
	Branch       string      `json:"branch,omitempty"`
	Version      uint64      `json:"version,omitempty"`
	Why          string      `json:"why,omitempty"`
}

// Conflict is one thing reconcile refused to touch.
type Conflict struct {
	Kind   string `json:"kind"`
	Path   string `json:"path,omitempty"`
	Tag    string `json:"tag,omitempty"`
	Detail string `json:"detail"`
}

// SidecarResult is what became of one sidecar.
type SidecarResult struct {
	OperationID  string      `json:"operation_id"`
	CheckpointID registry.ID `json:"checkpoint_id"`
	Name         string      `json:"name"`
	Outcome      string      `json:"outcome"`
	TagsDeleted  []string    `json:"tags_deleted,omitempty"`
}

// Report is reconcile's result.
type Report struct {
	RegistryVersion registry.Version `json:"registry_version"`
	Tables          []string         `json:"tables"`
	Sidecars        []SidecarResult  `json:"sidecars"`
	Repaired        []PinEvent       `json:"repaired"`
	Reclaimed       []PinEvent       `json:"reclaimed"`
	Conflicts       []Conflict       `json:"conflicts"`
	// verified: the pinned commits (commitKey) this reconcile read and
	// found to be the commits their rows name.
	verified map[string]bool
	// head is the registry head read (version RegistryVersion).
	head *registry.Snapshot
	// refs: each root's refs as this reconcile read them, before acting.
	refs map[string]*lance.Refs
	// settling: reconcile acted on a sidecar (a rollback deletes tags
	// across tables, and one that fails part way reports only its failure).
	settling bool
}

// Refs returns table root's tags and branches listing as this reconcile
// read them, for a caller still holding the claim it ran under to plan
// cleanup from (lance.Policy.Refs) instead of reading them again. It is
// nil when reconcile did not read them whole or may have changed them: a
// pin repaired or reclaimed there, a conflict there, or any sidecar
// settled. (A plan records the refs it used and refuses to delete if they
// changed since, so stale refs could cost a table its cleanup, never its
// data.)
func (r *Report) Refs(root string) *lance.Refs {
	if r == nil || r.refs[root] == nil || r.settling {
		return nil
	}
	for _, es := range [][]PinEvent{r.Repaired, r.Reclaimed} {
		for _, e := range es {
			if e.Path == root {
				return nil
			}
		}
	}
	for _, c := range r.Conflicts {
		if c.Path == root {
			return nil
		}
	}
	return r.refs[root]
}

// Head is the registry head this reconcile read, at RegistryVersion (nil
// when it read none). Reconcile never commits a registry version, so a
// caller still holding the claim it ran under may plan against it without
// reading it again; a reconcile that found the head not held to its record
// failed with ErrConflicts.
func (r *Report) Head() *registry.Snapshot {
	if r == nil {
		return nil
	}
	return r.head
}

// CommitVerified reports whether this reconcile read row's pinned version
// and found it the commit the row names, at registry version
// RegistryVersion, with nothing in conflict on it. A caller still holding
// the claim the reconcile ran under may take that as read rather than read
// the manifest again (cleanup run's root planning).
func (r *Report) CommitVerified(row registry.Row) bool {
	return r != nil && r.verified[commitKey(row)]
}

func commitKey(r registry.Row) string { return r.Path + "\x00" + r.Branch + "\x00" + r.PhysicalRef }

// Reconcile runs reconcile with the zero Options.
func Reconcile(ctx context.Context, s *storage.Store) (*Report, error) {
	return Options{}.Reconcile(ctx, s)
}

// Reconcile brings the pins in line with the registry, under the claim:
// it resolves every sidecar first (finish or roll back), repairs missing
// pins of live checkpoints after re-validating their physical refs, and
// deletes ogcp_ tags no live checkpoint explains. Conflicts are reported
// and fail closed: nothing more is done on that table. With conflicts the
// error is ErrConflicts and the report says which.
func (o Options) Reconcile(ctx context.Context, s *storage.Store) (rep *Report, err error) {
	if err := authz.Check(ctx, authz.Request{Action: authz.ActionReconcile, Store: authz.StoreName(s)}); err != nil {
		return nil, err
	}
	reg := registry.Open(s, registry.Options{Scope: o.scope(s)})
	h, err := acquire(ctx, s, o, "reconcile", "reconcile-"+string(registry.NewID()))
	if err != nil {
		return nil, err
	}
	defer func() {
		if rerr := h.Release(context.WithoutCancel(ctx)); rerr != nil && err == nil {
			err = rerr
		}
	}()
	failpoint.Hit(FPReconcileAfterClaim)
	rep = &Report{Sidecars: []SidecarResult{}, Repaired: []PinEvent{}, Reclaimed: []PinEvent{}, Conflicts: []Conflict{}}
	err = o.withGates(ctx, s, func(ctx context.Context) error { return reconcile(ctx, s, reg, o.scope(s), rep, false) })
	if err != nil {
		return rep, err
	}
	return rep, conflictsError(rep)
}

// ReconcileHeld runs reconcile under a claim the caller already holds
// (cleanup run): no acquire, no release, no failpoints of its own. The
// caller must hold the store's claim for the whole call. With conflicts
// the error is ErrConflicts and the report says which.
func (o Options) ReconcileHeld(ctx context.Context, s *storage.Store) (*Report, error) {
	reg := registry.Open(s, registry.Options{Scope: o.scope(s)})
	rep := &Report{Sidecars: []SidecarResult{}, Repaired: []PinEvent{}, Reclaimed: []PinEvent{}, Conflicts: []Conflict{}}
	err := o.withGates(ctx, s, func(ctx context.Context) error { return reconcile(ctx, s, reg, o.scope(s), rep, false) })
	if err != nil {
		return rep, err
	}
	return rep, conflictsError(rep)
}

// reconcile reads everything first and decides (sidecars, the pins live
// checkpoints need, every reserved tag in the store); only when nothing
// puts the registry's authority in doubt does it act: sidecars, repairs,
// reclaims, in that order. A store whose authority is in doubt is left
// exactly as it was.
func reconcile(ctx context.Context, s *storage.Store, reg *registry.Registry, scope storage.Scope, rep *Report, readOnly bool) error {
	// The tables are discovered while the head is read; under the claim
	// (not read-only) the sidecars are listed meanwhile too: no create can
	// write one. Without the claim they are listed after the head, so that
	// a create committing meanwhile leaves its sidecar to explain its tags.
	var tables, sidecars []string
	var discErr, listErr error
	discovered, listed := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(discovered)
		tables, discErr = DiscoverTables(ctx, s)
	}()
	if readOnly {
		close(listed)
	} else {
		go func() {
			defer close(listed)
			sidecars, listErr = listSidecars(ctx, s)
		}()
	}
	defer func() { <-discovered; <-listed }()
	p, err := readHead(ctx, s, reg, scope, rep)
	if err != nil {
		return err
	}
	p.discover = func() ([]string, error) {
		<-discovered
		return tables, discErr
	}
	if !readOnly {
		p.listSidecars = func() ([]string, error) {
			<-listed
			return sidecars, listErr
		}
	}
	if err := p.judgeSidecars(ctx); err != nil {
		return err
	}
	if err := p.explainLive(ctx); err != nil {
		return err
	}
	if err := p.judgeUnexplained(ctx); err != nil {
		return err
	}
	if readOnly || authorityLost(rep) {
		return nil // touch nothing: conflictsError names the way out
	}

	// Act. The head proved itself: a record that lags (a commit whose
	// record write was lost) is settled first, so registry cleanup never
	// removes a version the chain from it to the head needs.
	if p.check != registry.HeadRecordCurrent && p.snap.Chained() && p.v > 0 {
		if err := reg.WriteHeadRecord(ctx, p.v, p.snap); err != nil {
			return fmt.Errorf("settling the registry's head record: %w", err)
		}
	}
	if err := p.actSidecars(ctx); err != nil {
		return err
	}
	failpoint.Hit(FPReconcileAfterSidecars)
	if err := p.repairPins(ctx); err != nil {
		return err // a pin not checked may be a conflict: reclaim nothing
	}
	failpoint.Hit(FPReconcileAfterRepair)
	if err := p.reclaimTags(ctx); err != nil {
		return err
	}
	failpoint.Hit(FPReconcileAfterReclaim)
	return nil
}

// reconcilePass carries one reconcile from its reads to its acts: what
// each read phase found is what the act phases may touch, and nothing
// else.
type reconcilePass struct {
	s     *storage.Store
	reg   *registry.Registry
	scope storage.Scope
	rep   *Report
	rds   *lance.Dataset

	// The head, and what its record check said.
	v     registry.Version
	snap  *registry.Snapshot
	check registry.HeadCheck

	// Sidecars, by checkpoint.
	inFlight   map[registry.ID]bool
	rolledBack map[registry.ID]bool
	sidecars   []sidecarAction

	// Tables present, and explained[root][tag]: the pins live checkpoints need.
	present   map[string]bool
	explained map[string]map[string]bool
	regPins   []registryRepair
	rows      []rowRepair

	// Reserved tags judged reclaimable, and roots whose tags could not all be read.
	reclaims   []reclaim
	unreadable map[string]bool
	// listed[root]: every tag of the root, as judgeUnexplained read them
	// (roots read in full only). Repairs judge a pin by it rather than
	// read its tag again.
	listed map[string]map[string]lance.Tag

	// discover returns the store's tables (DiscoverTables, started early);
	// listSidecars the sidecars' keys (listSidecars, started early).
	discover, listSidecars func() ([]string, error)

	// Set while acting: "root:tag" deleted with their sidecar, and paths
	// with a conflict (left alone by reclaim).
	rolledBackTags map[string]bool
	conflicted     map[string]bool
}

type sidecarAction struct {
	key     string
	sc      *Sidecar
	outcome string
}

type registryRepair struct {
	cp registry.Checkpoint
	rp PinHealth
}

type rowRepair struct {
	cp  registry.Checkpoint
	row registry.Row
	tag string
}

// readHead reads the head and holds it to its record: a rewritten, flipped
// or rolled-back head would explain pins it should not.
func readHead(ctx context.Context, s *storage.Store, reg *registry.Registry, scope storage.Scope, rep *Report) (*reconcilePass, error) {
	v, snap, err := reg.HeadUnverified(ctx) // held to its record below, as a conflict
	if err != nil {
		return nil, err
	}
	rep.RegistryVersion, rep.head = v, snap
	p := &reconcilePass{s: s, reg: reg, scope: scope, rep: rep, rds: registryDataset(s), v: v, snap: snap,
		inFlight: map[registry.ID]bool{}, rolledBack: map[registry.ID]bool{}, present: map[string]bool{},
		explained: map[string]map[string]bool{}, unreadable: map[string]bool{}, listed: map[string]map[string]lance.Tag{},
		rolledBackTags: map[string]bool{}, conflicted: map[string]bool{}}
	var hm *registry.HeadMismatch
	p.check, err = reg.CheckHead(ctx, v, snap)
	if errors.As(err, &hm) {
		rep.Conflicts = append(rep.Conflicts, Conflict{Kind: ConflictAuthority, Path: registry.RegistryPath, Detail: hm.Error()})
	} else if err != nil {
		return nil, err
	}
	return p, nil
}

// judgeSidecars: under the claim no create runs, so every sidecar belongs
// to a create that died. A rollback needs positive evidence that the
// commit never landed (judgeSidecar); sidecars that cannot be read or
// resolved keep their tags (in flight).
func (p *reconcilePass) judgeSidecars(ctx context.Context) error {
	list := p.listSidecars
	if list == nil {
		list = func() ([]string, error) { return listSidecars(ctx, p.s) }
	}
	keys, err := list()
	if err != nil {
		return err
	}
	for _, key := range keys {
		sc, err := readSidecar(ctx, p.s, key)
		if err != nil {
			p.rep.Conflicts = append(p.rep.Conflicts, Conflict{Kind: ConflictSidecar, Path: key, Detail: err.Error()})
			continue
		}
		outcome, detail, err := judgeSidecar(ctx, p.reg, p.v, p.snap, sc)
		if err != nil {
			return err
		}
		switch outcome {
		case SidecarRolledBack:
			p.rolledBack[sc.CheckpointID] = true
		case "":
			p.inFlight[sc.CheckpointID] = true
			p.rep.Conflicts = append(p.rep.Conflicts, Conflict{Kind: ConflictAuthority, Path: key, Detail: detail})
			continue
		}
		p.sidecars = append(p.sidecars, sidecarAction{key: key, sc: sc, outcome: outcome})
	}
	return nil
}

func (p *reconcilePass) explain(root, tag string) {
	if p.explained[root] == nil {
		p.explained[root] = map[string]bool{}
	}
	p.explained[root][tag] = true
}

// explainLive finds the store's tables and the pins every live checkpoint
// needs: its registry pin and one pin per row.
func (p *reconcilePass) explainLive(ctx context.Context) error {
	discover := p.discover
	if discover == nil {
		discover = func() ([]string, error) { return DiscoverTables(ctx, p.s) }
	}
	paths, err := discover()
	if err != nil {
		return err
	}
	p.rep.Tables = paths
	for _, path := range paths {
		p.present[path] = true
	}
	live := p.snap.Live()
	rps, err := registryPins(ctx, p.reg, live)
	if err != nil {
		return err
	}
	for i, cp := range live {
		rp := rps[i]
		if rp.Tag == "" {
			// The version that published a live checkpoint is gone: the
			// registry lost part of its history.
			p.rep.Conflicts = append(p.rep.Conflicts, Conflict{Kind: ConflictAuthority, Path: registry.RegistryPath, Detail: fmt.Sprintf("checkpoint %s (%s): %s", cp.ID, cp.Name, rp.Detail)})
			// Keep every registry pin of it: nothing explains which.
			names, _ := tagsWithPrefix(ctx, p.rds, registry.PinTagPrefix(cp.ID))
			for _, n := range names {
				p.explain(registry.RegistryPath, n)
			}
		} else {
			p.explain(registry.RegistryPath, rp.Tag)
			p.regPins = append(p.regPins, registryRepair{cp: cp, rp: rp})
		}
		for _, r := range cp.Rows {
			tag, err := registry.TablePinTag(cp.ID, r.Pin)
			if err != nil {
				return err
			}
			p.explain(r.Path, tag)
			p.rows = append(p.rows, rowRepair{cp: cp, row: r, tag: tag})
		}
	}
	return nil
}

// judgeUnexplained judges every reserved tag that no live checkpoint or
// unresolved sidecar explains: reclaimable only with positive evidence
// (judgeTag). One pin the registry cannot account for puts every deletion
// in doubt.
func (p *reconcilePass) judgeUnexplained(ctx context.Context) error {
	roots := append([]string{registry.RegistryPath}, p.rep.Tables...)
	type listed struct {
		ds   *lance.Dataset
		refs *lance.Refs
		err  error
	}
	// Every root's tags side by side; judged below in root order. One
	// listing of _refs/ a root: cleanup run plans from the same reading.
	all, err := fanout.Map(ctx, p.s.Parallelism(), len(roots), func(ctx context.Context, i int) (listed, error) {
		ds, err := lance.Open(p.s, roots[i])
		if err != nil {
			return listed{}, err
		}
		refs, err := ds.ReadRefs(ctx)
		return listed{ds, refs, err}, nil
	})
	if err != nil {
		return err
	}
	for i, root := range roots {
		ds, err := all[i].ds, all[i].err
		var ts []lance.Tag
		if err == nil {
			ts, err = all[i].refs.Tags, all[i].refs.TagsErr
		}
		var mal *lance.MalformedRefsError
		if errors.As(err, &mal) {
			for _, k := range mal.Keys() {
				p.rep.Conflicts = append(p.rep.Conflicts, Conflict{Kind: ConflictMalformedTag, Path: root, Tag: k, Detail: "unreadable tag file; reconcile does not reclaim on a table it cannot fully read"})
			}
			p.unreadable[root] = true
			continue
		} else if errors.Is(err, storage.ErrNotFound) {
			continue
		} else if err != nil {
			return err
		}
		byName := make(map[string]lance.Tag, len(ts))
		for _, t := range ts {
			byName[t.Name] = t
		}
		p.listed[root] = byName
		if p.rep.refs == nil {
			p.rep.refs = map[string]*lance.Refs{}
		}
		p.rep.refs[root] = all[i].refs
		for _, t := range ts {
			if !registry.IsReservedTag(t.Name) || registry.IsLeaseTag(t.Name) || p.explained[root][t.Name] {
				continue
			}
			pt, err := registry.ParsePinTag(t.Name)
			if err != nil {
				p.rep.Conflicts = append(p.rep.Conflicts, Conflict{Kind: ConflictUnknownReserved, Path: root, Tag: t.Name, Detail: "a tag in the reserved ogcp_ namespace that is not a v1 pin tag: reported, never deleted"})
				continue
			}
			if p.inFlight[pt.CheckpointID] {
				continue
			}
			why, c := judgeTag(p.snap, p.rolledBack, root, t, pt)
			if c != nil {
				p.rep.Conflicts = append(p.rep.Conflicts, *c)
				continue
			}
			p.reclaims = append(p.reclaims, reclaim{ds: ds, root: root, tag: t, id: pt.CheckpointID, why: why})
		}
	}
	return nil
}

// actSidecars settles the sidecars judged: a rolled-back create's tags go
// with its sidecar; a sidecar whose rollback did not finish is kept, since
// it still explains what is left.
func (p *reconcilePass) actSidecars(ctx context.Context) error {
	p.rep.settling = p.rep.settling || len(p.sidecars) > 0
	for _, a := range p.sidecars {
		res := SidecarResult{OperationID: a.sc.OperationID, CheckpointID: a.sc.CheckpointID, Name: a.sc.Name, Outcome: a.outcome}
		if a.outcome == SidecarRolledBack {
			tags, ok := rollBackSidecar(ctx, p.s, p.rds, a.sc, p.rep)
			if !ok {
				delete(p.rolledBack, a.sc.CheckpointID)
				p.inFlight[a.sc.CheckpointID] = true
				continue // keep the sidecar: it still explains what is left
			}
			res.TagsDeleted = tags
			for _, t := range tags {
				p.rolledBackTags[t] = true
			}
		}
		if err := p.s.Delete(ctx, a.key, storage.DeleteOptions{}); err != nil && !errors.Is(err, storage.ErrNotFound) {
			return err
		}
		p.rep.Sidecars = append(p.rep.Sidecars, res)
	}
	return nil
}

func (p *reconcilePass) conflict(c Conflict) {
	p.rep.Conflicts = append(p.rep.Conflicts, c)
	if c.Path != "" {
		p.conflicted[c.Path] = true
	}
}

// repairPins restores the pins live checkpoints need: registry pins, then
// row pins. A pin that cannot be repaired is a conflict on its path.
func (p *reconcilePass) repairPins(ctx context.Context) error {
	commits := newCommitChecks()
	// Each pin is checked (and repaired) side by side; the outcomes are
	// recorded in the order a serial pass would have them.
	regOut := make([]repairOutcome, len(p.regPins))
	regErr := fanout.Each(ctx, p.s.Parallelism(), len(p.regPins), func(ctx context.Context, i int) error {
		r := p.regPins[i]
		ref, _ := registry.ParseRef(r.rp.PhysicalRef)
		if st, detail := listedTagHealth(ctx, p.rds, r.rp, p.listed[registry.RegistryPath]); st == PinMissing {
			if err := ensureRegistryTag(ctx, p.rds, r.rp.Tag, ref, recordOf(r.cp, nil)); err != nil {
				regOut[i].conflict = &Conflict{Kind: ConflictWrongTarget, Path: registry.RegistryPath, Tag: r.rp.Tag, Detail: err.Error()}
			} else {
				regOut[i].repaired = &PinEvent{Path: registry.RegistryPath, Tag: r.rp.Tag, CheckpointID: r.cp.ID, Name: r.cp.Name, Branch: registry.MainBranch, Version: r.rp.Version}
			}
		} else if st != PinOK {
			regOut[i].conflict = &Conflict{Kind: ConflictWrongTarget, Path: registry.RegistryPath, Tag: r.rp.Tag, Detail: detail}
		}
		return nil
	})
	var present []registry.Row
	for _, r := range p.rows {
		if p.present[r.row.Path] {
			present = append(present, r.row)
		}
	}
	commits.prefetch(ctx, p.s, present)
	rowOut := make([]repairOutcome, len(p.rows))
	rowErr := fanout.Each(ctx, p.s.Parallelism(), len(p.rows), func(ctx context.Context, i int) error {
		r := p.rows[i]
		if !p.present[r.row.Path] {
			rowOut[i].conflict = &Conflict{Kind: ConflictTableMissing, Path: r.row.Path, Tag: r.tag, Detail: fmt.Sprintf("checkpoint %s (%s) pins %s version %d, but the table is gone; restore it from a backup, or give the pin up with `%s`", r.cp.ID, r.cp.Name, r.row.Path, r.row.Version, DropLostCommand(r.cp.ID, r.row.Path))}
			return nil
		}
		rowOut[i] = repairRow(ctx, p.s, r.cp, r.row, r.tag, commits, p.listed[r.row.Path])
		return nil
	})
	for _, o := range append(regOut, rowOut...) {
		if o.conflict != nil {
			p.conflict(*o.conflict)
		}
		if o.repaired != nil {
			p.rep.Repaired = append(p.rep.Repaired, *o.repaired)
		}
	}
	for i, o := range rowOut {
		if o.verified && o.conflict == nil {
			if p.rep.verified == nil {
				p.rep.verified = map[string]bool{}
			}
			p.rep.verified[commitKey(p.rows[i].row)] = true
		}
	}
	// The steps only fail when ctx ends: then some pins were never checked.
	return errors.Join(regErr, rowErr)
}

// repairOutcome is what checking one pin found: a conflict, a repair, or
// (both nil) a pin in order.
type repairOutcome struct {
	conflict *Conflict
	repaired *PinEvent
	// verified: the pinned version was read and is the row's commit.
	verified bool
}

// reclaimTags deletes the reserved tags judged reclaimable. Tables with a
// conflict are left alone.
func (p *reconcilePass) reclaimTags(ctx context.Context) error {
	var todo []reclaim
	for _, rc := range p.reclaims {
		if !p.conflicted[rc.root] && !p.unreadable[rc.root] && !p.inFlight[rc.id] && !p.rolledBackTags[rc.root+":"+rc.tag.Name] {
			todo = append(todo, rc)
		}
	}
	ifVersion := p.s.Require(storage.FeatureDeleteIfVersion, p.scope) == nil
	errs, ran := make([]error, len(todo)), make([]bool, len(todo))
	stop := fanout.Each(ctx, p.s.Parallelism(), len(todo), func(ctx context.Context, i int) error {
		ran[i] = true
		v := ""
		if ifVersion {
			v = todo[i].tag.Info.Version
		}
		if err := todo[i].ds.DeleteTag(ctx, todo[i].tag.Name, v); err != nil && !errors.Is(err, lance.ErrTagNotFound) {
			errs[i] = err
		}
		return nil
	})
	for i, rc := range todo {
		if !ran[i] {
			continue // never tried: the tag is still there, and so not reclaimed
		}
		if errs[i] != nil {
			p.rep.Conflicts = append(p.rep.Conflicts, Conflict{Kind: ConflictWrongTarget, Path: rc.root, Tag: rc.tag.Name, Detail: errs[i].Error()})
			continue
		}
		p.rep.Reclaimed = append(p.rep.Reclaimed, PinEvent{Path: rc.root, Tag: rc.tag.Name, CheckpointID: rc.id, Branch: branchOf(rc.tag), Version: rc.tag.Version, Why: rc.why})
	}
	return stop
}

// repairRow checks one live row's tag and recreates it if it is missing
// and the version is still the commit the row names.
// listed is the table's tags as this pass read them (nil: read the tag).
func repairRow(ctx context.Context, s *storage.Store, cp registry.Checkpoint, r registry.Row, tag string, commits *commitChecks, listed map[string]lance.Tag) repairOutcome {
	ds, err := lance.Open(s, r.Path)
	if err != nil {
		return repairOutcome{conflict: &Conflict{Kind: ConflictPinLost, Path: r.Path, Tag: tag, Detail: err.Error()}}
	}
	ref, err := lance.ParsePhysRef(r.PhysicalRef)
	if err != nil {
		return repairOutcome{conflict: &Conflict{Kind: ConflictPinLost, Path: r.Path, Tag: tag, Detail: err.Error()}}
	}
	p := PinHealth{Kind: "table", Path: r.Path, Branch: r.Branch, Version: r.Version, PhysicalRef: r.PhysicalRef, Tag: tag}
	st, detail := listedTagHealth(ctx, ds, p, listed)
	if st != PinOK && st != PinMissing {
		return repairOutcome{conflict: &Conflict{Kind: ConflictWrongTarget, Path: r.Path, Tag: tag, Detail: detail}}
	}
	// Present or not, the tag is only worth something while the version
	// is still the commit the row names: what cleanup would refuse,
	// reconcile reports, with the way out.
	if l, err := commits.lost(ctx, s, r); err != nil {
		return repairOutcome{conflict: &Conflict{Kind: ConflictPinLost, Path: r.Path, Tag: tag, Detail: fmt.Sprintf("checkpoint %s (%s): version %d on %s cannot be read: %v; make it readable, then reconcile again", cp.ID, cp.Name, r.Version, r.Branch, err)}}
	} else if l.kind != "" {
		return repairOutcome{conflict: &Conflict{Kind: l.kind, Path: r.Path, Tag: tag, Detail: fmt.Sprintf("checkpoint %s (%s): %s; %s", cp.ID, cp.Name, l.why, l.wayOut(cp.ID, r.Path))}}
	}
	if st == PinOK {
		return repairOutcome{verified: true}
	}
	if err := ensureTableTag(ctx, ds, tag, r.Pin, ref.Size, recordOf(cp, &r.Pin)); err != nil {
		return repairOutcome{conflict: &Conflict{Kind: ConflictWrongTarget, Path: r.Path, Tag: tag, Detail: err.Error()}}
	}
	return repairOutcome{repaired: &PinEvent{Path: r.Path, Tag: tag, CheckpointID: cp.ID, Name: cp.Name, Branch: r.Branch, Version: r.Version}, verified: true}
}
