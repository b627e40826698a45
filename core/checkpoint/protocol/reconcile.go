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
	err = o.withGates(ctx, s, loc, func(ctx context.Context) error { return reconcile(ctx, s, reg, o.scope(loc), rep) })
	if err != nil {
		return rep, err
	}
	if len(rep.Conflicts) > 0 {
		return rep, errorf("reconcile", "", ErrConflicts, "%d conflict(s) left untouched: see the report", len(rep.Conflicts))
	}
	return rep, nil
}

// ReconcileHeld runs reconcile under a claim the caller already holds
// (cleanup run): no acquire, no release, no failpoints of its own. The
// caller must hold the store's claim for the whole call. With conflicts
// the error is ErrConflicts and the report says which.
func (o Options) ReconcileHeld(ctx context.Context, s *core.Store, loc core.Location) (*Report, error) {
	reg := checkpoint.Open(s, checkpoint.Options{Scope: o.scope(loc)})
	rep := &Report{Sidecars: []SidecarResult{}, Repaired: []PinEvent{}, Reclaimed: []PinEvent{}, Conflicts: []Conflict{}}
	err := o.withGates(ctx, s, loc, func(ctx context.Context) error { return reconcile(ctx, s, reg, o.scope(loc), rep) })
	if err != nil {
		return rep, err
	}
	if len(rep.Conflicts) > 0 {
		return rep, errorf("reconcile", "", ErrConflicts, "%d conflict(s) left untouched: see the report", len(rep.Conflicts))
	}
	return rep, nil
}

func reconcile(ctx context.Context, s *core.Store, reg *checkpoint.Registry, scope core.Scope, rep *Report) error {
	v, snap, err := reg.Head(ctx)
	if err != nil {
		return err
	}
	rep.RegistryVersion = v
	// In flight: under the claim no create runs, so every sidecar belongs
	// to a create that died. Sidecars we cannot resolve keep their tags.
	inFlight := map[checkpoint.ID]bool{}
	keys, err := listSidecars(ctx, s)
	if err != nil {
		return err
	}
	rds := registryDataset(s)
	for _, key := range keys {
		sc, err := readSidecar(ctx, s, key)
		if err != nil {
			rep.Conflicts = append(rep.Conflicts, Conflict{Kind: ConflictSidecar, Path: key, Detail: err.Error()})
			continue
		}
		res := SidecarResult{OperationID: sc.OperationID, CheckpointID: sc.CheckpointID, Name: sc.Name}
		if _, err := snap.ByID(sc.CheckpointID); err == nil {
			res.Outcome = SidecarFinished
		} else {
			res.Outcome = SidecarRolledBack
			failed := false
			for _, p := range sc.Tables {
				ds, err := lance.Open(s, p.Pin.Path)
				if err == nil {
					err = deleteTag(ctx, ds, p.Tag)
				}
				if err != nil {
					failed = true
					rep.Conflicts = append(rep.Conflicts, Conflict{Kind: ConflictSidecar, Path: p.Pin.Path, Tag: p.Tag, Detail: err.Error()})
					continue
				}
				res.TagsDeleted = append(res.TagsDeleted, p.Pin.Path+":"+p.Tag)
			}
			if err := deleteTag(ctx, rds, sc.RegistryPinTag); err != nil {
				failed = true
				rep.Conflicts = append(rep.Conflicts, Conflict{Kind: ConflictSidecar, Path: checkpoint.RegistryPath, Tag: sc.RegistryPinTag, Detail: err.Error()})
			} else {
				res.TagsDeleted = append(res.TagsDeleted, checkpoint.RegistryPath+":"+sc.RegistryPinTag)
			}
			if failed {
				inFlight[sc.CheckpointID] = true
				continue // keep the sidecar: it still explains what is left
			}
		}
		if err := s.Delete(ctx, key, core.DeleteOptions{}); err != nil && !errors.Is(err, core.ErrNotFound) {
			return err
		}
		rep.Sidecars = append(rep.Sidecars, res)
	}
	failpoint.Hit(FPReconcileAfterSidecars)

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
	conflicted := map[string]bool{}
	conflict := func(c Conflict) {
		rep.Conflicts = append(rep.Conflicts, c)
		if c.Path != "" {
			conflicted[c.Path] = true
		}
	}
	for _, cp := range snap.Live() {
		rp, err := registryPin(ctx, reg, cp)
		if err != nil {
			return err
		}
		if rp.Tag == "" {
			conflict(Conflict{Kind: ConflictRegistryVersion, Detail: fmt.Sprintf("checkpoint %s (%s): %s", cp.ID, cp.Name, rp.Detail)})
			// Keep every registry pin of it: nothing explains which.
			names, _ := tagsWithPrefix(ctx, rds, checkpoint.PinTagPrefix(cp.ID))
			for _, n := range names {
				explain(checkpoint.RegistryPath, n)
			}
		} else {
			explain(checkpoint.RegistryPath, rp.Tag)
			ref, _ := checkpoint.ParseRef(rp.PhysicalRef)
			if st, detail := tagHealth(ctx, rds, rp); st == PinMissing {
				if err := ensureRegistryTag(ctx, rds, rp.Tag, ref); err != nil {
					conflict(Conflict{Kind: ConflictWrongTarget, Path: checkpoint.RegistryPath, Tag: rp.Tag, Detail: err.Error()})
				} else {
					rep.Repaired = append(rep.Repaired, PinEvent{Path: checkpoint.RegistryPath, Tag: rp.Tag, CheckpointID: cp.ID, Name: cp.Name, Branch: checkpoint.MainBranch, Version: rp.Version})
				}
			} else if st != PinOK {
				conflict(Conflict{Kind: ConflictWrongTarget, Path: checkpoint.RegistryPath, Tag: rp.Tag, Detail: detail})
			}
		}
		for _, r := range cp.Rows {
			tag, err := checkpoint.TablePinTag(cp.ID, r.Pin)
			if err != nil {
				return err
			}
			explain(r.Path, tag)
			if !present[r.Path] {
				conflict(Conflict{Kind: ConflictTableMissing, Path: r.Path, Tag: tag, Detail: fmt.Sprintf("checkpoint %s (%s) pins %s version %d, but the table is gone", cp.ID, cp.Name, r.Path, r.Version)})
				continue
			}
			if c := repairRow(ctx, s, cp, r, tag, rep); c != nil {
				conflict(*c)
			}
		}
	}
	failpoint.Hit(FPReconcileAfterRepair)

	// Reclaim: every ogcp_ tag no live checkpoint or unresolved sidecar
	// explains. Tables with a conflict are left alone.
	for _, root := range append([]string{checkpoint.RegistryPath}, paths...) {
		if conflicted[root] {
			continue
		}
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
			ifVersion := ""
			if s.Require(core.FeatureDeleteIfVersion, scope) == nil {
				ifVersion = t.Info.Version
			}
			if err := ds.DeleteTag(ctx, t.Name, ifVersion); err != nil && !errors.Is(err, lance.ErrTagNotFound) {
				rep.Conflicts = append(rep.Conflicts, Conflict{Kind: ConflictWrongTarget, Path: root, Tag: t.Name, Detail: err.Error()})
				continue
			}
			why := "no live checkpoint or in-flight create names it"
			if c, err := snap.ByID(pt.CheckpointID); err == nil && c.State == checkpoint.Tombstoned {
				why = "its checkpoint is deleted"
			}
			b := t.Branch
			if b == "" {
				b = checkpoint.MainBranch
			}
			rep.Reclaimed = append(rep.Reclaimed, PinEvent{Path: root, Tag: t.Name, CheckpointID: pt.CheckpointID, Branch: b, Version: t.Version, Why: why})
		}
	}
	failpoint.Hit(FPReconcileAfterReclaim)
	return nil
}

// repairRow checks one live row's tag and recreates it if it is missing
// and the version is still the commit the row names.
func repairRow(ctx context.Context, s *core.Store, cp checkpoint.Checkpoint, r checkpoint.Row, tag string, rep *Report) *Conflict {
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
	switch st {
	case PinOK:
		return nil
	case PinMissing:
	default:
		return &Conflict{Kind: ConflictWrongTarget, Path: r.Path, Tag: tag, Detail: detail}
	}
	bds := ds
	if r.Branch != checkpoint.MainBranch {
		if bds, err = ds.Branch(r.Branch); err != nil {
			return &Conflict{Kind: ConflictPinLost, Path: r.Path, Tag: tag, Detail: err.Error()}
		}
	}
	got, err := bds.PhysRef(ctx, lance.Version{N: r.Version, Key: ref.Key})
	switch {
	case errors.Is(err, core.ErrNotFound):
		return &Conflict{Kind: ConflictPinLost, Path: r.Path, Tag: tag, Detail: fmt.Sprintf("checkpoint %s (%s): version %d on %s is gone; its tag cannot be recreated", cp.ID, cp.Name, r.Version, r.Branch)}
	case err != nil:
		return &Conflict{Kind: ConflictPinLost, Path: r.Path, Tag: tag, Detail: err.Error()}
	case !got.SameCommit(ref) || got.Size != ref.Size:
		return &Conflict{Kind: ConflictIncarnationChanged, Path: r.Path, Tag: tag, Detail: fmt.Sprintf("checkpoint %s (%s): version %d is another commit now (the table was recreated): the pin is not recreated on it", cp.ID, cp.Name, r.Version)}
	}
	if err := ensureTableTag(ctx, ds, tag, r.Pin, ref.Size); err != nil {
		return &Conflict{Kind: ConflictWrongTarget, Path: r.Path, Tag: tag, Detail: err.Error()}
	}
	rep.Repaired = append(rep.Repaired, PinEvent{Path: r.Path, Tag: tag, CheckpointID: cp.ID, Name: cp.Name, Branch: r.Branch, Version: r.Version})
	return nil
}
