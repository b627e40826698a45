package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/retain-dev/retain/core/authz"
	"github.com/retain-dev/retain/core/checkpoint/registry"
	"github.com/retain-dev/retain/core/failpoint"
	"github.com/retain-dev/retain/core/internal/fanout"
	"github.com/retain-dev/retain/core/lance"
	"github.com/retain-dev/retain/core/refs/lifecycle"
	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/claim"
)

// Failpoints of the create protocol, in order. Each is hit right after the
// step it names (see internal/failpoint).
const (
	FPCreateAfterCapture     = "create/after-capture"
	FPCreateAfterClaim       = "create/after-claim"
	FPCreateAfterRevalidate  = "create/after-revalidate"
	FPCreateAfterSidecar     = "create/after-sidecar"
	FPCreateMidTags          = "create/mid-tags" // after the first tag
	FPCreateAfterTags        = "create/after-tags"
	FPCreateAfterVerify      = "create/after-verify"
	FPCreateAfterCommit      = "create/after-commit"
	FPCreateAfterSidecarGone = "create/after-sidecar-delete"
	FPCreateAfterRelease     = "create/after-release"
)

// CreateFailpoints lists the create failpoints in protocol order.
var CreateFailpoints = []string{FPCreateAfterCapture, FPCreateAfterClaim, FPCreateAfterRevalidate,
	FPCreateAfterSidecar, FPCreateMidTags, FPCreateAfterTags, FPCreateAfterVerify, FPCreateAfterCommit,
	FPCreateAfterSidecarGone, FPCreateAfterRelease}

// Options configure the protocols. The zero value is what the CLI uses.
type Options struct {
	// Actor recorded in headers and tombstones; default the claim's
	// ($USER@host).
	Actor string
	// Scope of the store's writers; zero means claim.ScopeFor(s.Location()).
	Scope storage.Scope
	// Host names this process's host in the claim (claim.Request.Host);
	// default os.Hostname(). The fleet daemon puts its identity here.
	Host string
	// Gates are adapter gates to hold with the claim, taken in canonical
	// order by storage.Store.WithGates. None by default.
	Gates []string
	// Retries bounds how often create restarts after revalidation found a
	// change, the heads read after the tags differed from the capture (or
	// a tagged version vanished), or the registry CAS was lost; default 3.
	Retries int
	// FreshName makes Create refuse a name that was ever used, even by a
	// checkpoint deleted since (registry.ErrNameTombstoned; the registry
	// keeps every name's reservation): the daemon's scheduled checkpoints,
	// whose one name per slot must be taken at most once.
	FreshName bool
}

// checkFresh is FreshName's refusal of a tombstoned name.
func (o Options) checkFresh(src *source, name string) error {
	if o.FreshName && src.hasRes && src.resv.State != registry.Live {
		return refusal("create", name, registry.ErrNameTombstoned,
			fmt.Sprintf("checkpoint %s had the name (generation %d) and was deleted; a fresh name is required", src.resv.CheckpointID, src.resv.Generation), nil)
	}
	return nil
}

func (o Options) scope(s *storage.Store) storage.Scope {
	if o.Scope != storage.ScopeNone {
		return o.Scope
	}
	return claim.ScopeFor(s.Location())
}

func (o Options) retries() int {
	if o.Retries > 0 {
		return o.Retries
	}
	return 3
}

// CapturedTable is one table as a checkpoint pins it.
type CapturedTable struct {
	Path        string      `json:"path"`
	TableID     registry.ID `json:"table_id"`
	Incarnation uint64      `json:"incarnation"`
	// NewTable: first seen by this checkpoint; NewIncarnation: the table
	// was recreated at its path since the catalog last saw it.
	NewTable       bool          `json:"new_table,omitempty"`
	NewIncarnation bool          `json:"new_incarnation,omitempty"`
	Branch         string        `json:"branch"`
	Version        uint64        `json:"version"`
	PhysicalRef    string        `json:"physical_ref"`
	Tag            string        `json:"tag"`
	ref            lance.PhysRef // parsed PhysicalRef
	// head is the listing's record of the head manifest (key, size and the
	// store's version token): revalidation finds the same object by it.
	head storage.Info
}

// Created is what Create returns: the exact versions captured.
type Created struct {
	ID              registry.ID      `json:"id"`
	Name            string           `json:"name"`
	Generation      uint64           `json:"generation"`
	SourceBranch    string           `json:"source_branch"`
	RegistryVersion registry.Version `json:"registry_version"`
	RegistryPinTag  string           `json:"registry_pin_tag"`
	CreatedAt       time.Time        `json:"created_at"`
	Actor           string           `json:"actor"`
	OperationID     string           `json:"operation_id"`
	Attempts        int              `json:"attempts"`
	Tables          []CapturedTable  `json:"tables"`
	// Warnings: things that went wrong after the commit (the checkpoint
	// exists): a sidecar or claim left behind, which reconcile clears.
	Warnings []string `json:"warnings,omitempty"`
}

// source is one immutable capture of the source.
type source struct {
	head   registry.Version
	snap   *registry.Snapshot
	resv   registry.Reservation
	hasRes bool
	paths  []string // the table folders discovered, tables or not
	tables []CapturedTable
}

// testHookBeforeTags runs (in tests) after the revalidation of the
// registry and the table set, before the sidecar and the tags: a change
// here is found by the heads' second reading, after the tags.
var testHookBeforeTags func()

// Create takes checkpoint name of every table of the store on branch
// ("" means main) with the zero Options.
func Create(ctx context.Context, s *storage.Store, name, branch string) (*Created, error) {
	return Options{}.Create(ctx, s, name, branch)
}

// Create runs the create protocol (docs/checkpoints.md, "Create"):
// capture, claim (+ gates), revalidate, sidecar, tags, verify, one
// registry commit, sidecar delete, release.
func (o Options) Create(ctx context.Context, s *storage.Store, name, branch string) (*Created, error) {
	if err := registry.ValidateName(name); err != nil {
		return nil, err
	}
	// Authorized before any read or write: a denial changes nothing.
	if err := authz.Check(ctx, authz.Request{Action: authz.ActionCheckpointCreate, Store: authz.StoreName(s), Checkpoint: name}); err != nil {
		return nil, err
	}
	if branch == "" {
		branch = registry.MainBranch
	}
	reg := registry.Open(s, registry.Options{Scope: o.scope(s)})
	var last error
	for attempt := 1; attempt <= o.retries(); attempt++ {
		src, err := capture(ctx, s, reg, name, branch)
		if err != nil {
			return nil, err
		}
		if err := o.checkFresh(src, name); err != nil {
			return nil, err
		}
		failpoint.Hit(FPCreateAfterCapture)
		res, retry, err := o.createClaimed(ctx, s, reg, src, name, branch)
		if !retry {
			if res != nil {
				res.Attempts = attempt
			}
			return res, err
		}
		last = err
	}
	return nil, refusal("create", name, ErrSourceChanged,
		fmt.Sprintf("the source kept changing over %d attempts; nothing was published", o.retries()), last)
}

// capture reads the registry head, the table set and every table's head
// on branch.
func capture(ctx context.Context, s *storage.Store, reg *registry.Registry, name, branch string) (*source, error) {
	src, err := captureShape(ctx, s, reg, name)
	if err != nil {
		return nil, err
	}
	if src.tables, err = captureTables(ctx, s, src.snap, src.paths, branch, nil); err != nil {
		return nil, err
	}
	if len(src.tables) == 0 {
		return nil, errorf("create", name, ErrNoTables, "no <table>.lance/ folder with a manifest at the top of the store")
	}
	return src, nil
}

// captureShape reads what the claim guards and the table set: the
// registry head, the name's reservation and the table folders.
func captureShape(ctx context.Context, s *storage.Store, reg *registry.Registry, name string) (*source, error) {
	head, snap, err := reg.Head(ctx)
	if err != nil {
		return nil, err
	}
	src := &source{head: head, snap: snap}
	src.resv, src.hasRes = snap.Reservation(name)
	if src.hasRes && src.resv.State == registry.Live {
		return nil, refusal("create", name, registry.ErrNameTaken,
			fmt.Sprintf("checkpoint %s holds the name (generation %d): delete it first or choose another name", src.resv.CheckpointID, src.resv.Generation), nil)
	}
	if src.paths, err = DiscoverTables(ctx, s); err != nil {
		return nil, err
	}
	return src, nil
}

// captureTables reads the head of every table at paths on branch, side by
// side (the store's limiter bounds the requests). prev, an earlier
// capture against the same registry version, lends what it read of a
// head that is the same object, and the fresh ids of its new tables.
func captureTables(ctx context.Context, s *storage.Store, snap *registry.Snapshot, paths []string, branch string, prev []CapturedTable) ([]CapturedTable, error) {
	before := map[string]*CapturedTable{}
	for i := range prev {
		before[prev[i].Path] = &prev[i]
	}
	cat := newCatalogIndex(snap)
	type captured struct {
		ct CapturedTable
		ok bool
	}
	caps, err := fanout.Map(ctx, s.Parallelism(), len(paths), func(ctx context.Context, i int) (captured, error) {
		ct, ok, err := captureTable(ctx, s, snap, cat, paths[i], branch, before[paths[i]])
		return captured{ct, ok}, err
	})
	if err != nil {
		return nil, err
	}
	var tables []CapturedTable
	for i, p := range paths {
		ct, ok := caps[i].ct, caps[i].ok
		if !ok {
			continue
		}
		if pt := before[p]; ct.NewTable && pt != nil && pt.NewTable {
			ct.TableID = pt.TableID
		}
		tables = append(tables, ct)
	}
	return tables, nil
}

// captureTable reads one table's head on branch. prev is what an earlier
// capture of the same registry version read of it (nil: none): when the
// head is still the same object (same key, size and version token), its
// physical ref and catalog identity are what they were, and only the
// listing is paid again.
func captureTable(ctx context.Context, s *storage.Store, snap *registry.Snapshot, cat *catalogIndex, path, branch string, prev *CapturedTable) (CapturedTable, bool, error) {
	ds, err := lance.Open(s, path)
	if err != nil {
		return CapturedTable{}, false, err
	}
	bds := ds
	if branch != registry.MainBranch {
		if bds, err = ds.Branch(branch); err != nil {
			return CapturedTable{}, false, err
		}
	}
	head, err := bds.Latest(ctx)
	if errors.Is(err, lance.ErrNotDataset) {
		if branch == registry.MainBranch {
			return CapturedTable{}, false, nil // no manifest: not a table (yet)
		}
		if _, merr := ds.Latest(ctx); errors.Is(merr, lance.ErrNotDataset) {
			return CapturedTable{}, false, nil
		}
		return CapturedTable{}, false, errorf("create", path, ErrMissingTarget, "table %s has no branch %q: every table of the store must have the branch", path, branch)
	}
	if err != nil {
		return CapturedTable{}, false, err
	}
	if branch != registry.MainBranch {
		// Only a listed branch is pinned: a branch whose file is gone is
		// being deleted (ref first, then its folder) or is an orphan folder,
		// and one marked deleting is on its way; a pin on either would hold
		// files its parent's delete does not know about.
		b, err := ds.ReadBranch(ctx, branch)
		if errors.Is(err, lance.ErrBranchNotFound) {
			return CapturedTable{}, false, errorf("create", path, ErrMissingTarget,
				"table %s: branch %q has files under tree/ but no branch file: a branch delete is in progress (finish it with `retain branch delete`) or the folder is an orphan; it is not pinned", path, branch)
		}
		if err != nil {
			return CapturedTable{}, false, err
		}
		if l, err := lifecycle.Parse(b.Metadata); err != nil || l.State == lifecycle.Deleting {
			why := "is being deleted (marked deleting)"
			if err != nil {
				why = "has lifecycle keys retain cannot read: " + err.Error()
			}
			return CapturedTable{}, false, errorf("create", path, ErrMissingTarget, "table %s: branch %q %s; it is not pinned", path, branch, why)
		}
	}
	if prev != nil && sameObject(prev.head, head.Info) && prev.Version == head.N && prev.Branch == branch {
		return *prev, true, nil
	}
	ref, err := bds.PhysRef(ctx, head)
	if err != nil {
		return CapturedTable{}, false, err
	}
	ct := CapturedTable{Path: path, Branch: branch, Version: head.N, PhysicalRef: ref.String(), ref: ref, head: head.Info}
	if t, ok := snap.TableByPath(path); ok {
		var mh *mainHead
		if branch == registry.MainBranch {
			mh = &mainHead{v: head, ref: ref}
		}
		changed, _, err := cat.incarnationChanged(ctx, t, ds, mh)
		if err != nil {
			return CapturedTable{}, false, err
		}
		ct.TableID, ct.Incarnation, ct.NewIncarnation = t.ID, t.Incarnation, changed
		if changed {
			ct.Incarnation++
		}
	} else {
		ct.TableID, ct.Incarnation, ct.NewTable = registry.NewID(), 1, true
	}
	return ct, true, nil
}

// sameObject: two listings' records of one key name the same object. A
// store that reports no version token proves nothing this way.
func sameObject(a, b storage.Info) bool {
	return a.Version != "" && a.Key == b.Key && a.Version == b.Version && a.Size == b.Size
}

// sameShape reports what differs between two readings of the registry
// and the table set, "" if nothing.
func sameShape(a, b *source) string {
	if a.head != b.head {
		return fmt.Sprintf("the registry moved from version %d to %d", a.head, b.head)
	}
	if a.hasRes != b.hasRes || a.resv != b.resv {
		return "the name's reservation changed"
	}
	if !slices.Equal(a.paths, b.paths) {
		return fmt.Sprintf("the table folders changed (%d, now %d)", len(a.paths), len(b.paths))
	}
	return ""
}

// sameTables reports what differs between two readings of the tables'
// heads, "" if nothing.
func sameTables(a, b []CapturedTable) string {
	if len(a) != len(b) {
		return fmt.Sprintf("the tables changed (%d, now %d)", len(a), len(b))
	}
	for i := range a {
		x, y := a[i], b[i]
		switch {
		case x.Path != y.Path:
			return fmt.Sprintf("the tables changed (%s, now %s)", x.Path, y.Path)
		case x.TableID != y.TableID || x.Incarnation != y.Incarnation || x.NewTable != y.NewTable || x.NewIncarnation != y.NewIncarnation:
			return fmt.Sprintf("table %s: its catalog identity changed", x.Path)
		case x.Version != y.Version:
			return fmt.Sprintf("table %s: the head moved from version %d to %d", x.Path, x.Version, y.Version)
		case !x.ref.Equal(y.ref):
			return fmt.Sprintf("table %s: version %d is another commit now (the table was deleted and recreated at its path?)", x.Path, x.Version)
		}
	}
	return ""
}

// tagMatches: the tag points at exactly branch/version with the manifest
// size the physical ref recorded.
func tagMatches(t lance.Tag, branch string, version uint64, size int64) bool {
	b := t.Branch
	if b == "" {
		b = registry.MainBranch
	}
	return b == branch && t.Version == version && int64(t.ManifestSize) == size
}

func describeTag(t lance.Tag) string {
	b := t.Branch
	if b == "" {
		b = registry.MainBranch
	}
	return fmt.Sprintf("%s version %d (manifest %d bytes)", b, t.Version, t.ManifestSize)
}

// ensureTableTag creates a table pin tag idempotently, carrying its
// record (rec: the checkpoint's header fields and this pin). size is the
// pinned manifest's, from its physical ref: the tag is written as is,
// without listing the versions again to find it (every caller has proved
// the version; create checks it again after tagging).
func ensureTableTag(ctx context.Context, ds *lance.Dataset, tag string, p registry.Pin, size int64, rec registry.PinRecord) error {
	_, err := ds.PutTagFile(ctx, lance.Tag{Name: tag, Branch: p.Branch, Version: p.Version, ManifestSize: uint64(size), Metadata: rec.Metadata()})
	if errors.Is(err, lance.ErrTagExists) {
		t, rerr := ds.ReadTag(ctx, tag)
		if rerr != nil {
			return rerr
		}
		if !tagMatches(t, p.Branch, p.Version, size) {
			return errorf("create-tag", ds.Key(tag), ErrPinConflict, "tag %s exists and points at %s, not %s version %d: retain never moves a pin; inspect it", tag, describeTag(t), p.Branch, p.Version)
		}
		return nil
	}
	return err
}

// ensureRegistryTag creates a registry pin idempotently, carrying its
// record (the checkpoint's header fields).
func ensureRegistryTag(ctx context.Context, rds *lance.Dataset, tag string, ref registry.Ref, rec registry.PinRecord) error {
	_, err := rds.PutTagFile(ctx, lance.Tag{Name: tag, Version: uint64(ref.Version), ManifestSize: uint64(ref.Size), Metadata: rec.Metadata()})
	if errors.Is(err, lance.ErrTagExists) {
		t, rerr := rds.ReadTag(ctx, tag)
		if rerr != nil {
			return rerr
		}
		if !tagMatches(t, registry.MainBranch, uint64(ref.Version), ref.Size) {
			return errorf("create-tag", rds.Key(tag), ErrPinConflict, "registry pin %s points at %s, not registry version %d", tag, describeTag(t), ref.Version)
		}
		return nil
	}
	return err
}

func deleteTag(ctx context.Context, ds *lance.Dataset, tag string) error {
	err := ds.DeleteTag(ctx, tag, "")
	if errors.Is(err, lance.ErrTagNotFound) {
		return nil
	}
	return err
}

func registryDataset(s *storage.Store) *lance.Dataset {
	d, _ := lance.Open(s, registry.RegistryPath)
	return d
}

func acquire(ctx context.Context, s *storage.Store, o Options, action, op string) (*claim.Handle, error) {
	return claim.Acquire(ctx, s, claim.Request{OperationID: op, Action: action, Actor: o.Actor, Scope: o.scope(s), Host: o.Host})
}

// withGates runs fn holding o.Gates (if any).
func (o Options) withGates(ctx context.Context, s *storage.Store, fn func(context.Context) error) error {
	if len(o.Gates) == 0 {
		return fn(ctx)
	}
	return s.WithGates(ctx, o.scope(s), o.Gates, fn)
}

// createClaimed runs everything under the claim. retry: release happened
// before any tag exists (or the tags were rolled back) and the caller may
// restart.
func (o Options) createClaimed(ctx context.Context, s *storage.Store, reg *registry.Registry, src *source, name, branch string) (res *Created, retry bool, err error) {
	id := registry.NewID()
	op := "create-" + string(id)
	h, err := acquire(ctx, s, o, "checkpoint-create", op)
	if err != nil {
		return nil, false, err
	}
	released := false
	defer func() {
		if !released {
			if rerr := h.Release(context.WithoutCancel(ctx)); rerr != nil && err == nil && res == nil {
				err = rerr
			}
		}
	}()
	failpoint.Hit(FPCreateAfterClaim)
	actor := o.Actor
	if actor == "" {
		actor = h.Payload().Actor
	}
	err = o.withGates(ctx, s, func(ctx context.Context) error {
		// Revalidate what the claim guards and the table set before any tag
		// exists; the heads are read again after the tags (publish).
		now, cerr := captureShape(ctx, s, reg, name)
		if cerr != nil {
			return cerr
		}
		if cerr := o.checkFresh(now, name); cerr != nil {
			return cerr
		}
		if diff := sameShape(src, now); diff != "" {
			retry = true
			return errorf("create", name, ErrSourceChanged, "%s", diff)
		}
		failpoint.Hit(FPCreateAfterRevalidate)
		if testHookBeforeTags != nil {
			testHookBeforeTags()
		}
		res, retry, cerr = o.publish(ctx, s, reg, h, src, id, op, name, branch, actor)
		return cerr
	})
	if err != nil {
		return nil, retry, err
	}
	// Committed: a signal now must not leave the claim held.
	if rerr := h.Release(context.WithoutCancel(ctx)); rerr != nil {
		res.Warnings = append(res.Warnings, "releasing the claim failed: "+rerr.Error())
	}
	released = true
	failpoint.Hit(FPCreateAfterRelease)
	return res, false, nil
}

func (o Options) publish(ctx context.Context, s *storage.Store, reg *registry.Registry, h *claim.Handle, src *source,
	id registry.ID, op, name, branch, actor string) (*Created, bool, error) {
	now := time.Now().UTC().Truncate(time.Millisecond)
	draft := src.snap.Next()
	tables := append([]CapturedTable(nil), src.tables...)
	pins := make([]registry.Pin, len(tables))
	for i, ct := range tables {
		switch {
		case ct.NewTable:
			if _, err := draft.AddTable(ct.TableID, ct.Path, now); err != nil {
				return nil, false, err
			}
		case ct.NewIncarnation:
			if _, err := draft.NewIncarnation(ct.TableID, now); err != nil {
				return nil, false, err
			}
		}
		pins[i] = registry.Pin{TableID: ct.TableID, Incarnation: ct.Incarnation,
			Target: registry.Target{Path: ct.Path, Branch: branch, Version: ct.Version, PhysicalRef: ct.PhysicalRef}}
		tag, err := registry.TablePinTag(id, pins[i])
		if err != nil {
			return nil, false, err
		}
		tables[i].Tag = tag
	}
	nc := registry.NewCheckpoint{ID: id, Name: name, SourceBranch: branch, CreatedAt: now, Actor: actor, Pins: pins}
	var cp registry.Checkpoint
	var err error
	if src.hasRes {
		cp, err = draft.Revive(src.resv.Generation, nc)
	} else {
		cp, err = draft.Reserve(nc)
	}
	if err != nil {
		return nil, false, err
	}
	_, ref, err := draft.Encode()
	if err != nil {
		return nil, false, err
	}
	regTag, err := registry.RegistryPinTag(id, registry.RegistryTarget(ref))
	if err != nil {
		return nil, false, err
	}
	sc := &Sidecar{Format: SidecarFormat, OperationID: op, Action: "checkpoint-create", CheckpointID: id, Name: name,
		SourceBranch: branch, ExpectedHead: src.head, RegistryRef: ref.String(), RegistryPinTag: regTag,
		CreatedAt: now, Actor: actor}
	for i, ct := range tables {
		sc.Tables = append(sc.Tables, SidecarPin{Tag: ct.Tag, Pin: pins[i]})
	}
	if err := writeSidecar(ctx, s, sc); err != nil {
		return nil, false, fmt.Errorf("writing the recovery sidecar: %w", err)
	}
	failpoint.Hit(FPCreateAfterSidecar)
	rds := registryDataset(s)
	// rollback deletes the sidecar only once every tag is gone: a tag left
	// without its sidecar would be a pin nothing explains, which reconcile
	// keeps and reports as lost authority rather than reclaim.
	rollback := func() {
		rctx := context.WithoutCancel(ctx)
		errs := make([]error, len(tables))
		_ = fanout.Each(rctx, s.Parallelism(), len(tables), func(ctx context.Context, i int) error {
			ds, err := lance.Open(s, tables[i].Path)
			if err == nil {
				err = deleteTag(ctx, ds, tables[i].Tag)
			}
			errs[i] = err
			return nil // try every tag
		})
		failed := errors.Join(append(errs, deleteTag(rctx, rds, regTag))...)
		if failed == nil {
			_ = s.Delete(rctx, SidecarKey(op), storage.DeleteOptions{})
		}
	}
	// Tags, idempotently: table pins, then the registry pin. The first
	// table's alone (a crash after it leaves exactly one tag), then the
	// rest side by side; every writer has finished before the outcome is
	// judged, so a rollback never races a tag still being written.
	tagTable := func(ctx context.Context, i int) error {
		ds, err := lance.Open(s, tables[i].Path)
		if err != nil {
			return err
		}
		return ensureTableTag(ctx, ds, tables[i].Tag, pins[i], tables[i].ref.Size, registry.NewPinRecord(id, name, branch, now, actor, len(pins), &pins[i]))
	}
	tagErr := tagTable(ctx, 0)
	failed := 0
	if tagErr == nil {
		failpoint.Hit(FPCreateMidTags)
		// One write's failure does not cancel the others: a cancelled
		// request may still land on the store after the rollback deleted
		// its tag, leaving a pin no sidecar explains. Every outcome is
		// known before the rollback runs.
		errs := make([]error, len(tables))
		tagErr = fanout.Each(ctx, s.Parallelism(), len(tables)-1, func(ctx context.Context, i int) error {
			errs[i+1] = tagTable(ctx, i+1)
			return nil
		})
		failed = -1
		for i, err := range errs {
			if err != nil && (failed < 0 || errors.Is(errs[failed], context.Canceled) && !errors.Is(err, context.Canceled)) {
				failed, tagErr = i, err // the lowest table whose own write failed
			}
		}
		if failed < 0 {
			failed = 0
			if tagErr == nil {
				tagErr = ctx.Err()
			}
		}
	}
	if tagErr != nil {
		if errors.Is(tagErr, storage.ErrNotFound) {
			rollback()
			return nil, true, refusal("create", tables[failed].Path, ErrSourceChanged, fmt.Sprintf("version %d vanished before it was tagged; nothing was published", tables[failed].Version), tagErr)
		}
		return nil, false, tagErr // leave the sidecar: reconcile rolls back
	}
	if err := ensureRegistryTag(ctx, rds, regTag, ref, registry.NewPinRecord(id, name, branch, now, actor, len(pins), nil)); err != nil {
		return nil, false, err
	}
	failpoint.Hit(FPCreateAfterTags)
	// Verify by reading every head again, now that the tags hold the
	// captured versions: the same heads as at capture make a moment in
	// between at which all of them were the heads together (the table set
	// was the same at revalidation, in that span), and prove each tagged
	// version is still the commit captured (a table recreated at its path
	// has the same version numbers and other commits). A head that is the
	// same object as at capture (key, size, version token) is not read
	// again; any other is, and its commit compared. Any difference rolls
	// the tags back and starts over.
	again, err := captureTables(ctx, s, src.snap, src.paths, branch, src.tables)
	if errors.Is(err, ErrMissingTarget) {
		// The branch went (a delete began, its file is gone) since it was
		// captured: pins must not stay on it. Nothing was published.
		rollback()
		return nil, true, refusal("create", name, ErrSourceChanged, "a pinned branch changed while it was tagged; nothing was published", err)
	}
	if err != nil {
		return nil, false, err // tags and sidecar stay: reconcile rolls back
	}
	if diff := sameTables(src.tables, again); diff != "" {
		rollback()
		return nil, true, errorf("create", name, ErrSourceChanged, "%s; nothing was published", diff)
	}
	failpoint.Hit(FPCreateAfterVerify)
	if err := h.Verify(ctx); err != nil {
		return nil, false, err // tags and sidecar stay: reconcile rolls back
	}
	if _, err := reg.Commit(ctx, src.head, draft); err != nil {
		if errors.Is(err, registry.ErrConflict) {
			rollback()
			return nil, true, err
		}
		if verr := reg.VerifyRef(ctx, ref); verr != nil {
			return nil, false, err // outcome unknown: the sidecar stays for reconcile
		}
		_ = reg.RecordCommit(ctx, ref) // it landed; Commit gave up before its record
	}
	failpoint.Hit(FPCreateAfterCommit)
	res := &Created{ID: id, Name: name, Generation: cp.Generation, SourceBranch: branch, RegistryVersion: ref.Version,
		RegistryPinTag: regTag, CreatedAt: now, Actor: actor, OperationID: op, Tables: tables}
	if err := s.Delete(ctx, SidecarKey(op), storage.DeleteOptions{}); err != nil {
		res.Warnings = append(res.Warnings, "deleting the sidecar failed (reconcile finishes it): "+err.Error())
	}
	failpoint.Hit(FPCreateAfterSidecarGone)
	return res, false, nil
}
