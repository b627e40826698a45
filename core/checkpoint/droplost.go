package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/retain-dev/retain/core/authz"
	"github.com/retain-dev/retain/core/checkpoint/registry"
	"github.com/retain-dev/retain/core/failpoint"
	"github.com/retain-dev/retain/core/internal/fanout"
	"github.com/retain-dev/retain/core/lance"
	"github.com/retain-dev/retain/core/storage"
)

// FPDropLostAfterCommit is hit once drop-lost's registry commit is done,
// before its tag delete and its pin_dropped audit line.
const FPDropLostAfterCommit = "drop-lost/after-commit"

// DropLostOptions says what DropLost records.
type DropLostOptions struct {
	// Reason is the operator's, recorded in the checkpoint and the audit
	// line. Required.
	Reason string
	// Audit, if set, is called with "dropping" before the registry commit
	// (an error stops it: no line, no change) and "dropped" after it.
	Audit func(ctx context.Context, event, operationID, actor string, d *DroppedLost) error
}

// DroppedLost is what DropLost did.
type DroppedLost struct {
	ID              registry.ID      `json:"id"`
	Name            string           `json:"name"`
	OperationID     string           `json:"operation_id"`
	RegistryVersion registry.Version `json:"registry_version"`
	Lost            registry.LostPin `json:"lost"`
	// TagDeleted is the pin's tag when it still existed and was deleted.
	TagDeleted string `json:"tag_deleted,omitempty"`
	// TagError: the tag delete failed; it only over-retains until
	// reconcile reclaims it.
	TagError string `json:"tag_error,omitempty"`
}

// DropLostCommand is the command that resolves a live checkpoint's pin of
// path whose version is provably gone: what conflicts and refusals name.
func DropLostCommand(id registry.ID, path string) string {
	return fmt.Sprintf("retain checkpoint drop-lost %s %s STORE --reason WHY", id, storage.ShellWord(path))
}

// lost is why the version a row pins is provably gone; the zero lost means
// it is intact.
type lost struct {
	kind string // ConflictIncarnationChanged or ConflictPinLost
	why  string
}

// lostEvidence reports whether the version r pins is provably gone; an
// error when that cannot be known (unreadable: fail closed).
func lostEvidence(ctx context.Context, s *storage.Store, r registry.Row) (lost, error) {
	ref, err := lance.ParsePhysRef(r.PhysicalRef)
	if err != nil {
		return lost{}, err
	}
	ds, err := lance.Open(s, r.Path)
	if err != nil {
		return lost{}, err
	}
	if r.Branch != registry.MainBranch {
		if ds, err = ds.Branch(r.Branch); err != nil {
			return lost{}, err
		}
	}
	got, err := ds.VerifyPhysRef(ctx, ref)
	return judgeCommit(ds, r, ref, got, err)
}

// judgeCommit is lostEvidence's judgement of what VerifyPhysRef returned
// for r's pinned commit ref in ds.
func judgeCommit(ds *lance.Dataset, r registry.Row, ref, got lance.PhysRef, err error) (lost, error) {
	switch {
	case err == nil:
		return lost{}, nil
	case errors.Is(err, lance.ErrPhysRefMismatch) && !ProvesOtherCommit(ref, got):
		return lost{}, fmt.Errorf("%w; the manifest there is not provably another commit (the pin records no commit timestamp or transaction, or they are the pinned ones): it may be a copy or a rewrite of the pinned version", err)
	case errors.Is(err, lance.ErrPhysRefMismatch):
		return lost{ConflictIncarnationChanged, fmt.Sprintf("version %d of %s is another commit now (committed %s, txn %s): the table was deleted and recreated",
			r.Version, r.Path, got.Committed.Format(time.RFC3339Nano), got.TxnUUID)}, nil
	case errors.Is(err, storage.ErrNotFound):
		return lost{ConflictPinLost, fmt.Sprintf("version %d of %s on %s has no manifest (%s, nor under the other naming scheme)", r.Version, r.Path, r.Branch, ds.PinnedManifestKey(ref))}, nil
	}
	return lost{}, err
}

// ProvesOtherCommit: got, read at the version ref pins, is another commit
// (another timestamp or transaction), not merely other bytes or another
// object: only that, or no manifest at all, lets drop-lost give a pin up.
func ProvesOtherCommit(ref, got lance.PhysRef) bool {
	hasIdentity := !ref.Committed.IsZero() || ref.TxnUUID != ""
	return hasIdentity && !ref.SameCommit(got)
}

// DropLost gives up checkpoint nameOrID's pin of table path, whose pinned
// version is provably gone — no manifest under either name, or another
// commit (the table was deleted and recreated) — so nothing can restore it.
// The checkpoint keeps its other pins and records the lost one (what was
// seen, the reason, who, when) in its header; the pin's tag, if any is
// left, is deleted. It refuses an intact pin, one whose version cannot be
// read or is not provably another commit, and a store whose registry
// authority is in doubt (reconcile's read phase finds authority-lost). Under
// the claim, framed by audit lines: this is the way out of a
// `pin-lost`/`incarnation-changed`/`table-missing` conflict.
func (o Options) DropLost(ctx context.Context, s *storage.Store, nameOrID, path string, do DropLostOptions) (res *DroppedLost, err error) {
	if strings.TrimSpace(do.Reason) == "" {
		return nil, storage.Errorf("drop-lost", path, storage.ErrInvalidArgument, "say why with --reason: it is recorded in the checkpoint and the audit log")
	}
	// Dropping a pin gives up retention of part of a checkpoint, so it
	// authorizes as checkpoint delete; before the claim, so a denial
	// writes nothing.
	if err := authz.Check(ctx, authz.Request{Action: authz.ActionCheckpointDelete, Command: "checkpoint drop-lost", Store: authz.StoreName(s), Checkpoint: nameOrID}); err != nil {
		return nil, err
	}
	reg := registry.Open(s, registry.Options{Scope: o.scope(s)})
	op := "drop-lost-" + string(registry.NewID())
	h, err := acquire(ctx, s, o, "checkpoint-drop-lost", op)
	if err != nil {
		return nil, err
	}
	defer func() {
		if rerr := h.Release(context.WithoutCancel(ctx)); rerr != nil && err == nil {
			err = rerr
		}
	}()
	actor := o.Actor
	if actor == "" {
		actor = h.Payload().Actor
	}
	var row registry.Row
	err = o.withGates(ctx, s, func(ctx context.Context) error {
		pre := &Report{Sidecars: []SidecarResult{}, Repaired: []PinEvent{}, Reclaimed: []PinEvent{}, Conflicts: []Conflict{}}
		if err := reconcile(ctx, s, reg, o.scope(s), pre, true); err != nil {
			return err
		}
		if authorityLost(pre) {
			return refusal("drop-lost", path, ErrAuthorityLost, "pins no intact registry record explains; nothing was dropped", authorityError(pre))
		}
		for attempt := 0; ; attempt++ {
			v, snap, err := reg.Head(ctx)
			if err != nil {
				return err
			}
			cp, err := snap.Lookup(nameOrID)
			if err != nil {
				return err
			}
			if cp.State != registry.Live {
				return errorf("drop-lost", nameOrID, ErrMissingTarget, "checkpoint %s (%s) is deleted: it pins nothing", cp.ID, cp.Name)
			}
			found := false
			for _, r := range cp.Rows {
				if r.Path == path {
					row, found = r, true
				}
			}
			if !found {
				return errorf("drop-lost", path, ErrMissingTarget, "checkpoint %s (%s) pins no table %s (`retain checkpoint show %s STORE` lists its pins)", cp.ID, cp.Name, storage.Quote(path), cp.ID)
			}
			l, err := lostEvidence(ctx, s, row)
			why := l.why
			if err != nil {
				return refusal("drop-lost", path, ErrPinNotLost, "the pinned version cannot be read, so it is not provably gone; nothing was dropped: make it readable, then run `retain reconcile STORE`", err)
			}
			if why == "" {
				return errorf("drop-lost", path, ErrPinNotLost, "checkpoint %s (%s) still holds version %d of %s intact: nothing is lost, nothing was dropped", cp.ID, cp.Name, row.Version, path)
			}
			draft := snap.Next()
			got, err := draft.DropLostRow(cp.ID, row.TableID, registry.LostPin{Why: why, Reason: do.Reason, OperationID: op,
				At: time.Now().UTC().Truncate(time.Millisecond), Actor: actor})
			if err != nil {
				return err
			}
			res = &DroppedLost{ID: cp.ID, Name: cp.Name, OperationID: op, Lost: got.Lost[len(got.Lost)-1]}
			if attempt == 0 && do.Audit != nil {
				if err := do.Audit(ctx, "dropping", op, actor, res); err != nil {
					return err
				}
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
			res.RegistryVersion = ref.Version
			return nil
		}
	})
	if err != nil {
		return nil, err
	}
	failpoint.Hit(FPDropLostAfterCommit)
	// Committed: what is left is bookkeeping a signal must not cut short.
	ctx = context.WithoutCancel(ctx)
	// The tag protects nothing of the checkpoint now; delete it if it is
	// still there (Lance's drop took it with the table, usually).
	tag, terr := registry.TablePinTag(res.ID, row.Pin)
	if terr == nil {
		if ds, oerr := lance.Open(s, row.Path); oerr == nil {
			switch derr := ds.DeleteTag(ctx, tag, ""); {
			case derr == nil:
				res.TagDeleted = tag
			case errors.Is(derr, lance.ErrTagNotFound) || errors.Is(derr, storage.ErrNotFound):
			default:
				res.TagError = derr.Error()
			}
		}
	}
	if do.Audit != nil {
		if aerr := do.Audit(ctx, "dropped", op, actor, res); aerr != nil {
			return res, aerr
		}
	}
	return res, nil
}

// commitChecks remembers lostEvidence per pinned version for one pass, so
// checkpoints pinning the same version cost one read.
type commitChecks struct {
	mu sync.Mutex
	m  map[string]*commitCheck
}

type commitCheck struct {
	once sync.Once
	l    lost
	err  error
}

func newCommitChecks() *commitChecks { return &commitChecks{m: map[string]*commitCheck{}} }

// lost judges r's pinned commit once per distinct (table, branch, commit),
// however many checkpoints pin it and however many goroutines ask at once.
func (c *commitChecks) lost(ctx context.Context, s *storage.Store, r registry.Row) (lost, error) {
	k := r.Path + "\x00" + r.Branch + "\x00" + r.PhysicalRef
	c.mu.Lock()
	e, ok := c.m[k]
	if !ok {
		e = &commitCheck{}
		c.m[k] = e
	}
	c.mu.Unlock()
	e.once.Do(func() { e.l, e.err = lostEvidence(ctx, s, r) })
	return e.l, e.err
}

// prefetch judges the pinned commits of rows not judged yet, grouped by
// table and branch, each group with one VerifyPhysRefs: under a daemon's
// lance.RefCache the commits that verified before and whose manifests are
// listed unchanged cost one listing of the group's _versions/, not a read
// each. Without a cache it does nothing: lost reads each commit as it is
// asked for. Failures to open a table are left to lost, which reports them.
func (c *commitChecks) prefetch(ctx context.Context, s *storage.Store, rows []registry.Row) {
	if !lance.HasRefCache(ctx) {
		return
	}
	type group struct {
		path, branch string
		rows         []registry.Row
		refs         []lance.PhysRef
		entries      []*commitCheck
	}
	var groups []*group
	byKey := map[string]*group{}
	c.mu.Lock()
	for _, r := range rows {
		k := r.Path + "\x00" + r.Branch + "\x00" + r.PhysicalRef
		if _, ok := c.m[k]; ok {
			continue
		}
		ref, err := lance.ParsePhysRef(r.PhysicalRef)
		if err != nil {
			continue
		}
		e := &commitCheck{}
		c.m[k] = e
		g := byKey[r.Path+"\x00"+r.Branch]
		if g == nil {
			g = &group{path: r.Path, branch: r.Branch}
			byKey[r.Path+"\x00"+r.Branch] = g
			groups = append(groups, g)
		}
		g.rows, g.refs, g.entries = append(g.rows, r), append(g.refs, ref), append(g.entries, e)
	}
	c.mu.Unlock()
	_ = fanout.Each(ctx, s.Parallelism(), len(groups), func(ctx context.Context, i int) error {
		g := groups[i]
		ds, err := lance.Open(s, g.path)
		if err == nil && g.branch != registry.MainBranch {
			ds, err = ds.Branch(g.branch)
		}
		var gots []lance.PhysRef
		var errs []error
		if err == nil {
			gots, errs = ds.VerifyPhysRefs(ctx, g.refs)
		}
		for j, e := range g.entries {
			e.once.Do(func() {
				if err != nil {
					e.l, e.err = lost{}, err
					return
				}
				e.l, e.err = judgeCommit(ds, g.rows[j], g.refs[j], gots[j], errs[j])
			})
		}
		return nil
	})
	// A group fanout never reached (the context ended) is judged by lost
	// when asked: its entries' once runs lostEvidence then.
}

// wayOut is what to do about a lost pin, with the command.
func (l lost) wayOut(id registry.ID, path string) string {
	if l.kind == ConflictIncarnationChanged {
		return "nothing can restore it: give the pin up with `" + DropLostCommand(id, path) + "`"
	}
	return "restore the manifest from a backup, or give the pin up with `" + DropLostCommand(id, path) + "`"
}

// LostPinConflict reports whether c says a live checkpoint's pinned version
// is gone (or its table): what DropLostCommand resolves.
func LostPinConflict(c Conflict) bool {
	switch c.Kind {
	case ConflictPinLost, ConflictIncarnationChanged, ConflictTableMissing:
		return true
	}
	return false
}
