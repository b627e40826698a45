package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/retain-dev/retain/core/checkpoint/registry"
	"github.com/retain-dev/retain/core/internal/fanout"
	"github.com/retain-dev/retain/core/lance"
	"github.com/retain-dev/retain/core/storage"
)

// Pin health values.
const (
	PinOK          = "ok"
	PinMissing     = "missing"
	PinWrongTarget = "wrong-target"
	PinUnreadable  = "unreadable"
	// PinGone: the pinned object itself is gone (the registry version a
	// checkpoint's registry pin names, or a table version: no manifest, or
	// another commit): no reconcile can repair it, and the checkpoint is
	// reported invalid until the object is restored or the pin dropped.
	PinGone = "gone"
)

// PinHealth is one pin of a checkpoint and whether its tag is present and
// points where its row says.
type PinHealth struct {
	Kind        string      `json:"kind"` // "table" or "registry"
	Path        string      `json:"path"`
	TableID     registry.ID `json:"table_id,omitempty"`
	Incarnation uint64      `json:"incarnation,omitempty"`
	Branch      string      `json:"branch"`
	Version     uint64      `json:"version"`
	PhysicalRef string      `json:"physical_ref"`
	Tag         string      `json:"tag"`
	Status      string      `json:"status"`
	Detail      string      `json:"detail,omitempty"`
}

// DeepCheck is show --deep's result: every file the pinned versions
// reference, checked for existence.
type DeepCheck struct {
	FilesChecked int      `json:"files_checked"`
	Missing      []string `json:"missing"`
	Errors       []string `json:"errors,omitempty"`
}

// Info is one checkpoint as list and show print it.
type Info struct {
	ID              registry.ID      `json:"id"`
	Name            string           `json:"name"`
	State           registry.State   `json:"state"`
	Generation      uint64           `json:"generation"`
	Actor           string           `json:"actor"`
	SourceBranch    string           `json:"source_branch"`
	RegistryVersion registry.Version `json:"registry_version"`
	CreatedAt       time.Time        `json:"created_at"`
	TableCount      int              `json:"table_count"`
	// Health is "ok" when every pin is present and points where its row
	// says, "degraded" otherwise (run reconcile), "invalid" when a pinned
	// object is gone (PinGone), "deleted" for a tombstoned checkpoint.
	Health    string              `json:"health"`
	Pins      []PinHealth         `json:"pins"`
	Tombstone *registry.Tombstone `json:"tombstone,omitempty"`
	Deep      *DeepCheck          `json:"deep,omitempty"`
	// Lost: table pins the checkpoint gave up (drop-lost), and why.
	Lost []registry.LostPin `json:"lost,omitempty"`
}

// Health sums up the pin health of live checkpoints (List's infos): what
// `retain status` prints and the maintenance daemon exports as metrics.
type Health struct {
	LiveCheckpoints int `json:"live_checkpoints"`
	// PinnedVersions counts table pins (one per table per checkpoint).
	PinnedVersions int `json:"pinned_versions"`
	// Pins counts every pin (registry pins included) by status: OK,
	// Missing, Other (wrong target, unreadable, gone).
	Pins    int `json:"pins"`
	OK      int `json:"ok"`
	Missing int `json:"missing"`
	Other   int `json:"other"`
	// Degraded and Invalid count checkpoints by health.
	Degraded int `json:"degraded_checkpoints"`
	Invalid  int `json:"invalid_checkpoints"`
	// Oldest is the creation time of the oldest live checkpoint.
	Oldest *time.Time `json:"oldest,omitempty"`
}

// Summarize sums up infos; checkpoints that are not live are left out.
func Summarize(infos []Info) Health {
	var h Health
	for _, in := range infos {
		if in.State != registry.Live {
			continue
		}
		h.LiveCheckpoints++
		h.PinnedVersions += in.TableCount
		if h.Oldest == nil || in.CreatedAt.Before(*h.Oldest) {
			c := in.CreatedAt
			h.Oldest = &c
		}
		switch in.Health {
		case "degraded":
			h.Degraded++
		case "invalid":
			h.Invalid++
		}
		for _, p := range in.Pins {
			h.Pins++
			switch p.Status {
			case PinOK:
				h.OK++
			case PinMissing:
				h.Missing++
			default:
				h.Other++
			}
		}
	}
	return h
}

// List returns every live checkpoint with its pin health, and the registry
// head's version. Its cost is bounded by live checkpoints × tables.
func List(ctx context.Context, s *storage.Store) (registry.Version, []Info, error) {
	reg := registry.Open(s, registry.Options{})
	v, snap, err := reg.Head(ctx)
	if err != nil {
		return 0, nil, err
	}
	commits := newCommitChecks()
	live := snap.Live()
	var tags *rootTags
	if lance.HasRefCache(ctx) {
		// A long-lived caller (the daemon's metrics, every pass): each
		// root's tags from one listing, whose unchanged files the cache
		// answers, instead of one read per pin of every live checkpoint.
		tags = &rootTags{m: map[string]*rootListing{}}
	}
	rps, err := registryPins(ctx, reg, live)
	if err != nil {
		return 0, nil, err
	}
	var rows []registry.Row
	for _, cp := range live {
		rows = append(rows, cp.Rows...)
	}
	commits.prefetch(ctx, s, rows)
	out, err := fanout.Map(ctx, s.Parallelism(), len(live), func(ctx context.Context, i int) (Info, error) {
		return info(ctx, s, live[i], rps[i], commits, tags)
	})
	if err != nil {
		return 0, nil, err
	}
	return v, out, nil
}

// Show returns one checkpoint (a live name, or an id, live or
// tombstoned) with its pin health; deep also checks every file its pinned
// versions reference.
func Show(ctx context.Context, s *storage.Store, nameOrID string, deep bool) (*Info, error) {
	reg := registry.Open(s, registry.Options{})
	_, cp, err := reg.Lookup(ctx, nameOrID)
	if err != nil {
		return nil, err
	}
	rp, err := registryPin(ctx, reg, cp)
	if err != nil {
		return nil, err
	}
	in, err := info(ctx, s, cp, rp, newCommitChecks(), nil)
	if err != nil {
		return nil, err
	}
	if deep {
		in.Deep = deepCheck(ctx, s, cp)
	}
	return &in, nil
}

// info describes cp, whose registry pin rp describes (registryPin).
func info(ctx context.Context, s *storage.Store, cp registry.Checkpoint, rp PinHealth, commits *commitChecks, tags *rootTags) (Info, error) {
	in := Info{ID: cp.ID, Name: cp.Name, State: cp.State, Generation: cp.Generation, Actor: cp.Actor,
		SourceBranch: cp.SourceBranch, RegistryVersion: cp.RegistryVersion, CreatedAt: cp.CreatedAt,
		TableCount: len(cp.Rows), Tombstone: cp.Tombstone, Health: "ok"}
	if rp.Status != PinGone {
		rds := registryDataset(s)
		rp.Status, rp.Detail = listedTagHealth(ctx, rds, rp, tags.of(ctx, rds))
	}
	in.Pins = append(in.Pins, rp)
	pins, err := fanout.Map(ctx, s.Parallelism(), len(cp.Rows), func(ctx context.Context, i int) (PinHealth, error) {
		return rowHealth(ctx, s, cp, cp.Rows[i], commits, tags)
	})
	if err != nil {
		return Info{}, err
	}
	in.Pins = append(in.Pins, pins...)
	in.Lost = cp.Lost
	for _, p := range in.Pins {
		if p.Status != PinOK && in.Health == "ok" {
			in.Health = "degraded"
		}
		if p.Status == PinGone {
			in.Health = "invalid"
		}
	}
	if cp.State == registry.Tombstoned {
		in.Health = "deleted"
	}
	return in, nil
}

// rowHealth is the health of one of cp's table pins: its tag and, for a
// live checkpoint, the pinned version itself, as cleanup checks it (one
// view of health).
func rowHealth(ctx context.Context, s *storage.Store, cp registry.Checkpoint, r registry.Row, commits *commitChecks, tags *rootTags) (PinHealth, error) {
	tag, err := registry.TablePinTag(cp.ID, r.Pin)
	if err != nil {
		return PinHealth{}, err
	}
	p := PinHealth{Kind: "table", Path: r.Path, TableID: r.TableID, Incarnation: r.Incarnation, Branch: r.Branch,
		Version: r.Version, PhysicalRef: r.PhysicalRef, Tag: tag}
	ds, err := lance.Open(s, r.Path)
	if err != nil {
		return PinHealth{}, err
	}
	p.Status, p.Detail = listedTagHealth(ctx, ds, p, tags.of(ctx, ds))
	if (p.Status == PinOK || p.Status == PinMissing) && cp.State == registry.Live {
		if l, err := commits.lost(ctx, s, r); err != nil {
			p.Status, p.Detail = PinUnreadable, fmt.Sprintf("the pinned version cannot be read: %v", err)
		} else if l.kind != "" {
			p.Status, p.Detail = PinGone, l.why+"; "+l.wayOut(cp.ID, r.Path)
		}
	}
	return p, nil
}

// registryPin describes cp's registry pin: one get of the version object
// of the registry version that published it, for its Ref (ReadRef: never
// its segments, and never a whole decode — this runs once per live
// checkpoint in list and reconcile). Registry recover, which takes that
// version as the proof it republishes from, uses wholePin instead.
func registryPin(ctx context.Context, reg *registry.Registry, cp registry.Checkpoint) (PinHealth, error) {
	return readRegistryPin(ctx, cp, func(v registry.Version) (registry.Ref, error) { return reg.ReadRef(ctx, v) })
}

// registryPins is registryPin for each of cps, from one ReadRefs: under
// the daemon's registry.Cache, the versions that did not change since
// the last pass cost one listing between them, not one get each.
func registryPins(ctx context.Context, reg *registry.Registry, cps []registry.Checkpoint) ([]PinHealth, error) {
	vs := make([]registry.Version, len(cps))
	for i, cp := range cps {
		vs[i] = cp.RegistryVersion
	}
	refs, err := reg.ReadRefs(ctx, vs)
	if err != nil {
		return nil, err
	}
	out := make([]PinHealth, len(cps))
	for i, cp := range cps {
		if out[i], err = readRegistryPin(ctx, cp, func(registry.Version) (registry.Ref, error) {
			if refs[i].IsZero() {
				return registry.Ref{}, storage.ErrNotFound
			}
			return refs[i], nil
		}); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// wholePin is registryPin reading the publishing version whole, segments
// and all: a version that no longer reads whole is ErrCorruptRegistry.
func wholePin(ctx context.Context, reg *registry.Registry, cp registry.Checkpoint) (PinHealth, error) {
	return readRegistryPin(ctx, cp, func(v registry.Version) (registry.Ref, error) {
		snap, err := reg.Read(ctx, v)
		if err != nil {
			return registry.Ref{}, err
		}
		return snap.Ref(), nil
	})
}

func readRegistryPin(ctx context.Context, cp registry.Checkpoint, refOf func(registry.Version) (registry.Ref, error)) (PinHealth, error) {
	p := PinHealth{Kind: "registry", Path: registry.RegistryPath, Branch: registry.MainBranch, Version: uint64(cp.RegistryVersion)}
	ref, err := refOf(cp.RegistryVersion)
	if errors.Is(err, storage.ErrNotFound) {
		p.Status, p.Detail = PinGone, fmt.Sprintf("registry version %d, which this checkpoint's registry pin keeps, is missing: the checkpoint's logical record is lost and no reconcile can restore it", cp.RegistryVersion)
		return p, nil
	}
	if err != nil {
		return p, err
	}
	p.PhysicalRef = ref.String()
	if p.Tag, err = registry.RegistryPinTag(cp.ID, registry.RegistryTarget(ref)); err != nil {
		return p, err
	}
	return p, nil
}

func pinSize(p PinHealth) (int64, error) {
	if p.Kind == "registry" {
		r, err := registry.ParseRef(p.PhysicalRef)
		return r.Size, err
	}
	r, err := lance.ParsePhysRef(p.PhysicalRef)
	return r.Size, err
}

func tagHealth(ctx context.Context, ds *lance.Dataset, p PinHealth) (string, string) {
	if p.Tag == "" {
		return p.Status, p.Detail
	}
	t, err := ds.ReadTag(ctx, p.Tag)
	switch {
	case errors.Is(err, lance.ErrTagNotFound):
		return PinMissing, "no tag " + p.Tag
	case err != nil:
		return PinUnreadable, err.Error()
	}
	return tagHealthOf(t, p)
}

// rootTags lists each root's tags once for a whole List (nil: each pin's
// tag is read on its own).
type rootTags struct {
	mu sync.Mutex
	m  map[string]*rootListing
}

type rootListing struct {
	once sync.Once
	tags map[string]lance.Tag
}

// of is ds's tags by name, listed once; nil when t is nil or the listing
// failed (each tag is then read on its own, and a failure shows there).
func (t *rootTags) of(ctx context.Context, ds *lance.Dataset) map[string]lance.Tag {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	l := t.m[ds.Root]
	if l == nil {
		l = &rootListing{}
		t.m[ds.Root] = l
	}
	t.mu.Unlock()
	l.once.Do(func() {
		ts, err := ds.ListTags(ctx)
		if err != nil {
			return
		}
		l.tags = make(map[string]lance.Tag, len(ts))
		for _, tg := range ts {
			l.tags[tg.Name] = tg
		}
	})
	return l.tags
}

// listedTagHealth is tagHealth judged from a listing of the root's tags
// read earlier in the same pass (nil: none was read, so the tag is).
func listedTagHealth(ctx context.Context, ds *lance.Dataset, p PinHealth, listed map[string]lance.Tag) (string, string) {
	if listed == nil || p.Tag == "" {
		return tagHealth(ctx, ds, p)
	}
	t, ok := listed[p.Tag]
	if !ok {
		return PinMissing, "no tag " + p.Tag
	}
	return tagHealthOf(t, p)
}

// tagHealthOf judges tag t, read, against the pin p it should hold.
func tagHealthOf(t lance.Tag, p PinHealth) (string, string) {
	size, err := pinSize(p)
	if err != nil {
		return PinUnreadable, err.Error()
	}
	if !tagMatches(t, p.Branch, p.Version, size) {
		return PinWrongTarget, "the tag points at " + describeTag(t)
	}
	return PinOK, ""
}

func deepCheck(ctx context.Context, s *storage.Store, cp registry.Checkpoint) *DeepCheck {
	// Rows side by side, each row's files side by side; merged in row
	// order, so the report does not depend on timing.
	rows := make([]*DeepCheck, len(cp.Rows))
	_ = fanout.Each(ctx, s.Parallelism(), len(cp.Rows), func(ctx context.Context, i int) error {
		rows[i] = deepCheckRow(ctx, s, cp.Rows[i])
		return nil
	})
	d := &DeepCheck{Missing: []string{}}
	for _, r := range rows {
		if r == nil { // the context ended before the row ran
			d.Errors = append(d.Errors, context.Cause(ctx).Error())
			continue
		}
		d.FilesChecked += r.FilesChecked
		d.Missing = append(d.Missing, r.Missing...)
		d.Errors = append(d.Errors, r.Errors...)
	}
	return d
}

// deepCheckRow checks one pinned version: its manifest, under whichever
// name it has now (Lance's own migration renames V1 to V2) and still the
// commit the row names, and every file it references.
func deepCheckRow(ctx context.Context, s *storage.Store, r registry.Row) *DeepCheck {
	d := &DeepCheck{}
	ref, err := lance.ParsePhysRef(r.PhysicalRef)
	if err != nil {
		d.Errors = append(d.Errors, err.Error())
		return d
	}
	ds, err := lance.Open(s, r.Path)
	if err == nil && r.Branch != registry.MainBranch {
		ds, err = ds.Branch(r.Branch)
	}
	if err != nil {
		d.Errors = append(d.Errors, err.Error())
		return d
	}
	m, got, err := ds.ReadPinned(ctx, ref)
	d.FilesChecked++
	if errors.Is(err, storage.ErrNotFound) {
		d.Missing = append(d.Missing, fmt.Sprintf("%s/_versions/ manifest of version %d", ds.Root, r.Version))
		return d
	}
	if err != nil {
		d.Errors = append(d.Errors, err.Error())
		return d
	}
	if !ref.Matches(got) {
		d.Errors = append(d.Errors, fmt.Sprintf("%s: version %d is another commit than the checkpoint names (the table was recreated): `retain reconcile STORE` reports it", got.Key, r.Version))
		return d
	}
	var files []lance.FileRef
	for _, f := range m.Files() {
		if !f.Outside {
			files = append(files, f)
		}
	}
	missing, errs := make([]bool, len(files)), make([]error, len(files))
	for i := range errs {
		errs[i] = fmt.Errorf("%s: not checked: %w", files[i].Key, context.Canceled) // until it is
	}
	_ = fanout.Each(ctx, s.Parallelism(), len(files), func(ctx context.Context, i int) error {
		errs[i] = nil
		f := files[i]
		if f.Prefix {
			objs, err := s.List(ctx, f.Key, 0)
			missing[i], errs[i] = err == nil && len(objs) == 0, err
			return nil
		}
		_, err := s.Stat(ctx, f.Key)
		missing[i] = errors.Is(err, storage.ErrNotFound)
		if !missing[i] {
			errs[i] = err
		}
		return nil
	})
	for i, f := range files {
		if errs[i] == nil || missing[i] {
			d.FilesChecked++
		}
		switch {
		case missing[i]:
			d.Missing = append(d.Missing, f.Key)
		case errs[i] != nil:
			d.Errors = append(d.Errors, errs[i].Error())
		}
	}
	return d
}
