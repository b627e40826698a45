package checkpoint

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/retain-dev/retain/core/authz"
	"github.com/retain-dev/retain/core/checkpoint/registry"
	"github.com/retain-dev/retain/core/failpoint"
	"github.com/retain-dev/retain/core/internal/fanout"
	"github.com/retain-dev/retain/core/lance"
	"github.com/retain-dev/retain/core/storage"
)

// Failpoints of the delete protocol, in order.
const (
	FPDeleteAfterClaim   = "delete/after-claim"
	FPDeleteAfterCommit  = "delete/after-commit"
	FPDeleteAfterRelease = "delete/after-release"
	FPDeleteMidTags      = "delete/mid-tags"
	FPDeleteAfterTags    = "delete/after-tags"
)

// DeleteFailpoints lists the delete failpoints in protocol order.
var DeleteFailpoints = []string{FPDeleteAfterClaim, FPDeleteAfterCommit, FPDeleteAfterRelease, FPDeleteMidTags, FPDeleteAfterTags}

// Deleted is what Delete returns.
type Deleted struct {
	ID   registry.ID `json:"id"`
	Name string      `json:"name"`
	// AlreadyTombstoned: the checkpoint was deleted before (by
	// OperationID); this call only reclaimed tags.
	AlreadyTombstoned bool             `json:"already_tombstoned,omitempty"`
	OperationID       string           `json:"delete_operation_id"`
	RegistryVersion   registry.Version `json:"registry_version"`
	TagsDeleted       []string         `json:"tags_deleted"`
	// TagErrors: tag deletes that failed. They only over-retain; reconcile
	// reclaims them.
	TagErrors []string `json:"tag_errors,omitempty"`
	// Reconciled is what the reconcile run before the delete did.
	Reconciled *Report `json:"reconciled,omitempty"`
}

// Delete deletes a checkpoint with the zero Options.
func Delete(ctx context.Context, s *storage.Store, nameOrID string) (*Deleted, error) {
	return Options{}.Delete(ctx, s, nameOrID)
}

// Delete runs the delete protocol. Like every destructive operation it
// first reconciles under the same claim (sidecars, missing pins, orphan
// tags), and refuses, deleting nothing, if that finds a conflict. Then,
// under the claim, one registry commit
// tombstones reservation, header and rows with a fresh
// delete_operation_id; release; then every pin tag of the checkpoint is
// deleted, idempotently. A tag delete that fails only over-retains.
func (o Options) Delete(ctx context.Context, s *storage.Store, nameOrID string) (res *Deleted, err error) {
	// Before the claim: a denial writes nothing.
	if err := authz.Check(ctx, authz.Request{Action: authz.ActionCheckpointDelete, Store: authz.StoreName(s), Checkpoint: nameOrID}); err != nil {
		return nil, err
	}
	reg := registry.Open(s, registry.Options{Scope: o.scope(s)})
	op := "delete-" + string(registry.NewID())
	h, err := acquire(ctx, s, o, "checkpoint-delete", op)
	if err != nil {
		return nil, err
	}
	released := false
	defer func() {
		if !released {
			if rerr := h.Release(context.WithoutCancel(ctx)); rerr != nil && err == nil {
				err = rerr
			}
		}
	}()
	failpoint.Hit(FPDeleteAfterClaim)
	actor := o.Actor
	if actor == "" {
		actor = h.Payload().Actor
	}
	var cp registry.Checkpoint
	pre := &Report{Sidecars: []SidecarResult{}, Repaired: []PinEvent{}, Reclaimed: []PinEvent{}, Conflicts: []Conflict{}}
	err = o.withGates(ctx, s, func(ctx context.Context) error {
		if err := reconcile(ctx, s, reg, o.scope(s), pre, false); err != nil {
			return err
		}
		if authorityLost(pre) {
			return refusal("delete", nameOrID, ErrAuthorityLost, "the reconcile run before deleting found pins no intact registry record explains; nothing was deleted", authorityError(pre))
		}
		if len(pre.Conflicts) > 0 {
			return errorf("delete", nameOrID, ErrConflicts,
				"the reconcile run before deleting found %d conflict(s); nothing was deleted: run `retain reconcile` to see them", len(pre.Conflicts))
		}
		for attempt := 0; ; attempt++ {
			v, snap, err := reg.Head(ctx)
			if err != nil {
				return err
			}
			if cp, err = snap.Lookup(nameOrID); err != nil {
				return err
			}
			if cp.State == registry.Tombstoned {
				res = &Deleted{ID: cp.ID, Name: cp.Name, AlreadyTombstoned: true, RegistryVersion: v}
				if cp.Tombstone != nil {
					res.OperationID = cp.Tombstone.DeleteOperationID
				}
				return nil
			}
			draft := snap.Next()
			if _, err := draft.Tombstone(cp.ID, registry.Deletion{OperationID: op, At: time.Now().UTC().Truncate(time.Millisecond), Actor: actor}); err != nil {
				return err
			}
			if err := h.Verify(ctx); err != nil {
				return err
			}
			ref, err := reg.Commit(ctx, v, draft)
			if errors.Is(err, registry.ErrConflict) && attempt < o.retries() {
				continue
			}
			if err != nil {
				return err
			}
			res = &Deleted{ID: cp.ID, Name: cp.Name, OperationID: op, RegistryVersion: ref.Version}
			return nil
		}
	})
	if err != nil {
		return nil, err
	}
	res.Reconciled = pre
	failpoint.Hit(FPDeleteAfterCommit)
	released = true
	// Committed: a signal now must not leave the claim held.
	if rerr := h.Release(context.WithoutCancel(ctx)); rerr != nil {
		res.TagErrors = append(res.TagErrors, "releasing the claim: "+rerr.Error())
	}
	failpoint.Hit(FPDeleteAfterRelease)
	res.TagsDeleted, res.TagErrors = deletePins(ctx, s, cp, res.TagErrors)
	failpoint.Hit(FPDeleteAfterTags)
	return res, nil
}

// deletePins deletes every tag named with cp's pin prefix in each of its
// tables and in the registry: the rows' tags and any leftover of an
// earlier attempt. One listing per table, all side by side; the first
// tag goes alone (FPDeleteMidTags stops there), the rest side by side
// through the store's limiter: a checkpoint over hundreds of tables costs
// a few round trips, not three per table.
func deletePins(ctx context.Context, s *storage.Store, cp registry.Checkpoint, errs []string) ([]string, []string) {
	roots := []string{registry.RegistryPath}
	seen := map[string]bool{}
	for _, r := range cp.Rows {
		if !seen[r.Path] {
			seen[r.Path] = true
			roots = append(roots, r.Path)
		}
	}
	type listing struct {
		ds    *lance.Dataset
		names []string
		err   string
	}
	ls, err := fanout.Map(ctx, s.Parallelism(), len(roots), func(ctx context.Context, i int) (listing, error) {
		ds, err := lance.Open(s, roots[i])
		if err != nil {
			return listing{err: roots[i] + ": " + err.Error()}, nil
		}
		names, err := tagsWithPrefix(ctx, ds, registry.PinTagPrefix(cp.ID))
		if err != nil {
			return listing{err: roots[i] + ": " + err.Error()}, nil
		}
		return listing{ds: ds, names: names}, nil
	})
	if err != nil {
		return nil, append(errs, "listing the pin tags: "+err.Error())
	}
	type job struct {
		root int
		name string
	}
	var jobs []job
	for i, l := range ls {
		if l.err != "" {
			errs = append(errs, l.err)
		}
		for _, n := range l.names {
			jobs = append(jobs, job{i, n})
		}
	}
	// Every job's outcome; one the fan-out never started (a cancel) says
	// so, never counted as deleted.
	results := make([]error, len(jobs))
	for i := range results {
		results[i] = errNotRun
	}
	del := func(ctx context.Context, i int) error {
		results[i] = deleteTag(ctx, ls[jobs[i].root].ds, jobs[i].name)
		return nil
	}
	// One at a time until a tag is gone (the mid-tags failpoint stops
	// exactly there), then the rest side by side.
	next := 0
	for next < len(jobs) && ctx.Err() == nil {
		del(ctx, next)
		next++
		if results[next-1] == nil {
			failpoint.Hit(FPDeleteMidTags)
			break
		}
	}
	if rest := jobs[next:]; len(rest) > 0 && ctx.Err() == nil {
		_ = fanout.Each(ctx, s.Parallelism(), len(rest), func(ctx context.Context, i int) error { return del(ctx, next+i) })
	}
	var deleted []string
	for i, j := range jobs {
		root := roots[j.root]
		if results[i] != nil {
			why := results[i].Error()
			if results[i] == errNotRun && ctx.Err() != nil {
				why += ": " + ctx.Err().Error()
			}
			errs = append(errs, root+": "+j.name+": "+why)
			continue
		}
		deleted = append(deleted, root+":"+j.name)
	}
	return deleted, errs
}

// errNotRun: a pin tag delete a cancel kept from starting; reconcile
// reclaims the tag later.
var errNotRun = errors.New("not deleted: stopped before its turn")

// tagsWithPrefix lists the tag files under ds whose names begin with
// prefix (pin tag names are plain ASCII: the file is <name>.json).
func tagsWithPrefix(ctx context.Context, ds *lance.Dataset, prefix string) ([]string, error) {
	dir := ds.Key("_refs/tags/")
	objs, err := ds.Store.List(ctx, dir+prefix, 10_000)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, o := range objs {
		rel := strings.TrimPrefix(o.Key, dir)
		if name, ok := strings.CutSuffix(rel, ".json"); ok && !strings.Contains(name, "/") {
			out = append(out, name)
		}
	}
	return out, nil
}
