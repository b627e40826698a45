package branch

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/retain-dev/retain/core/authz"
	"github.com/retain-dev/retain/core/checkpoint/registry"
	"github.com/retain-dev/retain/core/failpoint"
	"github.com/retain-dev/retain/core/lance"
	"github.com/retain-dev/retain/core/refs/lifecycle"
	"github.com/retain-dev/retain/core/refs/refmeta"
	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/claim"
)

// Failpoints of Create, in order (see internal/failpoint).
const (
	FPCreateAfterClaim    = "branch-create/after-claim"    // claim held, branch file read and checked, nothing written
	FPCreateAfterCreating = "branch-create/after-creating" // the branch file says creating (source, metadata, owner recorded)
	FPCreateAfterReady    = "branch-create/after-ready"    // the branch file says ready, claim still held
)

// CreateFailpoints lists the failpoints of Create in order.
var CreateFailpoints = []string{FPCreateAfterClaim, FPCreateAfterCreating, FPCreateAfterReady}

// Outcomes of Create.
const (
	// OutcomeAdopted: this run recorded the branch (creating → ready).
	OutcomeAdopted = "adopted"
	// OutcomeResumed: this run finished an adoption a dead process had
	// begun (the branch was creating).
	OutcomeResumed = "resumed"
	// OutcomeAlreadyReady: the branch was already ready with the same
	// source (and the metadata asked for): nothing was written.
	OutcomeAlreadyReady = "already-ready"
)

// CreateOptions configure Create.
type CreateOptions struct {
	// Actor recorded in the claim; default $USER@host.
	Actor string
	// Scope of the store's writers; zero means claim.ScopeFor(s.Location()).
	Scope storage.Scope
	// Gates are adapter gates held with the claim.
	Gates []string
	// Table is the table, a folder at the top of the store ("t.lance";
	// "t" is taken as "t.lance"). Required.
	Table string
	// From is the source, "<branch>[@<version>]" ("main@3"). Without a
	// version the fork point recorded in the branch file is accepted and
	// recorded. Required.
	From string
	// Meta is the user metadata to record (no reserved keys).
	Meta map[string]string
	// Expires, when set, is recorded as the branch's expiry
	// (refmeta.MetaExpires): the daemon deletes the branch through the
	// delete protocol once past it (ReapExpired), refused while anything
	// pins it.
	Expires time.Time
	// OwnerDeadAttested is the operator's statement that the owner of a
	// creating branch, on another host, is dead (see claim.Proof).
	OwnerDeadAttested string
}

// Created is what Create did.
type Created struct {
	Branch      string `json:"branch"`
	Store       string `json:"store"`
	Table       string `json:"table"`
	OperationID string `json:"operation_id"`
	// Outcome is adopted, resumed or already-ready.
	Outcome string `json:"outcome"`
	// Source is the fork point, "<branch>@<version>".
	Source        string `json:"source"`
	ParentBranch  string `json:"parent_branch"`
	ParentVersion uint64 `json:"parent_version"`
	// Head is the branch's newest version when it was checked.
	Head uint64 `json:"head"`
	// Metadata is the branch's user metadata now.
	Metadata  map[string]string `json:"metadata"`
	Lifecycle lifecycle.Record  `json:"lifecycle"`
	TookOver  *TookOver         `json:"took_over,omitempty"`
}

// Create makes a branch real Lance created a safe, described retain
// reference: it adopts it. Writing a branch's data (its first manifest,
// whose base paths point into the parent) needs Lance's own writer, which
// retain does not have; so the branch must exist (Lance's
// branches.create), and Create records its source and metadata in the
// branch file's metadata with a lifecycle, every step a compare-and-swap
// on the file's version token:
//
//  1. Under the retention claim (claim.ErrHeld if another operation holds
//     it) and any gates, the branch file is read: a missing branch is
//     lance.ErrBranchNotFound (create it with Lance first).
//  2. Its fork point must be From (*ConflictError otherwise; without
//     @version any version of that branch is accepted and recorded).
//     ready with the same source: nothing to do (OutcomeAlreadyReady) —
//     unless Meta asks for a pair the branch does not carry (conflict).
//     deleting: ErrBranchBeingDeleted. creating under another operation:
//     taken over only if its owner is proven dead (*OwnerAliveError).
//  3. The branch's head and its fork point on the parent are read
//     (ErrBranchBroken if either is missing).
//  4. creating (source, user metadata, owner) — then ready.
//
// A crash leaves the claim held (take it over: `retain claim takeover`)
// and the branch in the state it reached: creating is not listed by
// default; running Create again with the same source finishes it, a
// different source is a conflict, and Delete removes it (rolls it back).
func Create(ctx context.Context, s *storage.Store, name string, o CreateOptions) (res *Created, err error) {
	if name == "main" {
		return nil, &lance.NameError{Ref: "branch", Name: name, Rule: "main is the main branch; it is never created"}
	}
	if err := lance.ValidateBranchName(name); err != nil {
		return nil, err
	}
	if o.From == "" {
		return nil, storage.Errorf("branch-create", name, storage.ErrInvalidArgument, "the source is required: --from <branch>[@<version>]")
	}
	want, hasVersion, err := lifecycle.ParseFrom(o.From)
	if err != nil {
		return nil, err
	}
	for k := range o.Meta {
		if strings.HasPrefix(k, refmeta.ReservedPrefix) || k == "" {
			return nil, storage.Errorf("branch-create", name, storage.ErrInvalidArgument, "metadata key %q: keys beginning %q are reserved for retain's lifecycle", k, refmeta.ReservedPrefix)
		}
	}
	// Before any read or write: a denial changes nothing.
	if err := authz.Check(ctx, authz.Request{Action: authz.ActionBranchCreate, Store: authz.StoreName(s), Table: o.Table, Branch: name}); err != nil {
		return nil, err
	}
	scope := o.Scope
	if scope == storage.ScopeNone {
		scope = claim.ScopeFor(s.Location())
	}
	if err := s.Require(storage.FeatureReplaceIfVersion, scope); err != nil {
		return nil, fmt.Errorf("a branch's lifecycle is kept with replace-if-version on its branch file: %w", err)
	}
	store := s.Location().String()
	table, err := findTable(ctx, s, store, o.Table, "branch-create")
	if err != nil {
		return nil, err
	}
	op := "branch-create-" + string(registry.NewID())
	h, err := claim.Acquire(ctx, s, claim.Request{OperationID: op, Action: "branch-create", Actor: o.Actor, Scope: scope})
	if err != nil {
		return nil, err
	}
	defer func() {
		if rerr := h.Release(context.WithoutCancel(ctx)); rerr != nil && err == nil {
			err = rerr
		}
	}()
	ds, err := lance.Open(s, table)
	if err != nil {
		return nil, err
	}
	res = &Created{Branch: name, Store: store, Table: table, OperationID: op}
	dopts := Options{Scope: scope, Gates: o.Gates}
	err = dopts.withGates(ctx, s, func(ctx context.Context) error {
		return adopt(ctx, h, ds, name, want, hasVersion, o, res)
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

func adopt(ctx context.Context, h *claim.Handle, ds *lance.Dataset, name string, want lifecycle.Source, hasVersion bool, o CreateOptions, res *Created) error {
	table, op := ds.Root, res.OperationID
	b, err := ds.ReadBranch(ctx, name)
	if errors.Is(err, lance.ErrBranchNotFound) {
		return fmt.Errorf("branch %q does not exist in %s: retain adopts branches real Lance created — create it with Lance first (table.branches().create(%q, %q, version)), then run this again; a folder tree/%s/ left by an interrupted delete is finished by `retain branch delete`: %w",
			name, table, name, mainName(want.Branch), name, err)
	}
	if err != nil {
		return err
	}
	l, err := lifecycle.Parse(b.Metadata)
	if err != nil {
		return refuse(lifecycle.ErrMalformed, storage.ErrPreconditionFailed, "branch %q of %s: %v; nothing was changed: fix or remove its %s keys", name, table, err, refmeta.ReservedPrefix)
	}
	have := lifecycle.Source{Branch: b.ParentBranch, Version: b.ParentVersion}
	if want.Branch != have.Branch || (hasVersion && want.Version != have.Version) {
		return &ConflictError{Branch: name, Table: table, Want: fromLabel(want, hasVersion), Have: have.String()}
	}
	if l.Source != "" && l.Source != have.String() {
		return &ConflictError{Branch: name, Table: table, Want: fromLabel(want, hasVersion), Have: have.String(),
			Msg: fmt.Sprintf("its lifecycle records source %s but its branch file says %s: it was not made by one operation; delete it and create it again", l.Source, have)}
	}
	res.Source, res.ParentBranch, res.ParentVersion = have.String(), mainName(have.Branch), have.Version
	switch l.State {
	case lifecycle.Deleting:
		return refuse(ErrBranchBeingDeleted, storage.ErrPreconditionFailed, "branch %q of %s is being deleted (operation %s): finish it with `retain branch delete`, then create it again; nothing was changed",
			name, table, l.Op)
	case lifecycle.Ready:
		if l.Managed {
			user := refmeta.User(b.Metadata)
			for k, v := range o.Meta {
				if got, ok := user[k]; !ok || got != v {
					return &ConflictError{Branch: name, Table: table, Want: fromLabel(want, hasVersion), Have: have.String(),
						Msg: fmt.Sprintf("it is ready with metadata %s, not %s=%s", refmeta.Filter(user).String(), k, v)}
				}
			}
			if !o.Expires.IsZero() && b.Metadata[refmeta.MetaExpires] != refmeta.FormatExpiry(o.Expires) {
				return &ConflictError{Branch: name, Table: table, Want: fromLabel(want, hasVersion), Have: have.String(),
					Msg: "it is ready, and an expiry is recorded only when a branch is adopted; delete it and create it again to give it one"}
			}
			res.Outcome, res.Metadata, res.Lifecycle = OutcomeAlreadyReady, user, l
			if head, err := checkAdoptable(ctx, ds, name, have); err == nil {
				res.Head = head
			}
			return nil
		}
	}
	// creating (ours or a dead owner's), or a branch only Lance wrote.
	self := selfOwner(h)
	took, err := takeOver(self, op, name, table, l, o.OwnerDeadAttested)
	if err != nil {
		return err
	}
	res.TookOver = took
	res.Outcome = OutcomeAdopted
	if l.State == lifecycle.Creating {
		res.Outcome = OutcomeResumed
	}
	head, err := checkAdoptable(ctx, ds, name, have)
	if err != nil {
		return err
	}
	res.Head = head
	failpoint.Hit(FPCreateAfterClaim)

	user := refmeta.User(b.Metadata)
	maps.Copy(user, o.Meta)
	expires := b.Metadata[refmeta.MetaExpires] // a resumed create keeps what it recorded
	if !o.Expires.IsZero() {
		expires = refmeta.FormatExpiry(o.Expires)
	}
	meta := func(state lifecycle.State, owner *lifecycle.Owner) map[string]string {
		m := lifecycle.Meta(user, state, op, owner, have, time.Now())
		if expires != "" {
			m[refmeta.MetaExpires] = expires
		}
		return m
	}
	if err := h.Verify(ctx); err != nil {
		return err
	}
	nb, err := ds.ReplaceBranchMetadata(ctx, name, b.Info.Version, meta(lifecycle.Creating, self))
	if err != nil {
		return fmt.Errorf("recording branch %q of %s as creating: %w", name, table, err)
	}
	failpoint.Hit(FPCreateAfterCreating)
	if err := h.Verify(ctx); err != nil {
		return err
	}
	nb, err = ds.ReplaceBranchMetadata(ctx, name, nb.Info.Version, meta(lifecycle.Ready, nil))
	if err != nil {
		return fmt.Errorf("recording branch %q of %s as ready (it stays creating; run the create again): %w", name, table, err)
	}
	failpoint.Hit(FPCreateAfterReady)
	res.Metadata = refmeta.User(nb.Metadata)
	res.Lifecycle, _ = lifecycle.Parse(nb.Metadata)
	return nil
}

// checkAdoptable reads the branch's head and its fork point on the
// parent; it returns the head.
func checkAdoptable(ctx context.Context, ds *lance.Dataset, name string, src lifecycle.Source) (uint64, error) {
	broken := func(format string, args ...any) error {
		return refuse(ErrBranchBroken, storage.ErrPreconditionFailed, "branch %q of %s: %s; nothing was changed", name, ds.Root, fmt.Sprintf(format, args...))
	}
	head, err := ds.BranchHead(ctx, name)
	if err != nil {
		return 0, broken("its folder has no readable head: %v", err)
	}
	parent := ds
	if src.Branch != "" {
		if parent, err = ds.Branch(src.Branch); err != nil {
			return 0, err
		}
	}
	if _, err := parent.VersionAt(ctx, src.Version); err != nil {
		return 0, broken("its fork point %s is gone: %v", src, err)
	}
	return head.N, nil
}

func fromLabel(s lifecycle.Source, hasVersion bool) string {
	if hasVersion {
		return s.String()
	}
	return mainName(s.Branch)
}

func mainName(b string) string {
	if b == "" {
		return registry.MainBranch
	}
	return b
}
