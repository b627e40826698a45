package checkpoint

import (
	"context"
	"errors"
	"fmt"

	"github.com/retain-dev/retain/core/checkpoint/registry"
	"github.com/retain-dev/retain/core/lance"
	"github.com/retain-dev/retain/core/storage"
)

// The registry is the authority that says which pins may go. Reconcile
// deletes a pin only on positive evidence: its checkpoint is tombstoned in
// the registry, or its own create's sidecar was rolled back because the
// commit provably never landed. A pin the registry cannot account for —
// its checkpoint unknown, or live without a row naming the pin — means
// the registry lost or rewrote history (an operator's rm, a lifecycle
// rule, a bad restore), so the pin is kept and the store refuses every
// deletion until `retain registry recover` rebuilds the checkpoints.

// RecoverHint is the one command that gets a store out of ErrAuthorityLost.
const RecoverHint = "run `retain registry verify STORE` to see what is missing, then `retain registry recover STORE` to rebuild the checkpoints from their surviving pins"

// authorityLost reports whether rep holds a conflict that puts the
// registry's authority in doubt.
func authorityLost(rep *Report) bool {
	for _, c := range rep.Conflicts {
		if c.Kind == ConflictAuthority {
			return true
		}
	}
	return false
}

// authorityError is reconcile's error when the authority is in doubt: it
// matches ErrAuthorityLost and ErrConflicts, and names the pins.
func authorityError(rep *Report) error {
	var first Conflict
	n := 0
	for _, c := range rep.Conflicts {
		if c.Kind == ConflictAuthority {
			if n == 0 {
				first = c
			}
			n++
		}
	}
	where := first.Path
	if first.Tag != "" {
		where += ":" + first.Tag
	}
	return &Error{Op: "reconcile", Key: where, Err: ErrAuthorityLost, Kind: kindOf[ErrAuthorityLost],
		Msg:   fmt.Sprintf("%d pin(s) no intact registry record explains (first: %s); nothing was reclaimed: %s", n, first.Detail, RecoverHint),
		Cause: ErrConflicts}
}

// judgeSidecar decides what a dead create's sidecar means, from evidence:
// finished (the head has its checkpoint), rolled back (the commit
// provably never landed: the head is still the one it expected, or the
// version it meant to write holds another commit), or "" with a detail
// when the registry contradicts it (older than the head the create saw,
// or holding its commit without its checkpoint): the tags stay.
func judgeSidecar(ctx context.Context, reg *registry.Registry, head registry.Version, snap *registry.Snapshot, sc *Sidecar) (string, string, error) {
	if _, err := snap.ByID(sc.CheckpointID); err == nil {
		return SidecarFinished, "", nil
	}
	switch {
	case head < sc.ExpectedHead:
		return "", fmt.Sprintf("the create of checkpoint %s (%s) saw registry version %d, but the registry's head is now %d: registry versions were deleted", sc.CheckpointID, sc.Name, sc.ExpectedHead, head), nil
	case head == sc.ExpectedHead:
		return SidecarRolledBack, "", nil
	}
	ref, err := registry.ParseRef(sc.RegistryRef)
	if err != nil {
		return "", fmt.Sprintf("sidecar of checkpoint %s (%s): %v", sc.CheckpointID, sc.Name, err), nil
	}
	switch err := reg.VerifyRef(ctx, ref); {
	case errors.Is(err, registry.ErrRefMismatch):
		return SidecarRolledBack, "", nil // another commit won that version
	case errors.Is(err, storage.ErrNotFound):
		return "", fmt.Sprintf("the create of checkpoint %s (%s) meant to write registry version %d, which is missing below the head %d: registry versions were deleted", sc.CheckpointID, sc.Name, ref.Version, head), nil
	case errors.Is(err, registry.ErrCorruptRegistry):
		return "", fmt.Sprintf("the create of checkpoint %s (%s): registry version %d is unreadable: %v", sc.CheckpointID, sc.Name, ref.Version, err), nil
	case err != nil:
		return "", "", err
	}
	return "", fmt.Sprintf("registry version %d holds the commit of checkpoint %s (%s), but the head (version %d) does not know it: the registry was rewritten", ref.Version, sc.CheckpointID, sc.Name, head), nil
}

// rollBackSidecar deletes every tag a dead create may have written; ok is
// false (conflicts reported) when any delete failed.
func rollBackSidecar(ctx context.Context, s *storage.Store, rds *lance.Dataset, sc *Sidecar, rep *Report) ([]string, bool) {
	var deleted []string
	ok := true
	for _, p := range sc.Tables {
		ds, err := lance.Open(s, p.Pin.Path)
		if err == nil {
			err = deleteTag(ctx, ds, p.Tag)
		}
		if err != nil {
			ok = false
			rep.Conflicts = append(rep.Conflicts, Conflict{Kind: ConflictSidecar, Path: p.Pin.Path, Tag: p.Tag, Detail: err.Error()})
			continue
		}
		deleted = append(deleted, p.Pin.Path+":"+p.Tag)
	}
	if err := deleteTag(ctx, rds, sc.RegistryPinTag); err != nil {
		ok = false
		rep.Conflicts = append(rep.Conflicts, Conflict{Kind: ConflictSidecar, Path: registry.RegistryPath, Tag: sc.RegistryPinTag, Detail: err.Error()})
	} else {
		deleted = append(deleted, registry.RegistryPath+":"+sc.RegistryPinTag)
	}
	return deleted, ok
}

// reclaim is one tag reconcile may delete once the whole store is read.
type reclaim struct {
	ds   *lance.Dataset
	root string
	tag  lance.Tag
	id   registry.ID
	why  string
}

// judgeTag decides an unexplained pin tag: the reason to reclaim it, or
// the authority conflict that keeps it.
func judgeTag(snap *registry.Snapshot, rolledBack map[registry.ID]bool, root string, t lance.Tag, pt registry.PinTag) (string, *Conflict) {
	if rolledBack[pt.CheckpointID] {
		return "its checkpoint's create was rolled back", nil
	}
	c, err := snap.ByID(pt.CheckpointID)
	switch {
	case err != nil:
		return "", &Conflict{Kind: ConflictAuthority, Path: root, Tag: t.Name, Detail: fmt.Sprintf(
			"pin of checkpoint %s (%s version %d), which registry version %d does not know: the registry lost it", pt.CheckpointID, branchOf(t), t.Version, snap.Version)}
	case c.State == registry.Tombstoned:
		return "its checkpoint is deleted", nil
	}
	for _, l := range c.Lost {
		// drop-lost committed the row away; its tag delete came after
		// (and may not have happened).
		if tag, err := registry.TablePinTag(c.ID, l.Pin); err == nil && tag == t.Name && l.Path == root {
			return "its checkpoint gave this pin up (drop-lost " + l.OperationID + ")", nil
		}
	}
	return "", &Conflict{Kind: ConflictAuthority, Path: root, Tag: t.Name, Detail: fmt.Sprintf(
		"pin of live checkpoint %s (%s) at %s version %d, which none of its rows in registry version %d names: the registry was rewritten", c.ID, c.Name, branchOf(t), t.Version, snap.Version)}
}

func branchOf(t lance.Tag) string {
	if t.Branch == "" {
		return registry.MainBranch
	}
	return t.Branch
}

// conflictsError is reconcile's error for its report: nil without
// conflicts, authorityError when the authority is in doubt, else
// ErrConflicts.
func conflictsError(rep *Report) error {
	switch {
	case len(rep.Conflicts) == 0:
		return nil
	case authorityLost(rep):
		return authorityError(rep)
	}
	return errorf("reconcile", "", ErrConflicts, "%d conflict(s) left untouched: see the report", len(rep.Conflicts))
}

// recordOf is the pin record of a pin of cp (p nil: its registry pin).
func recordOf(cp registry.Checkpoint, p *registry.Pin) registry.PinRecord {
	return registry.NewPinRecord(cp.ID, cp.Name, cp.SourceBranch, cp.CreatedAt, cp.Actor, len(cp.Rows), p)
}
