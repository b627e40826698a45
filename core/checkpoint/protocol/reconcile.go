package protocol

import (
	"context"
	"errors"
	"fmt"

	"github.com/retain-dev/retain/core"
	"github.com/retain-dev/retain/core/checkpoint"
	"github.com/retain-dev/retain/core/lance"
	"github.com/retain-dev/retain/internal/failpoint"
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
	Path         string        `json:"path"`
	Tag          string        `json:"tag"`
	CheckpointID checkpoint.ID `json:"checkpoint_id"`
	Name         string        `json:"name,omitempty"`
	Branch       string        `json:"branch,omitempty"`
	Version      uint64        `json:"version,omitempty"`
	Why          string        `json:"why,omitempty"`
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
	OperationID  string        `json:"operation_id"`
	CheckpointID checkpoint.ID `json:"checkpoint_id"`
	Name         string        `json:"name"`
	Outcome      string        `json:"outcome"`
	TagsDeleted  []string      `json:"tags_deleted,omitempty"`
}

// Report is reconcile's result.
type Report struct {
	RegistryVersion checkpoint.Version `json:"registry_version"`
	Tables          []string           `json:"tables"`
	Sidecars        []SidecarResult    `json:"sidecars"`
	Repaired        []PinEvent         `json:"repaired"`
	Reclaimed       []PinEvent         `json:"reclaimed"`
	Conflicts       []Conflict         `json:"conflicts"`
}

// Reconcile runs reconcile with the zero Options.
func Reconcile(ctx context.Context, s *core.Store, loc core.Location) (*Report, error) {
	return Options{}.Reconcile(ctx, s, loc)
}

// Reconcile brings the pins in line with the registry, under the claim:
// it resolves every sidecar first (finish or roll back), repairs missing
// pins of live checkpoints after re-validating their physical refs, and
// deletes ogcp_ tags no live checkpoint explains. Conflicts are reported
// and fail closed: nothing more is done on that table. With conflicts the
// error is ErrConflicts and the report says which.
func (o Options) Reconcile(ctx context.Context, s *core.Store, loc core.Location) (rep *Report, err error) {
	reg := checkpoint.Open(s, checkpoint.Options{Scope: o.scope(loc)})
	h, err := acquire(ctx, s, loc, o, "reconcile", "reconcile-"+string(checkpoint.NewID()))
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
	err = o.withGates(ctx, s, loc, func(ctx context.Context) error { return reconcile(ctx, s, reg, o.scope(loc), rep, false) })
	if err != nil {
		return rep, err
	}
	return rep, conflictsError(rep)
}

// ReconcileHeld runs reconcile under a claim the caller already holds
// (cleanup run): no acquire, no release, no failpoints of its own. The
// caller must hold the store's claim for the whole call. With conflicts
// the error is ErrConflicts and the report says which.
func (o Options) ReconcileHeld(ctx context.Context, s *core.Store, loc core.Location) (*Report, error) {
	reg := checkpoint.Open(s, checkpoint.Options{Scope: o.scope(loc)})
	rep := &Report{Sidecars: []SidecarResult{}, Repaired: []PinEvent{}, Reclaimed: []PinEvent{}, Conflicts: []Conflict{}}
	err := o.withGates(ctx, s, loc, func(ctx context.Context) error { return reconcile(ctx, s, reg, o.scope(loc), rep, false) })
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
func reconcile(ctx context.Context, s *core.Store, reg *checkpoint.Registry, scope core.Scope, rep *Report, readOnly bool) error {
	v, snap, err := reg.HeadUnverified(ctx) // held to its record below, as a conflict
	if err != nil {
		return err
	}
	rep.RegistryVersion = v
	rds := registryDataset(s)
	// The head must be the one its commit recorded: a rewritten, flipped
	// or rolled-back head would explain pins it should not.
	var hm *checkpoint.HeadMismatch
	check, err := reg.CheckHead(ctx, v, snap)
	if errors.As(err, &hm) {
		rep.Conflicts = append(rep.Conflicts, Conflict{Kind: ConflictAuthority, Path: checkpoint.RegistryPath, Detail: hm.Error()})
	} else if err != nil {
		return err
	}

	// Sidecars: under the claim no create runs, so every sidecar belongs
	// to a create that died. A rollback needs positive evidence that the
	// commit never landed (judgeSidecar); sidecars that cannot be read or
	// resolved keep their tags (in flight).
	inFlight := map[checkpoint.ID]bool{}
	rolledBack := map[checkpoint.ID]bool{}
	type sidecarAction struct {
		key     string
		sc      *Sidecar
		outcome string
	}
	var sidecars []sidecarAction
	keys, err := listSidecars(ctx, s)
	if err != nil {
		return err
	}
	for _, key := range keys {
		sc, err := readSidecar(ctx, s, key)
		if err != nil {
			rep.Conflicts = append(rep.Conflicts, Conflict{Kind: ConflictSidecar, Path: key, Detail: err.Error()})
			continue
		}
		outcome, detail, err := judgeSidecar(ctx, reg, v, snap, sc)
		if err != nil {
			return err
		}
		switch outcome {
		case SidecarRolledBack:
			rolledBack[sc.CheckpointID] = true
		case "":
			inFlight[sc.CheckpointID] = true
			rep.Conflicts = append(rep.Conflicts, Conflict{Kind: ConflictAuthority, Path: key, Detail: detail})
			continue
		}
		sidecars = append(sidecars, sidecarAction{key: key, sc: sc, outcome: outcome})
	}

	paths, err := DiscoverTables(ctx, s)
	if err != nil {
		return err
	}
	rep.Tables = paths
	present := map[string]bool{}
	for _, p := range paths {
		present[p] = true
	}
	// explained[root][tag]: the pins live checkpoints need.
	explained := map[string]map[string]bool{}
	explain := func(root, tag string) {
		if explained[root] == nil {
			explained[root] = map[string]bool{}
		}
		explained[root][tag] = true
	}
	type registryRepair struct {
		cp checkpoint.Checkpoint
		rp PinHealth
	}
	var regPins []registryRepair
	type rowRepair struct {
		cp  checkpoint.Checkpoint
		row checkpoint.Row
		tag string
	}
	var rows []rowRepair
	for _, cp := range snap.Live() {
		rp, err := registryPin(ctx, reg, cp)
		if err != nil {
			return err
		}
		if rp.Tag == "" {
			// The version that published a live checkpoint is gone: the
			// registry lost part of its history.
			rep.Conflicts = append(rep.Conflicts, Conflict{Kind: ConflictAuthority, Path: checkpoint.RegistryPath, Detail: fmt.Sprintf("checkpoint %s (%s): %s", cp.ID, cp.Name, rp.Detail)})
			// Keep every registry pin of it: nothing explains which.
			names, _ := tagsWithPrefix(ctx, rds, checkpoint.PinTagPrefix(cp.ID))
			for _, n := range names {
				explain(checkpoint.RegistryPath, n)
			}
		} else {
			explain(checkpoint.RegistryPath, rp.Tag)
			regPins = append(regPins, registryRepair{cp: cp, rp: rp})
		}
		for _, r := range cp.Rows {
			tag, err := checkpoint.TablePinTag(cp.ID, r.Pin)
			if err != nil {
				return err
			}
			explain(r.Path, tag)
			rows = append(rows, rowRepair{cp: cp, row: r, tag: tag})
		}
	}

	// Every reserved tag that no live checkpoint or unresolved sidecar
	// explains: reclaimable only with positive evidence (judgeTag). One
	// pin the registry cannot account for puts every deletion in doubt.
	var reclaims []reclaim
	unreadable := map[string]bool{}
	for _, root := range append([]string{checkpoint.RegistryPath}, paths...) {
		ds, err := lance.Open(s, root)
		if err != nil {
			return err
		}
		ts, err := ds.ListTags(ctx)
		var mal *lance.MalformedRefsError
		if errors.As(err, &mal) {
			for _, k := range mal.Keys() {
				rep.Conflicts = append(rep.Conflicts, Conflict{Kind: ConflictMalformedTag, Path: root, Tag: k, Detail: "unreadable tag file; reconcile does not reclaim on a table it cannot fully read"})
			}
			unreadable[root] = true
			continue
		} else if errors.Is(err, core.ErrNotFound) {
			continue
		} else if err != nil {
			return err
		}
		for _, t := range ts {
			if !checkpoint.IsReservedTag(t.Name) || explained[root][t.Name] {
				continue
			}
			pt, err := checkpoint.ParsePinTag(t.Name)
			if err != nil {
				rep.Conflicts = append(rep.Conflicts, Conflict{Kind: ConflictUnknownReserved, Path: root, Tag: t.Name, Detail: "a tag in the reserved ogcp_ namespace that is not a v1 pin tag: reported, never deleted"})
				continue
			}
			if inFlight[pt.CheckpointID] {
				continue
			}
			why, c := judgeTag(snap, rolledBack, root, t, pt)
			if c != nil {
				rep.Conflicts = append(rep.Conflicts, *c)
				continue
			}
			reclaims = append(reclaims, reclaim{ds: ds, root: root, tag: t, id: pt.CheckpointID, why: why})
		}
	}
	if readOnly || authorityLost(rep) {
		return nil // touch nothing: conflictsError names the way out
	}

	// Act. The head proved itself: a record that lags (a commit whose
	// record write was lost) is settled first, so registry cleanup never
	// removes a version the chain from it to the head needs.
	if check != checkpoint.HeadRecordCurrent && snap.Format == checkpoint.Format && v > 0 {
		if err := reg.WriteHeadRecord(ctx, v, snap); err != nil {
			return fmt.Errorf("settling the registry's head record: %w", err)
		}
	}
	// Sidecars first.
	rolledBackTags := map[string]bool{} // "root:tag", deleted with their sidecar
	for _, a := range sidecars {
		res := SidecarResult{OperationID: a.sc.OperationID, CheckpointID: a.sc.CheckpointID, Name: a.sc.Name, Outcome: a.outcome}
		if a.outcome == SidecarRolledBack {
			tags, ok := rollBackSidecar(ctx, s, rds, a.sc, rep)
			if !ok {
				delete(rolledBack, a.sc.CheckpointID)
				inFlight[a.sc.CheckpointID] = true
				continue // keep the sidecar: it still explains what is left
			}
			res.TagsDeleted = tags
			for _, t := range tags {
				rolledBackTags[t] = true
			}
		}
		if err := s.Delete(ctx, a.key, core.DeleteOptions{}); err != nil && !errors.Is(err, core.ErrNotFound) {
			return err
		}
		rep.Sidecars = append(rep.Sidecars, res)
	}
	failpoint.Hit(FPReconcileAfterSidecars)

	commits := commitChecks{}
	conflicted := map[string]bool{}
	conflict := func(c Conflict) {
		rep.Conflicts = append(rep.Conflicts, c)
		if c.Path != "" {
			conflicted[c.Path] = true
		}
	}
	for _, r := range regPins {
		ref, _ := checkpoint.ParseRef(r.rp.PhysicalRef)
		if st, detail := tagHealth(ctx, rds, r.rp); st == PinMissing {
			if err := ensureRegistryTag(ctx, rds, r.rp.Tag, ref, recordOf(r.cp, nil)); err != nil {
				conflict(Conflict{Kind: ConflictWrongTarget, Path: checkpoint.RegistryPath, Tag: r.rp.Tag, Detail: err.Error()})
			} else {
				rep.Repaired = append(rep.Repaired, PinEvent{Path: checkpoint.RegistryPath, Tag: r.rp.Tag, CheckpointID: r.cp.ID, Name: r.cp.Name, Branch: checkpoint.MainBranch, Version: r.rp.Version})
			}
		} else if st != PinOK {
			conflict(Conflict{Kind: ConflictWrongTarget, Path: checkpoint.RegistryPath, Tag: r.rp.Tag, Detail: detail})
		}
	}
	for _, r := range rows {
		if !present[r.row.Path] {
			conflict(Conflict{Kind: ConflictTableMissing, Path: r.row.Path, Tag: r.tag, Detail: fmt.Sprintf("checkpoint %s (%s) pins %s version %d, but the table is gone; restore it from a backup, or give the pin up with `%s`", r.cp.ID, r.cp.Name, r.row.Path, r.row.Version, DropLostCommand(r.cp.ID, r.row.Path))})
			continue
		}
		if c := repairRow(ctx, s, r.cp, r.row, r.tag, rep, commits); c != nil {
			conflict(*c)
		}
	}
	failpoint.Hit(FPReconcileAfterRepair)

	// Reclaim. Tables with a conflict are left alone.
	for _, rc := range reclaims {
		if conflicted[rc.root] || unreadable[rc.root] || inFlight[rc.id] || rolledBackTags[rc.root+":"+rc.tag.Name] {
			continue
		}
		ifVersion := ""
		if s.Require(core.FeatureDeleteIfVersion, scope) == nil {
			ifVersion = rc.tag.Info.Version
		}
		if err := rc.ds.DeleteTag(ctx, rc.tag.Name, ifVersion); err != nil && !errors.Is(err, lance.ErrTagNotFound) {
			rep.Conflicts = append(rep.Conflicts, Conflict{Kind: ConflictWrongTarget, Path: rc.root, Tag: rc.tag.Name, Detail: err.Error()})
			continue
		}
		rep.Reclaimed = append(rep.Reclaimed, PinEvent{Path: rc.root, Tag: rc.tag.Name, CheckpointID: rc.id, Branch: branchOf(rc.tag), Version: rc.tag.Version, Why: rc.why})
	}
	failpoint.Hit(FPReconcileAfterReclaim)
	return nil
}

// repairRow checks one live row's tag and recreates it if it is missing
// and the version is still the commit the row names.
func repairRow(ctx context.Context, s *core.Store, cp checkpoint.Checkpoint, r checkpoint.Row, tag string, rep *Report, commits commitChecks) *Conflict {
	ds, err := lance.Open(s, r.Path)
	if err != nil {
		return &Conflict{Kind: ConflictPinLost, Path: r.Path, Tag: tag, Detail: err.Error()}
	}
	ref, err := lance.ParsePhysRef(r.PhysicalRef)
	if err != nil {
		return &Conflict{Kind: ConflictPinLost, Path: r.Path, Tag: tag, Detail: err.Error()}
	}
	p := PinHealth{Kind: "table", Path: r.Path, Branch: r.Branch, Version: r.Version, PhysicalRef: r.PhysicalRef, Tag: tag}
	st, detail := tagHealth(ctx, ds, p)
	if st != PinOK && st != PinMissing {
		return &Conflict{Kind: ConflictWrongTarget, Path: r.Path, Tag: tag, Detail: detail}
	}
	// Present or not, the tag is only worth something while the version
	// is still the commit the row names: what cleanup would refuse,
	// reconcile reports, with the way out.
	if l, err := commits.lost(ctx, s, r); err != nil {
		return &Conflict{Kind: ConflictPinLost, Path: r.Path, Tag: tag, Detail: fmt.Sprintf("checkpoint %s (%s): version %d on %s cannot be read: %v; make it readable, then reconcile again", cp.ID, cp.Name, r.Version, r.Branch, err)}
	} else if l.kind != "" {
		return &Conflict{Kind: l.kind, Path: r.Path, Tag: tag, Detail: fmt.Sprintf("checkpoint %s (%s): %s; %s", cp.ID, cp.Name, l.why, l.wayOut(cp.ID, r.Path))}
	}
	if st == PinOK {
		return nil
	}
	if err := ensureTableTag(ctx, ds, tag, r.Pin, ref.Size, recordOf(cp, &r.Pin)); err != nil {
		return &Conflict{Kind: ConflictWrongTarget, Path: r.Path, Tag: tag, Detail: err.Error()}
	}
	rep.Repaired = append(rep.Repaired, PinEvent{Path: r.Path, Tag: tag, CheckpointID: cp.ID, Name: cp.Name, Branch: r.Branch, Version: r.Version})
	return nil
}
