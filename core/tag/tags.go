package tag

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/retain-dev/retain/core/authz"
	"github.com/retain-dev/retain/core/checkpoint/registry"
	"github.com/retain-dev/retain/core/lance"
	"github.com/retain-dev/retain/core/refs/lifecycle"
	"github.com/retain-dev/retain/core/refs/refmeta"
	"github.com/retain-dev/retain/core/storage"
)

// Tags: Lance tags of one dataset as memory checkpoints, with metadata.
//
// Every write is conditional on what was read, so that concurrent writers
// of one tag never both win and a deleted tag never comes back:
//
//   - create is create-if-absent (an existing tag is ErrTagExists);
//   - update rewrites the tag file with replace-if-version of the object's
//     version token as read (or as the caller expects, IfToken): a tag
//     changed since is ErrTagChanged, a tag deleted since is ErrTagNotFound
//     — a replace of a missing object writes nothing, so an update never
//     creates;
//   - delete is delete-if-version of the object read.
//
// The CAS comes from the store's declared capabilities and must reach every
// writer of the store (Options.Scope: host for a local filesystem,
// global for a bucket):
//
//	capability at Scope                  update                 delete
//	replace- and delete-if-version       one replace-if-version one delete-if-version
//	replace-if-version only              one replace-if-version mark, then delete (below)
//	neither, Options.Gates given      under the gates: read, compare, overwrite / delete
//	neither, no gates                    refused (storage.ErrUnsupported), nothing written
//
// "Mark, then delete": without conditional delete the tag is first
// rewritten by replace-if-version with the reserved metadata key
// TagDeletingKey, then deleted unconditionally. retain never rewrites a
// marked tag (an update of it is ErrTagNotFound), so the unconditional
// delete can only remove the marked object — unless a writer outside retain
// (Lance's own tags.update, which is check-then-put) rewrites it between
// the two calls. A delete interrupted after the mark leaves a tag that
// Lance still lists and checks out, that Show reports as deleting and that
// the next Delete finishes.
//
// Tags in retain's reserved namespace "ogcp_" (checkpoint pins, see
// registry.IsReservedTag) are listed and shown but never created,
// updated or deleted here (ErrReservedTag).

// Typed errors of the tag operations. ErrTagExists, ErrTagNotFound and
// ErrTagChanged are the Lance layer's; errors carry the storage kind too
// (storage.ErrAlreadyExists, storage.ErrNotFound, storage.ErrPreconditionFailed).
var (
	ErrTagExists   = lance.ErrTagExists
	ErrTagNotFound = lance.ErrTagNotFound
	ErrTagChanged  = lance.ErrTagChanged
	// ErrReservedTag: the name is in retain's reserved namespace "ogcp_"
	// (kind storage.ErrInvalidArgument).
	ErrReservedTag = fmt.Errorf("tag name in retain's reserved namespace %q (%w)", registry.TagPrefix, storage.ErrInvalidArgument)
	// ErrTagDangling: the tag names a version that does not exist (any
	// more): Lance cannot check it out (kind storage.ErrNotFound).
	ErrTagDangling = errors.New("tag names a version that does not exist")
)

// TagDeletingKey is the reserved metadata key a delete without conditional
// delete marks a tag with before deleting it (see "Mark, then delete").
const TagDeletingKey = refmeta.ReservedPrefix + "deleting"

// Options configure Tags. The zero value requires the conditional
// operations to reach every writer anywhere (global scope) and uses no
// gates.
type Options struct {
	// Scope is how far the store's writers reach: the compare-and-swap
	// must exclude all of them (claim.ScopeFor: host for file://, global
	// for a bucket). Zero means global.
	Scope storage.Scope
	// Gates are adapter gates (storage.Store.WithGates) to hold around a
	// read-compare-write where the store does not declare the conditional
	// operation with Scope reach. Only sound if every writer of the tags
	// holds the same gates. Empty: such a store is refused.
	Gates []string
	// Command names the command in authorization requests (the context's
	// "command"): "tag expire" for the daemon's expiry reaper, so a policy
	// can tell it from an operator's `tag delete`. Empty: the action.
	Command string
}

// Tags operates on the tags of one Lance dataset: the main dataset, whose
// _refs/tags/ holds the tags of every branch.
type Tags struct {
	ds   *lance.Dataset
	opts Options
}

// New returns the tag operations on ds (the main dataset of a table).
func New(ds *lance.Dataset, o Options) *Tags {
	if o.Scope == storage.ScopeNone {
		o.Scope = storage.ScopeGlobal
	}
	return &Tags{ds: ds, opts: o}
}

// authorize checks a tag write with the gate in ctx, before anything is
// read or written. The table is the dataset's root in its store ("" when
// the store is the table itself).
func (t *Tags) authorize(ctx context.Context, a authz.Action, name string) error {
	return authz.Check(ctx, authz.Request{Action: a, Command: t.opts.Command, Store: authz.StoreName(t.ds.Store), Table: t.ds.Root, Tag: name})
}

// Dataset is the dataset the tags belong to.
func (t *Tags) Dataset() *lance.Dataset { return t.ds }

// Ref is one tag as the commands show it.
type Ref struct {
	Name string `json:"name"`
	// Branch is "main" or the branch whose version the tag names.
	Branch  string `json:"branch"`
	Version uint64 `json:"version"`
	// ManifestSize is the manifest size the tag file records.
	ManifestSize uint64 `json:"manifest_size"`
	// CreatedAt and UpdatedAt are null for tags older Lance wrote.
	CreatedAt *time.Time `json:"created_at"`
	UpdatedAt *time.Time `json:"updated_at"`
	// Metadata is the tag file's whole metadata map (never null).
	Metadata map[string]string `json:"metadata"`
	// Reserved: a checkpoint pin or a lease ("ogcp_"), read-only here.
	Reserved bool `json:"reserved"`
	// Expires is the tag's expiry (refmeta.MetaExpires), if it has one
	// that parses.
	Expires *time.Time `json:"expires,omitempty"`
	// Deleting: an interrupted delete marked it (TagDeletingKey); the next
	// delete finishes it, updates refuse it.
	Deleting bool `json:"deleting"`
	// Key is the tag file's key in the store; Token its version token, to
	// pass as IfToken.
	Key   string `json:"key"`
	Token string `json:"token"`

	tag lance.Tag
}

// Lance returns the tag as the Lance layer read it.
func (r Ref) Lance() lance.Tag { return r.tag }

func tagRefOf(tg lance.Tag) Ref {
	r := Ref{Name: tg.Name, Branch: tg.Branch, Version: tg.Version, ManifestSize: tg.ManifestSize,
		Metadata: map[string]string{}, Reserved: registry.IsReservedTag(tg.Name),
		Key: tg.Info.Key, Token: tg.Info.Version, tag: tg}
	if r.Branch == "" {
		r.Branch = "main"
	}
	if !tg.CreatedAt.IsZero() {
		c := tg.CreatedAt.UTC()
		r.CreatedAt = &c
	}
	if !tg.UpdatedAt.IsZero() {
		u := tg.UpdatedAt.UTC()
		r.UpdatedAt = &u
	}
	for k, v := range tg.Metadata {
		r.Metadata[k] = v
	}
	_, r.Deleting = tg.Metadata[TagDeletingKey]
	if at, ok, err := refmeta.Expiry(tg.Metadata); ok && err == nil {
		r.Expires = &at
	}
	return r
}

// Result is what a write did: the tag after it (for a delete, the state
// that was deleted) and how the write was made conditional.
type Result struct {
	Op  string `json:"op"` // "create", "update", "delete"
	Tag Ref    `json:"tag"`
	// CAS names the conditional write, e.g. "replace-if-version
	// gated(localfs-key-stripe, host)" or "gates [metadata]: read, compare,
	// overwrite".
	CAS string `json:"cas"`
}

// Resolution is where a tag points: what `retain tag resolve` prints and
// what a checkout by the tag opens.
type Resolution struct {
	Tag     string `json:"tag"`
	Branch  string `json:"branch"` // "main" or the branch
	Version uint64 `json:"version"`
	// ManifestKey is the version's manifest, relative to the dataset
	// (tree/<branch>/_versions/... for a branch).
	ManifestKey string `json:"manifest_key"`
	// ManifestSize is the manifest's size in the store; RecordedSize the
	// tag file's manifestSize. They differ only if the tag file is stale.
	ManifestSize int64  `json:"manifest_size"`
	RecordedSize uint64 `json:"recorded_manifest_size"`
	SizeMatches  bool   `json:"size_matches"`
	Token        string `json:"token"`
}

func tagRefusal(op, name string, err error, format string, args ...any) error {
	return &lance.RefError{Op: op, Key: name, Err: err, Msg: fmt.Sprintf(format, args...)}
}

// tagWritable refuses reserved names, before anything is read.
func tagWritable(op, name string) error {
	if registry.IsReservedTag(name) {
		if registry.IsLeaseTag(name) {
			return tagRefusal(op, name, ErrReservedTag, "tags beginning %q are reader leases: end one with `retain lease release`", registry.LeaseTagPrefix)
		}
		return tagRefusal(op, name, ErrReservedTag,
			"tags beginning %q are checkpoint pins, created and reclaimed only by `retain checkpoint` and `retain reconcile`", registry.TagPrefix)
	}
	return nil
}

// tagUserKeys refuses metadata keys a user may not write.
func tagUserKeys(op, name string, keys ...string) error {
	for _, k := range keys {
		switch {
		case k == "":
			return tagRefusal(op, name, storage.ErrInvalidArgument, "metadata keys must not be empty")
		case strings.HasPrefix(k, refmeta.ReservedPrefix):
			return tagRefusal(op, name, storage.ErrInvalidArgument, "metadata keys beginning %q are reserved for retain (%q)", refmeta.ReservedPrefix, k)
		case !utf8.ValidString(k):
			return tagRefusal(op, name, storage.ErrInvalidArgument, "metadata key %q is not UTF-8", k)
		}
	}
	return nil
}

// tagUserMeta refuses metadata a user may not write.
func tagUserMeta(op, name string, m map[string]string) error {
	for k, v := range m {
		if err := tagUserKeys(op, name, k); err != nil {
			return err
		}
		if !utf8.ValidString(v) {
			return tagRefusal(op, name, storage.ErrInvalidArgument, "metadata %q: the value is not UTF-8", k)
		}
	}
	return nil
}

// CreateOptions say what a new tag names and carries.
type CreateOptions struct {
	// Branch is "" or "main" for main, else the branch.
	Branch string
	// Version is the version to tag; 0 means the branch's newest.
	Version uint64
	// Metadata is the tag's metadata (no reserved keys).
	Metadata map[string]string
	// Expires, when set, is when the daemon may remove the tag
	// (ReapExpired), recorded as refmeta.MetaExpires.
	Expires time.Time
}

// Create writes a new tag with create-if-absent: an existing tag of that
// name (whatever it names) is ErrTagExists and stays as it is. The version
// must exist; its manifest size is recorded as Lance records it.
func (t *Tags) Create(ctx context.Context, name string, o CreateOptions) (Result, error) {
	if err := tagWritable("create-tag", name); err != nil {
		return Result{}, err
	}
	if err := t.authorize(ctx, authz.ActionTagCreate, name); err != nil {
		return Result{}, err
	}
	if err := lance.ValidateTagName(name); err != nil {
		return Result{}, err
	}
	if err := tagUserMeta("create-tag", name, o.Metadata); err != nil {
		return Result{}, err
	}
	s := t.ds.Store
	if err := s.Require(storage.FeatureCreateIfAbsent, t.opts.Scope); err != nil {
		return Result{}, fmt.Errorf("tag create needs create-if-absent reaching every writer of this store; retain does not fall back to check-then-put: %w", err)
	}
	branch := o.Branch
	if branch == "main" {
		branch = ""
	}
	version := o.Version
	if version == 0 {
		src := t.ds
		if branch != "" {
			var err error
			if src, err = t.ds.Branch(branch); err != nil {
				return Result{}, err
			}
		}
		head, err := src.Latest(ctx)
		if err != nil {
			return Result{}, fmt.Errorf("create tag %q at the head of %s: %w", name, tagBranchLabel(branch), err)
		}
		version = head.N
	}
	meta := o.Metadata
	if !o.Expires.IsZero() {
		meta = map[string]string{refmeta.MetaExpires: refmeta.FormatExpiry(o.Expires)}
		for k, v := range o.Metadata {
			meta[k] = v
		}
	}
	tg, err := t.ds.CreateTagOnBranch(ctx, name, branch, version, meta)
	if err != nil {
		return Result{}, err
	}
	if branch != "" {
		// A branch delete marks the branch deleting, then re-reads its tags;
		// a tag create writes the tag, then re-reads the branch: whichever
		// comes second sees the other. A branch that is going (or gone)
		// must not keep a new tag that would name nothing.
		if gone := t.branchGoing(ctx, branch); gone != "" {
			if derr := t.ds.DeleteTag(ctx, name, tg.Info.Version); derr != nil && !errors.Is(derr, storage.ErrNotFound) {
				if errors.Is(derr, storage.ErrUnsupported) {
					derr = s.Delete(ctx, tg.Info.Key, storage.DeleteOptions{})
				}
				if derr != nil && !errors.Is(derr, storage.ErrNotFound) {
					return Result{}, fmt.Errorf("tag %q: %s, and removing the tag just created failed (remove it with `retain tag delete`): %w", name, gone, derr)
				}
			}
			return Result{}, &lance.RefError{Op: "create-tag", Key: tg.Info.Key, Err: ErrBranchBeingDeleted,
				Msg:   fmt.Sprintf("branch %q %s; the tag was not kept", branch, gone),
				Cause: storage.Errorf("create-tag", tg.Info.Key, storage.ErrPreconditionFailed, "branch being deleted")}
		}
	}
	c, _ := s.Capabilities().Of(storage.FeatureCreateIfAbsent)
	return Result{Op: "create", Tag: tagRefOf(tg), CAS: "create-if-absent " + c.String()}, nil
}

// ErrBranchBeingDeleted: the tag's branch is being deleted (its branch
// file is marked deleting, or already gone): a tag on it would name
// nothing. Kind storage.ErrPreconditionFailed.
var ErrBranchBeingDeleted = errors.New("the tag's branch is being deleted")

// branchGoing says why branch cannot take a new tag ("is being deleted",
// "has no branch file"), or "" when it can. An unreadable branch file is
// not a reason: the create stands and the delete's own re-check refuses.
func (t *Tags) branchGoing(ctx context.Context, branch string) string {
	b, err := t.ds.ReadBranch(ctx, branch)
	switch {
	case errors.Is(err, lance.ErrBranchNotFound):
		return "has no branch file (deleted, or a delete is in progress)"
	case err != nil:
		return ""
	}
	if l, err := lifecycle.Parse(b.Metadata); err == nil && l.State == lifecycle.Deleting {
		return "is being deleted (its branch file is marked " + string(lifecycle.Deleting) + ")"
	}
	return ""
}

func tagBranchLabel(b string) string {
	if b == "" || b == "main" {
		return "main"
	}
	return fmt.Sprintf("branch %q", b)
}

// List returns every tag whose metadata matches f (nil or empty: every
// tag), sorted by name. Malformed tag files do not stop it: the good tags
// come back together with a *lance.MalformedRefsError naming the bad ones.
func (t *Tags) List(ctx context.Context, f refmeta.Filter) ([]Ref, error) {
	tags, err := t.ds.ListTags(ctx)
	var mal *lance.MalformedRefsError
	if err != nil && !errors.As(err, &mal) {
		return nil, err
	}
	out := []Ref{}
	for _, tg := range tags {
		if f.Match(tg.Metadata) {
			out = append(out, tagRefOf(tg))
		}
	}
	return out, err
}

// Show reads one tag. A missing tag is ErrTagNotFound (kind
// storage.ErrNotFound).
func (t *Tags) Show(ctx context.Context, name string) (Ref, error) {
	tg, err := t.ds.ReadTag(ctx, name)
	if err != nil {
		return Ref{}, err
	}
	return tagRefOf(tg), nil
}

// read reads the tag a write starts from and checks the caller's token.
func (t *Tags) read(ctx context.Context, op, name, ifToken string) (lance.Tag, error) {
	tg, err := t.ds.ReadTag(ctx, name)
	if err != nil {
		return lance.Tag{}, err
	}
	if ifToken != "" && tg.Info.Version != ifToken {
		return lance.Tag{}, &lance.RefError{Op: op, Key: tg.Info.Key, Err: ErrTagChanged,
			Msg:   fmt.Sprintf("tag %q is at version token %q, not the expected %q: read it again and decide", name, tg.Info.Version, ifToken),
			Cause: storage.Errorf(op, tg.Info.Key, storage.ErrPreconditionFailed, "version token mismatch")}
	}
	return tg, nil
}

func tagBeingDeleted(op string, tg lance.Tag) error {
	return &lance.RefError{Op: op, Key: tg.Info.Key, Err: ErrTagNotFound,
		Msg:   fmt.Sprintf("tag %q is being deleted (an interrupted delete marked it %s): `retain tag delete` finishes it", tg.Name, TagDeletingKey),
		Cause: storage.Errorf(op, tg.Info.Key, storage.ErrNotFound, "tag marked deleted")}
}

// casVia says how a conditional write of feature f is made: by the store
// (its capability reaches Scope), or under the configured gates, or not at
// all (storage.ErrUnsupported naming what is missing).
func (t *Tags) casVia(what string, f storage.Feature) (string, bool, error) {
	s := t.ds.Store
	err := s.Require(f, t.opts.Scope)
	if err == nil {
		c, _ := s.Capabilities().Of(f)
		return string(f) + " " + c.String(), false, nil
	}
	if len(t.opts.Gates) > 0 {
		if _, gerr := s.Capabilities().RequireGates(s.Adapter(), t.opts.Scope, t.opts.Gates...); gerr != nil {
			return "", false, fmt.Errorf("tag %s: the store does not provide %s with %s reach and the gates given cannot stand in: %w", what, f, t.opts.Scope, gerr)
		}
		return fmt.Sprintf("gates %v: read, compare, write", t.opts.Gates), true, nil
	}
	return "", false, fmt.Errorf("tag %s needs %s reaching every writer of this store (or gates every writer of the tags holds, --gate); retain does not fall back to check-then-put, nothing was written: %w", what, f, err)
}

// MetaUpdate changes a tag's metadata.
type MetaUpdate struct {
	// Set adds or overwrites these keys.
	Set map[string]string
	// Unset removes these keys (a missing key is fine).
	Unset []string
	// Replace makes Set the whole user metadata (reserved keys are kept).
	Replace bool
	// IfToken, if set, is the version token the tag must still have (from
	// List or Show); otherwise the token of the read this call makes.
	IfToken string
	// Expires, when set, becomes the tag's expiry; ClearExpiry removes it.
	Expires     time.Time
	ClearExpiry bool
}

// UpdateMeta rewrites a tag's metadata with compare-and-swap on the tag
// object: the write succeeds only if the tag is still exactly the object
// read (or IfToken), else ErrTagChanged and nothing is written. createdAt,
// the version and branch are kept; updatedAt is refreshed. A tag that does
// not exist, was deleted meanwhile, or is being deleted is ErrTagNotFound:
// an update never creates a tag.
func (t *Tags) UpdateMeta(ctx context.Context, name string, u MetaUpdate) (Result, error) {
	const op = "update-tag"
	if err := tagWritable(op, name); err != nil {
		return Result{}, err
	}
	if err := t.authorize(ctx, authz.ActionTagUpdate, name); err != nil {
		return Result{}, err
	}
	if err := tagUserMeta(op, name, u.Set); err != nil {
		return Result{}, err
	}
	if err := tagUserKeys(op, name, u.Unset...); err != nil {
		return Result{}, err
	}
	switch {
	case u.Replace && len(u.Unset) > 0:
		return Result{}, tagRefusal(op, name, storage.ErrInvalidArgument, "replace sets the whole metadata: unset has no meaning with it")
	case !u.Expires.IsZero() && u.ClearExpiry:
		return Result{}, tagRefusal(op, name, storage.ErrInvalidArgument, "an expiry to set and one to clear: give one")
	case !u.Replace && len(u.Set) == 0 && len(u.Unset) == 0 && u.Expires.IsZero() && !u.ClearExpiry:
		return Result{}, tagRefusal(op, name, storage.ErrInvalidArgument, "nothing to update: give metadata to set, keys to unset, or replace")
	}
	cas, gated, err := t.casVia("update", storage.FeatureReplaceIfVersion)
	if err != nil {
		return Result{}, err
	}
	var res Result
	write := func(ctx context.Context) error {
		old, err := t.read(ctx, op, name, u.IfToken)
		if err != nil {
			return err
		}
		if _, marked := old.Metadata[TagDeletingKey]; marked {
			return tagBeingDeleted(op, old)
		}
		tagAfterRead(op)
		meta := map[string]string{}
		for k, v := range old.Metadata {
			if !u.Replace || strings.HasPrefix(k, refmeta.ReservedPrefix) {
				meta[k] = v
			}
		}
		for _, k := range u.Unset {
			delete(meta, k)
		}
		for k, v := range u.Set {
			meta[k] = v
		}
		switch {
		case !u.Expires.IsZero():
			meta[refmeta.MetaExpires] = refmeta.FormatExpiry(u.Expires)
		case u.ClearExpiry:
			delete(meta, refmeta.MetaExpires)
		}
		next, err := t.ds.UpdateTagFile(ctx, old, meta, lance.UpdateTagOptions{Gated: gated})
		if err != nil {
			return err
		}
		res = Result{Op: "update", Tag: tagRefOf(next), CAS: cas}
		return nil
	}
	if gated {
		err = t.ds.Store.WithGates(ctx, t.opts.Scope, t.opts.Gates, write)
	} else {
		err = write(ctx)
	}
	if err != nil {
		return Result{}, err
	}
	return res, nil
}

// Delete removes a tag with delete-if-version of the object read (or of
// IfToken): a tag updated since is ErrTagChanged and stays — a delete never
// removes a state it did not see. A missing tag is ErrTagNotFound. The
// result holds the state deleted. See the table above for stores without
// conditional delete.
func (t *Tags) Delete(ctx context.Context, name, ifToken string) (Result, error) {
	const op = "delete-tag"
	if err := tagWritable(op, name); err != nil {
		return Result{}, err
	}
	if err := t.authorize(ctx, authz.ActionTagDelete, name); err != nil {
		return Result{}, err
	}
	s := t.ds.Store
	if s.Require(storage.FeatureDeleteIfVersion, t.opts.Scope) != nil && s.Require(storage.FeatureReplaceIfVersion, t.opts.Scope) == nil {
		return t.deleteMarked(ctx, name, ifToken)
	}
	cas, gated, err := t.casVia("delete", storage.FeatureDeleteIfVersion)
	if err != nil {
		return Result{}, err
	}
	// Updates that run under gates (read, compare, overwrite) are only
	// exclusive against writers holding the same gates: a delete then holds
	// them too, or it could land between an update's compare and its
	// overwrite, and the overwrite would bring the tag back.
	holdGates := gated
	if !holdGates && len(t.opts.Gates) > 0 && s.Require(storage.FeatureReplaceIfVersion, t.opts.Scope) != nil {
		_, gerr := s.Capabilities().RequireGates(s.Adapter(), t.opts.Scope, t.opts.Gates...)
		holdGates = gerr == nil // else no gated update can run to race with
	}
	var res Result
	del := func(ctx context.Context) error {
		old, err := t.read(ctx, op, name, ifToken)
		if err != nil {
			return err
		}
		tagAfterRead(op)
		if gated {
			err = t.deleteGated(ctx, old)
		} else {
			err = t.ds.DeleteTag(ctx, name, old.Info.Version)
		}
		if err != nil {
			return err
		}
		res = Result{Op: "delete", Tag: tagRefOf(old), CAS: cas}
		return nil
	}
	if holdGates {
		err = s.WithGates(ctx, t.opts.Scope, t.opts.Gates, del)
	} else {
		err = del(ctx)
	}
	if err != nil {
		return Result{}, err
	}
	return res, nil
}

// deleteMarked deletes on a store with replace-if-version but without
// delete-if-version: mark the object read with TagDeletingKey by
// replace-if-version, then delete the marked object.
func (t *Tags) deleteMarked(ctx context.Context, name, ifToken string) (Result, error) {
	const op = "delete-tag"
	s := t.ds.Store
	old, err := t.read(ctx, op, name, ifToken)
	if err != nil {
		return Result{}, err
	}
	tagAfterRead(op)
	// Always mark with this delete's own token, even a tag an interrupted
	// delete marked already: the compare-and-swap then proves the object
	// about to go is the one read, not a tag created since under the same
	// name. Without delete-if-version the final delete is unconditional;
	// a stat right before it narrows what remains to a second delete and
	// a re-create landing inside that one request (docs/refs.md).
	meta := map[string]string{}
	for k, v := range old.Metadata {
		meta[k] = v
	}
	meta[TagDeletingKey] = tagMarkToken()
	marked, err := t.ds.UpdateTagFile(ctx, old, meta, lance.UpdateTagOptions{DropUnknown: true})
	if err != nil {
		return Result{}, err
	}
	if cur, err := s.Stat(ctx, marked.Info.Key); err != nil || cur.Version != marked.Info.Version {
		if err == nil {
			err = storage.Errorf(op, marked.Info.Key, storage.ErrPreconditionFailed, "version token %q, marked %q", cur.Version, marked.Info.Version)
		}
		return Result{}, &lance.RefError{Op: op, Key: marked.Info.Key, Err: ErrTagChanged,
			Msg: fmt.Sprintf("tag %q changed right after this delete marked it; it was kept: read it again and decide", name), Cause: err}
	}
	if err := s.Delete(ctx, marked.Info.Key, storage.DeleteOptions{}); err != nil {
		return Result{}, fmt.Errorf("delete tag %q: it is marked %s and stays listed until a delete finishes: %w", name, TagDeletingKey, err)
	}
	c, _ := s.Capabilities().Of(storage.FeatureReplaceIfVersion)
	return Result{Op: "delete", Tag: tagRefOf(old),
		CAS: "replace-if-version " + c.String() + " mark, then delete (the store has no delete-if-version)"}, nil
}

// deleteGated deletes old under held gates: read, compare, delete.
func (t *Tags) deleteGated(ctx context.Context, old lance.Tag) error {
	s := t.ds.Store
	cur, err := s.Stat(ctx, old.Info.Key)
	switch {
	case errors.Is(err, storage.ErrNotFound):
		return &lance.RefError{Op: "delete-tag", Key: old.Info.Key, Err: ErrTagNotFound, Msg: fmt.Sprintf("no tag %q", old.Name), Cause: err}
	case err != nil:
		return err
	case cur.Version != old.Info.Version:
		return &lance.RefError{Op: "delete-tag", Key: old.Info.Key, Err: ErrTagChanged,
			Msg:   fmt.Sprintf("tag %q is no longer at version token %q and was kept: read it again and decide", old.Name, old.Info.Version),
			Cause: storage.Errorf("delete-tag", old.Info.Key, storage.ErrPreconditionFailed, "version token %q", cur.Version)}
	}
	return s.Delete(ctx, old.Info.Key, storage.DeleteOptions{})
}

// tagHookAfterRead, if set (tests only), runs in every update and delete
// between the read and the conditional write: the window a compare-and-swap
// must close.
var tagHookAfterRead func(op string)

func tagAfterRead(op string) {
	if tagHookAfterRead != nil {
		tagHookAfterRead(op)
	}
}

func tagMarkToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Resolve says where a tag points — its branch, version and manifest — as
// a checkout by the tag would open it. A tag whose version no longer
// exists is ErrTagDangling (kind storage.ErrNotFound); a tag being deleted is
// ErrTagNotFound.
func (t *Tags) Resolve(ctx context.Context, name string) (Resolution, error) {
	tg, err := t.ds.ReadTag(ctx, name)
	if err != nil {
		return Resolution{}, err
	}
	if _, marked := tg.Metadata[TagDeletingKey]; marked {
		return Resolution{}, tagBeingDeleted("resolve-tag", tg)
	}
	src := t.ds
	if tg.Branch != "" {
		if src, err = t.ds.Branch(tg.Branch); err != nil {
			return Resolution{}, err
		}
	}
	v, err := src.VersionAt(ctx, tg.Version)
	if errors.Is(err, storage.ErrNotFound) {
		return Resolution{}, &lance.RefError{Op: "resolve-tag", Key: tg.Info.Key, Err: ErrTagDangling,
			Msg: fmt.Sprintf("tag %q names version %d of %s, which does not exist", name, tg.Version, tagBranchLabel(tg.Branch)), Cause: err}
	}
	if err != nil {
		return Resolution{}, err
	}
	r := tagRefOf(tg)
	return Resolution{Tag: name, Branch: r.Branch, Version: tg.Version, ManifestKey: t.ds.Rel(v.Key),
		ManifestSize: v.Info.Size, RecordedSize: tg.ManifestSize, SizeMatches: uint64(v.Info.Size) == tg.ManifestSize,
		Token: tg.Info.Version}, nil
}
