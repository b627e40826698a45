package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/retain-dev/retain/core/authz"
	"github.com/retain-dev/retain/core/checkpoint/registry"
	"github.com/retain-dev/retain/core/internal/glob"
	"github.com/retain-dev/retain/core/rotation"
	"github.com/retain-dev/retain/core/storage"
)

// Group-by values of PruneRequest.GroupBy.
const (
	GroupByBranch = "branch" // the default: each source branch is its own series
	GroupByNone   = "none"
)

// PruneRequest says which checkpoints a prune judges and by which rules.
type PruneRequest struct {
	// Match: name patterns (internal/glob: * matches any run, '/'
	// included). Required: a prune never judges checkpoints nobody named,
	// so a hand-made "release-1.0" is safe from an hourly rotation.
	Match []string
	// Filter, when set, narrows the matched checkpoints further: only
	// those it accepts are judged (the daemon's schedules judge only the
	// checkpoints their series took).
	Filter func(cp registry.Checkpoint) bool `json:"-"`
	// Policy: the keep rules, restic's (package rotation).
	Policy rotation.Policy
	// GroupBy: GroupByBranch (default) applies the policy to the
	// checkpoints of each source branch apart, as restic groups by host
	// and paths; GroupByNone to all matched checkpoints at once.
	GroupBy string
	// DryRun decides and reports without a claim or a write.
	DryRun bool
	// Now judges "the future" (rotation.NewerThanNow); default time.Now().
	Now time.Time
	// Audit, when set, is called under the claim with the checkpoints
	// about to be removed before the registry commit (an error stops the
	// prune, nothing removed: no line, no removal) and again after it with
	// done set. retention.PruneCheckpoints writes the store's audit log.
	Audit func(ctx context.Context, op, actor string, removing []PruneDecision, done bool) error
}

// PruneDecision is the verdict on one matched checkpoint.
type PruneDecision struct {
	Name         string      `json:"name"`
	ID           registry.ID `json:"id"`
	SourceBranch string      `json:"source_branch"`
	CreatedAt    time.Time   `json:"created_at"`
	// Group is the series the checkpoint was judged in (its source
	// branch, or "" with GroupByNone).
	Group string `json:"group"`
	Keep  bool   `json:"keep"`
	// Reasons: every rule that kept it; empty when removed.
	Reasons []string `json:"reasons"`
}

// Pruned is what Prune returns.
type Pruned struct {
	Policy  string   `json:"policy"`
	Match   []string `json:"match"`
	GroupBy string   `json:"group_by"`
	DryRun  bool     `json:"dry_run"`
	// Decisions: every matched live checkpoint, by group, newest first.
	Decisions []PruneDecision `json:"decisions"`
	Kept      int             `json:"kept"`
	Removed   int             `json:"removed"`
	// OperationID and RegistryVersion are the tombstoning commit's; empty
	// when nothing was removed.
	OperationID     string           `json:"delete_operation_id,omitempty"`
	RegistryVersion registry.Version `json:"registry_version"`
	TagsDeleted     []string         `json:"tags_deleted"`
	// TagErrors only over-retain; reconcile reclaims them.
	TagErrors []string `json:"tag_errors,omitempty"`
	// Warnings: what failed after the commit other than a tag (the
	// checkpoints are removed): the audit's closing line, the claim's
	// release.
	Warnings   []string `json:"warnings,omitempty"`
	Reconciled *Report  `json:"reconciled,omitempty"`
}

// ErrNoMatch is Prune's refusal of a request with no --match pattern.
var ErrNoMatch = errors.New("prune needs at least one --match pattern naming the checkpoints it rotates (e.g. 'hourly/*', or '*' for all)")

// Prune applies req's keep policy to the live checkpoints whose names
// match and deletes the others through the delete protocol, all in one
// operation: one claim, one reconcile, one registry commit tombstoning
// every removed checkpoint, release, then their pin tags. The decisions
// are made again under the claim, so a checkpoint created or deleted
// meanwhile is judged as it is. With DryRun nothing is claimed or written.
func (o Options) Prune(ctx context.Context, s *storage.Store, req PruneRequest) (res *Pruned, err error) {
	pats, err := req.check()
	if err != nil {
		return nil, err
	}
	if req.Now.IsZero() {
		req.Now = time.Now()
	}
	res = &Pruned{Policy: req.Policy.String(), Match: req.Match, GroupBy: req.GroupBy, DryRun: req.DryRun, TagsDeleted: []string{}}
	reg := registry.Open(s, registry.Options{Scope: o.scope(s)})
	if req.DryRun {
		v, snap, err := reg.Head(ctx)
		if err != nil {
			return nil, err
		}
		res.RegistryVersion = v
		res.Decisions, err = decidePrune(snap, pats, req)
		if err != nil {
			return nil, err
		}
		res.count()
		return res, nil
	}
	// Before the claim: a denial writes nothing. The removals are judged
	// on the head as it is now and each authorized as a delete, so a
	// forbidden one refuses before the claim and the reconcile too; under
	// the claim they are judged and authorized again.
	if err := authz.Check(ctx, authz.Request{Action: authz.ActionCheckpointPrune, Store: authz.StoreName(s)}); err != nil {
		return nil, err
	}
	if _, snap, err := reg.Head(ctx); err != nil {
		return nil, err
	} else if ds, err := decidePrune(snap, pats, req); err != nil {
		return nil, err
	} else if err := authorizeRemovals(ctx, s, ds); err != nil {
		return nil, err
	}
	op := "prune-" + string(registry.NewID())
	h, err := acquire(ctx, s, o, "checkpoint-prune", op)
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
	actor := o.Actor
	if actor == "" {
		actor = h.Payload().Actor
	}
	var removed []registry.Checkpoint
	committed := false
	pre := &Report{Sidecars: []SidecarResult{}, Repaired: []PinEvent{}, Reclaimed: []PinEvent{}, Conflicts: []Conflict{}}
	err = o.withGates(ctx, s, func(ctx context.Context) error {
		if err := reconcile(ctx, s, reg, o.scope(s), pre, false); err != nil {
			return err
		}
		if authorityLost(pre) {
			return refusal("prune", "", ErrAuthorityLost, "the reconcile run before pruning found pins no intact registry record explains; nothing was deleted", authorityError(pre))
		}
		if len(pre.Conflicts) > 0 {
			return errorf("prune", "", ErrConflicts,
				"the reconcile run before pruning found %d conflict(s); nothing was deleted: run `retain reconcile` to see them", len(pre.Conflicts))
		}
		for attempt := 0; ; attempt++ {
			v, snap, err := reg.Head(ctx)
			if err != nil {
				return err
			}
			res.RegistryVersion = v
			if res.Decisions, err = decidePrune(snap, pats, req); err != nil {
				return err
			}
			var removing []PruneDecision
			for _, d := range res.Decisions {
				if !d.Keep {
					removing = append(removing, d)
				}
			}
			if len(removing) == 0 {
				removed = nil
				return nil
			}
			if err := authorizeRemovals(ctx, s, res.Decisions); err != nil {
				return err
			}
			draft := snap.Next()
			at := time.Now().UTC().Truncate(time.Millisecond)
			removed = removed[:0]
			for _, d := range removing {
				cp, err := draft.Tombstone(d.ID, registry.Deletion{OperationID: op, At: at, Actor: actor})
				if err != nil {
					return err
				}
				removed = append(removed, cp)
			}
			if req.Audit != nil {
				if err := req.Audit(ctx, op, actor, removing, false); err != nil {
					return fmt.Errorf("writing the audit log before removing: %w; nothing was removed", err)
				}
			}
			// Verified right before the commit, after the audit write that
			// may have waited: a claim lost meanwhile commits nothing.
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
			res.OperationID, res.RegistryVersion = op, ref.Version
			committed = true
			if req.Audit != nil {
				if err := req.Audit(ctx, op, actor, removing, true); err != nil {
					res.Warnings = append(res.Warnings, "writing the audit log's checkpoints_removed line after the commit: "+err.Error())
				}
			}
			return nil
		}
	})
	if err != nil && !committed {
		return nil, err
	}
	if err != nil {
		// Committed: the checkpoints are gone whatever failed after (a
		// gate's release); say so rather than report a failed prune.
		res.Warnings = append(res.Warnings, "after the commit: "+err.Error())
	}
	res.Reconciled = pre
	res.count()
	released = true
	if rerr := h.Release(context.WithoutCancel(ctx)); rerr != nil {
		res.Warnings = append(res.Warnings, "releasing the claim (`retain claim status` shows it): "+rerr.Error())
	}
	for _, cp := range removed {
		var deleted []string
		deleted, res.TagErrors = deletePins(ctx, s, cp, res.TagErrors)
		res.TagsDeleted = append(res.TagsDeleted, deleted...)
	}
	return res, nil
}

// check validates req, defaults its GroupBy and compiles its patterns.
func (req *PruneRequest) check() (glob.Set, error) {
	if len(req.Match) == 0 {
		return nil, errorf("prune", "", storage.ErrInvalidArgument, "%v", ErrNoMatch)
	}
	pats, err := glob.CompileSet(req.Match)
	if err != nil {
		return nil, errorf("prune", "", storage.ErrInvalidArgument, "--match: %v", err)
	}
	if err := req.Policy.Validate(); err != nil {
		return nil, errorf("prune", "", storage.ErrInvalidArgument, "%v", err)
	}
	switch req.GroupBy {
	case "":
		req.GroupBy = GroupByBranch
	case GroupByBranch, GroupByNone:
	default:
		return nil, errorf("prune", "", storage.ErrInvalidArgument, "--group-by %q: use %q or %q", req.GroupBy, GroupByBranch, GroupByNone)
	}
	return pats, nil
}

// DecidePrune is what Prune would decide on snap, without a store: the
// daemon asks it of the snapshot it has read, and runs Prune (which
// decides again under the claim) only when something would go.
func DecidePrune(snap *registry.Snapshot, req PruneRequest) ([]PruneDecision, error) {
	pats, err := req.check()
	if err != nil {
		return nil, err
	}
	if req.Now.IsZero() {
		req.Now = time.Now()
	}
	return decidePrune(snap, pats, req)
}

func (r *Pruned) count() {
	r.Kept, r.Removed = 0, 0
	for _, d := range r.Decisions {
		if d.Keep {
			r.Kept++
		} else {
			r.Removed++
		}
	}
	if r.Decisions == nil {
		r.Decisions = []PruneDecision{}
	}
}

// authorizeRemovals checks each removal in ds as a checkpoint delete: a
// policy that forbids deleting one checkpoint forbids the prune (fail
// closed).
func authorizeRemovals(ctx context.Context, s *storage.Store, ds []PruneDecision) error {
	for _, d := range ds {
		if d.Keep {
			continue
		}
		if err := authz.Check(ctx, authz.Request{Action: authz.ActionCheckpointDelete, Command: "checkpoint prune", Store: authz.StoreName(s), Checkpoint: d.Name}); err != nil {
			return err
		}
	}
	return nil
}

// decidePrune judges the live checkpoints of snap that pats match, group
// by group (groups in name order), each group newest first.
func decidePrune(snap *registry.Snapshot, pats glob.Set, req PruneRequest) ([]PruneDecision, error) {
	byID := map[string]registry.Checkpoint{}
	groups := map[string][]rotation.Item{}
	for _, cp := range snap.Live() {
		if pats.Match(cp.Name) == nil || (req.Filter != nil && !req.Filter(cp)) {
			continue
		}
		g := ""
		if req.GroupBy == GroupByBranch {
			g = cp.SourceBranch
		}
		byID[string(cp.ID)] = cp
		groups[g] = append(groups[g], rotation.Item{ID: string(cp.ID), Time: cp.CreatedAt})
	}
	names := make([]string, 0, len(groups))
	for g := range groups {
		names = append(names, g)
	}
	sort.Strings(names)
	var out []PruneDecision
	for _, g := range names {
		ds, err := rotation.Apply(groups[g], req.Policy, req.Now)
		if err != nil {
			return nil, err
		}
		for _, d := range ds {
			cp := byID[d.ID]
			reasons := d.Reasons
			if reasons == nil {
				reasons = []string{}
			}
			out = append(out, PruneDecision{Name: cp.Name, ID: cp.ID, SourceBranch: cp.SourceBranch, CreatedAt: cp.CreatedAt,
				Group: g, Keep: d.Keep, Reasons: reasons})
		}
	}
	return out, nil
}
