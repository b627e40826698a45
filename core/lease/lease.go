// Package lease is reader leases: a reader that scans one version of a
// table for a long time pins it for a while, so that no cleanup — retain's
// or, once it lists the tags again, Lance's own — deletes its files under
// it (lance issue #6607).
//
// A lease is a Lance tag in retain's reserved namespace, ogcp_lease_<id>,
// on the leased version, whose metadata says when it expires. Being a tag,
// it keeps its version through every cleanup while it exists; expiry only
// lets the reaper (Reap, run by the daemon before each retention pass, or
// `retain lease reap`) delete the tag once the reaper's clock is past the
// expiry by a margin. A wall clock decides here and nowhere else in retain,
// and it only ever decides to keep less after the expiry it was told: it
// never takes a claim or removes data itself. Clocks are assumed to be
// within the margin (default 5m) of each other; a reader renews well
// before expiry (a third of the TTL left is the advice).
//
// Acquire is safe against a retain cleanup running at the same time
// without taking the retention claim (on a store whose listings show a
// write at once, Capabilities.ListAfterWrite, as every bundled adapter
// declares): it writes the tag first and reads
// the registry's gc boundary second. A cleanup publishes its boundary
// before it re-reads a table's tags and deletes, so either the acquire
// sees the boundary covering its version (and refuses, removing its tag),
// or the cleanup's re-read sees the tag (and leaves the table untouched).
package lease

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/retain-dev/retain/core/authz"
	"github.com/retain-dev/retain/core/checkpoint/registry"
	"github.com/retain-dev/retain/core/lance"
	"github.com/retain-dev/retain/core/refs/lifecycle"
	"github.com/retain-dev/retain/core/refs/refmeta"
	"github.com/retain-dev/retain/core/storage"
)

// Metadata keys of a lease tag (reserved: user metadata cannot use them).
const (
	MetaExpires  = refmeta.ReservedPrefix + "lease.expires"  // RFC 3339, UTC
	MetaHolder   = refmeta.ReservedPrefix + "lease.holder"   // who acquired it
	MetaAcquired = refmeta.ReservedPrefix + "lease.acquired" // RFC 3339, UTC
)

// Bounds and defaults.
const (
	// DefaultMargin is how far past its expiry the reaper's clock must be
	// before it removes a lease: the clock skew leases tolerate, the same
	// for every expiry.
	DefaultMargin = refmeta.DefaultExpiryMargin
	// MaxTTL bounds one acquire or renew: a version to keep for longer
	// wants a tag or a checkpoint, which are not reaped.
	MaxTTL = 7 * 24 * time.Hour
)

// Errors of the lease operations.
var (
	// ErrGone: the lease's tag is not there — released, or expired and
	// reaped. Acquire a new one (the version may be gone). Kind
	// storage.ErrNotFound.
	ErrGone = fmt.Errorf("the lease is gone (%w)", storage.ErrNotFound)
	// ErrNotLease: the tag named is not a lease. Kind
	// storage.ErrInvalidArgument.
	ErrNotLease = fmt.Errorf("not a lease (%w)", storage.ErrInvalidArgument)
	// ErrBehindBoundary: a cleanup has removed, or is removing, versions
	// up to or past the one asked for. Kind storage.ErrPreconditionFailed.
	ErrBehindBoundary = fmt.Errorf("the version is at or behind its table's gc boundary (%w)", storage.ErrPreconditionFailed)
	// ErrBranchGoing: the leased branch is being deleted, or gone. Kind
	// storage.ErrPreconditionFailed.
	ErrBranchGoing = fmt.Errorf("the branch is being deleted (%w)", storage.ErrPreconditionFailed)
)

// Lease is one reader lease as read from its tag.
type Lease struct {
	ID registry.ID `json:"id"`
	// Table is the table's folder in the store ("events.lance").
	Table    string    `json:"table"`
	Tag      string    `json:"tag"`
	Branch   string    `json:"branch"`
	Version  uint64    `json:"version"`
	Holder   string    `json:"holder"`
	Acquired time.Time `json:"acquired"`
	Expires  time.Time `json:"expires"`
	// Token is the tag object's version: renew and release are
	// conditional on it.
	Token string `json:"token"`
	// Problem says why the lease's metadata could not be read; such a
	// lease is never reaped (fail closed), and `retain lease release`
	// removes it.
	Problem string `json:"problem,omitempty"`
}

// Options say who acts and by which clock.
type Options struct {
	// Actor is recorded as the holder; default "" (none recorded).
	Actor string
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

func (o Options) now() time.Time {
	if o.Now != nil {
		return o.Now().UTC()
	}
	return time.Now().UTC()
}

// Request is what Acquire leases.
type Request struct {
	Table string
	// Branch: "" or "main" for main.
	Branch string
	// Version: 0 is the branch's newest version at acquire.
	Version uint64
	TTL     time.Duration
}

func checkTTL(ttl time.Duration) error {
	if ttl <= 0 || ttl > MaxTTL {
		return storage.Errorf("lease", ttl.String(), storage.ErrInvalidArgument,
			"a lease lasts more than 0 and at most %s (--ttl); to keep a version longer, tag it or take a checkpoint", MaxTTL)
	}
	return nil
}

// Acquire pins req's version of its table for req.TTL and returns the
// lease. See the package comment for why it is safe beside a cleanup.
func Acquire(ctx context.Context, s *storage.Store, req Request, o Options) (*Lease, error) {
	if err := checkTTL(req.TTL); err != nil {
		return nil, err
	}
	branch := req.Branch
	if branch == registry.MainBranch {
		branch = ""
	}
	id := registry.NewID()
	name := registry.LeaseTagName(id)
	if err := authz.Check(ctx, authz.Request{Action: authz.ActionLeaseAcquire, Store: authz.StoreName(s), Table: req.Table, Tag: name}); err != nil {
		return nil, err
	}
	ds, err := lance.Open(s, req.Table)
	if err != nil {
		return nil, err
	}
	version := req.Version
	if version == 0 {
		src := ds
		if branch != "" {
			if src, err = ds.Branch(branch); err != nil {
				return nil, err
			}
		}
		v, err := src.Latest(ctx)
		if err != nil {
			return nil, err
		}
		version = v.N
	}
	now := o.now()
	meta := map[string]string{MetaExpires: stamp(now.Add(req.TTL)), MetaAcquired: stamp(now)}
	if o.Actor != "" {
		meta[MetaHolder] = o.Actor
	}
	tg, err := ds.CreateTagOnBranch(ctx, name, branch, version, meta)
	if err != nil {
		return nil, err
	}
	// The tag is written: now the boundary (see the package comment), and
	// for a branch its file. A branch delete marks the file deleting and
	// then re-reads the branch's tags; so either it sees this tag and
	// refuses, or this read sees the mark (or no file) and the lease is
	// refused. Anything unreadable refuses the lease too.
	err = checkBoundary(ctx, s, req.Table, branch, version)
	if err == nil && branch != "" {
		err = checkBranchStays(ctx, ds, branch)
	}
	if err != nil {
		if derr := ds.DeleteTag(context.WithoutCancel(ctx), name, tg.Info.Version); derr != nil && !errors.Is(derr, lance.ErrTagNotFound) {
			err = fmt.Errorf("%w; and removing the refused lease's tag %s failed (it only keeps the version; `retain lease release %s` removes it): %v", err, name, id, derr)
		}
		return nil, err
	}
	l := fromTag(req.Table, tg)
	return &l, nil
}

// checkBranchStays refuses a lease on a branch being deleted or gone.
func checkBranchStays(ctx context.Context, ds *lance.Dataset, branch string) error {
	b, err := ds.ReadBranch(ctx, branch)
	if errors.Is(err, lance.ErrBranchNotFound) {
		return fmt.Errorf("%w: branch %q of %s has no branch file any more (deleted, or a delete is in progress); the lease was not kept", ErrBranchGoing, branch, ds.Root)
	}
	if err != nil {
		return fmt.Errorf("re-reading branch %q after writing the lease: %w; the lease was not kept", branch, err)
	}
	l, err := lifecycle.Parse(b.Metadata)
	if err != nil {
		return fmt.Errorf("branch %q of %s: %v; the lease was not kept", branch, ds.Root, err)
	}
	if l.State == lifecycle.Deleting {
		return fmt.Errorf("%w: branch %q of %s is being deleted (operation %s); the lease was not kept", ErrBranchGoing, branch, ds.Root, l.Op)
	}
	return nil
}

// checkBoundary refuses a version a cleanup removed or is removing.
func checkBoundary(ctx context.Context, s *storage.Store, table, branch string, version uint64) error {
	_, snap, err := registry.Open(s, registry.Options{}).Head(ctx)
	if err != nil {
		return fmt.Errorf("reading the registry's gc boundaries after writing the lease: %w; the lease is refused", err)
	}
	t, ok := snap.TableByPath(table)
	if !ok {
		return nil // never cleaned by retain: no boundary
	}
	b := branch
	if b == "" {
		b = registry.MainBranch
	}
	err = snap.CheckGCBoundary(registry.Pin{TableID: t.ID, Incarnation: t.Incarnation, Target: registry.Target{Path: table, Branch: b, Version: version}})
	if errors.Is(err, registry.ErrBehindGCBoundary) {
		return fmt.Errorf("%w: %v; lease a newer version", ErrBehindBoundary, err)
	}
	return err
}

// Renew extends lease id of table to now+ttl, conditional on the tag
// being as last read (a concurrent renew or reap wins; read and retry).
func Renew(ctx context.Context, s *storage.Store, table string, id registry.ID, ttl time.Duration, o Options) (*Lease, error) {
	if err := checkTTL(ttl); err != nil {
		return nil, err
	}
	ds, tg, err := read(ctx, s, table, id, authz.ActionLeaseRenew)
	if err != nil {
		return nil, err
	}
	meta := map[string]string{}
	for k, v := range tg.Metadata {
		meta[k] = v
	}
	meta[MetaExpires] = stamp(o.now().Add(ttl))
	nt, err := ds.UpdateTagFile(ctx, tg, meta, lance.UpdateTagOptions{})
	if errors.Is(err, lance.ErrTagNotFound) {
		return nil, gone(table, id)
	}
	if err != nil {
		return nil, err
	}
	l := fromTag(table, nt)
	return &l, nil
}

// Release removes lease id of table (delete-if-version of the tag read).
// A lease already gone is ErrGone.
func Release(ctx context.Context, s *storage.Store, table string, id registry.ID) (*Lease, error) {
	ds, tg, err := read(ctx, s, table, id, authz.ActionLeaseRelease)
	if err != nil {
		return nil, err
	}
	if tg.Info.Version == "" {
		return nil, errNoToken(tg.Name)
	}
	if err := ds.DeleteTag(ctx, tg.Name, tg.Info.Version); err != nil {
		if errors.Is(err, lance.ErrTagNotFound) {
			return nil, gone(table, id)
		}
		return nil, err
	}
	l := fromTag(table, tg)
	return &l, nil
}

func read(ctx context.Context, s *storage.Store, table string, id registry.ID, a authz.Action) (*lance.Dataset, lance.Tag, error) {
	// The id, or the whole tag name (a lease whose id does not parse,
	// which `retain lease list` shows, is released by its tag name).
	name := string(id)
	if !registry.IsLeaseTag(name) {
		if err := id.Validate(); err != nil {
			return nil, lance.Tag{}, storage.Errorf("lease", string(id), storage.ErrInvalidArgument, "not a lease id (the 26 characters `retain lease acquire` printed) or a lease's tag name (%s…): %v", registry.LeaseTagPrefix, err)
		}
		name = registry.LeaseTagName(id)
	}
	if err := authz.Check(ctx, authz.Request{Action: a, Store: authz.StoreName(s), Table: table, Tag: name}); err != nil {
		return nil, lance.Tag{}, err
	}
	ds, err := lance.Open(s, table)
	if err != nil {
		return nil, lance.Tag{}, err
	}
	tg, err := ds.ReadTag(ctx, name)
	if errors.Is(err, lance.ErrTagNotFound) {
		return nil, lance.Tag{}, gone(table, id)
	}
	return ds, tg, err
}

// errNoToken refuses a conditional write on a store that gave no version
// token: an unconditional delete could remove a renewal it never saw.
func errNoToken(tag string) error {
	return storage.Errorf("lease", tag, storage.ErrUnsupported, "the store gave the lease's tag no version token, so it cannot be removed only as read; nothing was removed")
}

func gone(table string, id registry.ID) error {
	return fmt.Errorf("lease %s on %s: %w: it was released, or expired and was reaped; acquire a new one", id, table, ErrGone)
}

// List reads the leases of table, by expiry.
func List(ctx context.Context, s *storage.Store, table string) ([]Lease, error) {
	ds, err := lance.Open(s, table)
	if err != nil {
		return nil, err
	}
	ts, err := ds.ListTags(ctx)
	if err != nil {
		return nil, err
	}
	var out []Lease
	for _, tg := range ts {
		if registry.IsLeaseTag(tg.Name) {
			out = append(out, fromTag(table, tg))
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].Expires.Equal(out[j].Expires) {
			return out[i].Expires.Before(out[j].Expires)
		}
		return out[i].Tag < out[j].Tag
	})
	return out, nil
}

// FromTag reads a lease from its tag (a registry.IsLeaseTag name) in
// table; metadata that does not parse is the lease's Problem, never a zero
// expiry.
func FromTag(table string, tg lance.Tag) Lease { return fromTag(table, tg) }

func fromTag(table string, tg lance.Tag) Lease {
	l := Lease{ID: registry.ID(strings.TrimPrefix(tg.Name, registry.LeaseTagPrefix)), Table: table, Tag: tg.Name, Branch: tg.Branch,
		Version: tg.Version, Holder: tg.Metadata[MetaHolder], Token: tg.Info.Version}
	if l.Branch == "" {
		l.Branch = registry.MainBranch
	}
	var problems []string
	if err := l.ID.Validate(); err != nil {
		problems = append(problems, "the tag's id does not parse")
	}
	exp, ok := tg.Metadata[MetaExpires]
	if t, err := time.Parse(time.RFC3339Nano, exp); ok && err == nil {
		l.Expires = t.UTC()
	} else {
		problems = append(problems, fmt.Sprintf("%s is %q, not a time", MetaExpires, exp))
	}
	if t, err := time.Parse(time.RFC3339Nano, tg.Metadata[MetaAcquired]); err == nil {
		l.Acquired = t.UTC()
	}
	l.Problem = strings.Join(problems, "; ")
	return l
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
