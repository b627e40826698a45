package checkpoint

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
	"github.com/retain-dev/retain/core/storage"
)

// Registry recover: the way out of ErrAuthorityLost. Pins the registry
// cannot account for are evidence of checkpoints it lost; recover puts
// them back live, in one new registry version, from the best proof each
// pin offers:
//
//  1. the registry version its registry pin names, if that version still
//     exists and its bytes digest to the pin's name (the checkpoint as it
//     was published);
//  2. the pin's own record (tag metadata "retain.pin", written by every
//     create and repair), if the tag's name is its digest;
//  3. the dead create's sidecar that lists the tag;
//  4. otherwise (a pin written before records existed) the version the
//     tag points at is pinned afresh under the catalog's table id and the
//     old tag is deleted only after the new pin is published.
//
// A live checkpoint whose registry pin no longer verifies (its publishing
// version deleted or rewritten) is republished at the new version. A head
// that does not read is built over: recover writes above every stored
// version, leaving the unreadable ones in the history. Nothing is ever
// unpinned before its replacement is published, so a recover that dies
// part-way over-retains and runs again.

// Recover sources.
const (
	SourceRegistry = "registry-version" // the version its registry pin names
	SourceRecord   = "pin-record"       // the tag's own record
	SourceSidecar  = "sidecar"          // the dead create's sidecar
	SourceRepinned = "re-pinned"        // pinned afresh: no proof survived
	SourceLive     = "live"             // the head's own header (republished)
)

// RecoverOptions configure Recover.
type RecoverOptions struct {
	DryRun bool
	// DropPins are pins ("root:tag") the operator attests nothing needs
	// (a pin recover cannot place, e.g. of a version that is gone):
	// deleted, audited with Reason, which they require.
	DropPins []string
	Reason   string
	// Audit, if set, is called with "recovering" before the first write
	// (an error stops the recovery with nothing changed) and "recovered"
	// after the last.
	Audit func(ctx context.Context, event, operationID, actor string, rep *RecoverReport) error
}

// RecoverReport is what Recover found and did.
type RecoverReport struct {
	// From is the version recover built on: the head, or the newest
	// version below a head that does not read or is not the one its
	// commit recorded; Corrupt are the versions above it it did not trust
	// (left in the history, never rewritten).
	From    registry.Version   `json:"from"`
	Corrupt []registry.Version `json:"corrupt"`
	// RegistryVersion is the version recover wrote, 0 if none.
	RegistryVersion registry.Version      `json:"registry_version"`
	Checkpoints     []RecoveredCheckpoint `json:"checkpoints"`
	// Replaced are the pins deleted after their replacements were
	// published: stale registry pins and pins re-pinned afresh.
	Replaced        []PinEvent `json:"replaced"`
	SidecarsRemoved []string   `json:"sidecars_removed"`
	// Unrecoverable are pins recover could not place; they stay, and the
	// store stays refused until they are dealt with.
	Unrecoverable []Conflict `json:"unrecoverable"`
	// Revived are checkpoints live in the version recover built on that
	// the head in doubt had deleted: live again (delete them again if
	// that was meant).
	Revived []string `json:"revived"`
	// Dropped are the pins the operator dropped with DropPins (attested).
	Dropped []PinEvent `json:"dropped"`
	DryRun  bool       `json:"dry_run"`
}

// RecoveredCheckpoint is one checkpoint recover put back live.
type RecoveredCheckpoint struct {
	ID           registry.ID    `json:"id"`
	Name         string         `json:"name"`
	OriginalName string         `json:"original_name,omitempty"`
	Source       string         `json:"source"`
	Tables       []RecoveredPin `json:"tables"`
}

// RecoveredPin is one table pin of a recovered checkpoint.
type RecoveredPin struct {
	Path     string `json:"path"`
	Branch   string `json:"branch"`
	Version  uint64 `json:"version"`
	Tag      string `json:"tag"`
	Source   string `json:"source"`
	Replaces string `json:"replaces,omitempty"`
}

// Recover runs registry recover with the zero Options.
func Recover(ctx context.Context, s *storage.Store, ro RecoverOptions) (*RecoverReport, error) {
	return Options{}.Recover(ctx, s, ro)
}

// Recover rebuilds, under the claim, the checkpoints the registry lost
// from their surviving pins (see the comment above).
func (o Options) Recover(ctx context.Context, s *storage.Store, ro RecoverOptions) (rep *RecoverReport, err error) {
	// Recover rewrites the registry from the pins, the way reconcile
	// brings pins in line with it, so it authorizes as reconcile. A dry
	// run too: it takes the claim, a write.
	if err := authz.Check(ctx, authz.Request{Action: authz.ActionReconcile, Command: "registry recover", Store: authz.StoreName(s)}); err != nil {
		return nil, err
	}
	reg := registry.Open(s, registry.Options{Scope: o.scope(s)})
	op := "recover-" + string(registry.NewID())
	h, err := acquire(ctx, s, o, "registry-recover", op)
	if err != nil {
		return nil, err
	}
	defer func() {
		if rerr := h.Release(context.WithoutCancel(ctx)); rerr != nil && err == nil {
			err = rerr
		}
	}()
	rep = &RecoverReport{Corrupt: []registry.Version{}, Checkpoints: []RecoveredCheckpoint{}, Replaced: []PinEvent{},
		SidecarsRemoved: []string{}, Unrecoverable: []Conflict{}, Revived: []string{}, Dropped: []PinEvent{}, DryRun: ro.DryRun}
	err = o.withGates(ctx, s, func(ctx context.Context) error {
		r := &recovery{s: s, reg: reg, rep: rep, op: op, actor: h.Payload().Actor, now: time.Now().UTC().Truncate(time.Millisecond)}
		if o.Actor != "" {
			r.actor = o.Actor
		}
		return r.run(ctx, ro)
	})
	return rep, err
}

type recovery struct {
	s     *storage.Store
	reg   *registry.Registry
	rep   *RecoverReport
	op    string
	actor string
	now   time.Time

	base *registry.Snapshot
	top  registry.Version // the newest stored version, readable or not
	prev string           // the digest of its bytes
	// mismatch: the head record is not current (versions gone, a lost
	// record write, a head in doubt): a new version settles it.
	mismatch bool
	// above: the head in doubt recover built below, if it parses.
	above *registry.Snapshot
	draft *registry.Snapshot
	// newIDs: table ids chosen for re-pinned tables not in the catalog.
	newIDs map[string]registry.ID
	// writes before the commit, deletes after it
	newTags []pendingTag
	stale   []reclaim
	used    []string // sidecar keys to delete
	drops   []reclaim
	// livePin: the registry pins of the base's live checkpoints that
	// verify; a restored one is republished, so its old pin goes.
	livePin map[registry.ID]lance.Tag
}

type pendingTag struct {
	id       registry.ID
	root     string
	tag      string
	pin      registry.Pin
	size     int64
	replaces string
}

type found struct {
	root string
	tag  lance.Tag
}

func (r *recovery) run(ctx context.Context, ro RecoverOptions) error {
	if err := r.readBase(ctx); err != nil {
		return err
	}
	// Sidecars the registry contradicts are evidence; the others are
	// reconcile's to finish or roll back.
	sidecars := map[registry.ID]*Sidecar{}
	sidecarKey := map[registry.ID]string{}
	settled := map[registry.ID]bool{}
	keys, err := listSidecars(ctx, r.s)
	if err != nil {
		return err
	}
	for _, key := range keys {
		sc, err := readSidecar(ctx, r.s, key)
		if err != nil {
			continue // unreadable: reconcile reports it
		}
		outcome, _, err := judgeSidecar(ctx, r.reg, r.base.Version, r.base, sc)
		if err != nil {
			return err
		}
		if outcome == "" {
			sidecars[sc.CheckpointID], sidecarKey[sc.CheckpointID] = sc, key
		} else {
			settled[sc.CheckpointID] = true
		}
	}
	paths, err := DiscoverTables(ctx, r.s)
	if err != nil {
		return err
	}
	tags := map[string][]lance.Tag{}
	for _, root := range append([]string{registry.RegistryPath}, paths...) {
		ds, err := lance.Open(r.s, root)
		if err != nil {
			return err
		}
		ts, err := ds.ListTags(ctx)
		var mal *lance.MalformedRefsError
		switch {
		case errors.As(err, &mal):
			for _, k := range mal.Keys() {
				r.rep.Unrecoverable = append(r.rep.Unrecoverable, Conflict{Kind: ConflictMalformedTag, Path: root, Tag: k, Detail: "unreadable tag file: restore or remove it by hand, then recover again"})
			}
		case errors.Is(err, storage.ErrNotFound):
		case err != nil:
			return err
		}
		tags[root] = ts
	}

	// What the base explains: its live checkpoints' row pins, and their
	// registry pins where the publishing version still verifies.
	explained := map[string]bool{} // "root:tag"
	republish := map[registry.ID]bool{}
	r.livePin = map[registry.ID]lance.Tag{}
	for _, cp := range r.base.Live() {
		rp, err := wholePin(ctx, r.reg, cp)
		if err != nil && !errors.Is(err, registry.ErrCorruptRegistry) {
			return err
		}
		if err != nil || rp.Tag == "" || !hasTag(tags[registry.RegistryPath], rp.Tag) {
			republish[cp.ID] = true
		} else {
			explained[registry.RegistryPath+":"+rp.Tag] = true
			for _, t := range tags[registry.RegistryPath] {
				if t.Name == rp.Tag {
					r.livePin[cp.ID] = t
				}
			}
		}
		for _, row := range cp.Rows {
			tag, err := registry.TablePinTag(cp.ID, row.Pin)
			if err != nil {
				return err
			}
			explained[row.Path+":"+tag] = true
		}
	}
	byID := map[registry.ID][]found{}
	for root, ts := range tags {
		for _, t := range ts {
			if !registry.IsReservedTag(t.Name) || registry.IsLeaseTag(t.Name) || explained[root+":"+t.Name] {
				continue
			}
			pt, err := registry.ParsePinTag(t.Name)
			if err != nil || settled[pt.CheckpointID] {
				continue // unknown-reserved: reported by reconcile; settled: reconcile's
			}
			if c, err := r.base.ByID(pt.CheckpointID); err == nil && c.State == registry.Tombstoned {
				continue // reclaimable leftovers of a deleted checkpoint
			}
			byID[pt.CheckpointID] = append(byID[pt.CheckpointID], found{root: root, tag: t})
		}
	}
	if err := r.takeDrops(ro, tags, explained, byID); err != nil {
		return err
	}
	for id := range republish {
		if _, ok := byID[id]; !ok {
			byID[id] = nil
		}
	}
	for id := range sidecars {
		if _, ok := byID[id]; !ok {
			// None of its tags survived: nothing to recover, the sidecar
			// protects nothing.
			r.used = append(r.used, sidecarKey[id])
		}
	}
	if len(byID) == 0 && len(r.rep.Corrupt) == 0 && len(r.used) == 0 && len(r.drops) == 0 && !r.mismatch {
		return nil // nothing lost
	}

	r.draft = r.base.NextAt(r.top+1, r.prev)
	r.carryBoundaries()
	r.newIDs = map[string]registry.ID{}
	ids := make([]registry.ID, 0, len(byID))
	for id, fs := range byID {
		ids = append(ids, id)
		sort.Slice(fs, func(i, j int) bool { // reproducible: map and listing order are not
			return fs[i].root < fs[j].root || fs[i].root == fs[j].root && fs[i].tag.Name < fs[j].tag.Name
		})
	}
	// Checkpoints with a proof first: one pinned afresh takes the catalog
	// entry of its table only where no proven row already named one.
	proven := func(id registry.ID) bool {
		if _, err := r.base.ByID(id); err == nil || sidecars[id] != nil {
			return true
		}
		for _, f := range byID[id] {
			if _, ok, err := registry.ParsePinRecord(f.tag.Metadata); ok && err == nil {
				return true
			}
		}
		return false
	}
	sort.Slice(ids, func(i, j int) bool {
		if pi, pj := proven(ids[i]), proven(ids[j]); pi != pj {
			return pi
		}
		return ids[i] < ids[j]
	})
	for _, id := range ids {
		restored, err := r.restoreOne(ctx, id, byID[id], sidecars[id])
		if err != nil {
			return err
		}
		if restored && sidecars[id] != nil {
			r.used = append(r.used, sidecarKey[id])
		}
	}
	if len(r.rep.Checkpoints) == 0 && len(r.used) == 0 && len(r.drops) == 0 && !r.mismatch && len(r.rep.Corrupt) == 0 {
		return nil // nothing placed: no empty version
	}
	if ro.DryRun {
		return nil
	}
	return r.publish(ctx, ro)
}

// readBase finds the newest version that reads: the head, or below a
// head that does not.
func (r *recovery) readBase(ctx context.Context) error {
	v, snap, err := r.reg.HeadUnverified(ctx)
	var untrusted *registry.Snapshot // the head in doubt, if it parses
	if err == nil {
		var check registry.HeadCheck
		check, err = r.reg.CheckHead(ctx, v, snap)
		var hm *registry.HeadMismatch
		switch {
		case err == nil, errors.As(err, &hm) && !hm.Untrusted:
			// The head holds (versions above it may have been deleted:
			// the checkpoints they published come back from their pins).
			// A record that is not current is settled by a new version.
			r.base, r.top, r.rep.From = snap, v, v
			r.mismatch = hm != nil || (check != registry.HeadRecordCurrent && snap.Chained())
			return r.readPrev(ctx)
		case hm == nil:
			return err
		}
		untrusted = snap
	} else if !errors.Is(err, registry.ErrCorruptRegistry) || errors.Is(err, registry.ErrNewerRegistry) {
		return err // a newer build's version is not damage: never rebuild below it
	}
	// The head does not read, or is not the one its commit recorded:
	// build on the newest version below it that reads and that nothing
	// contradicts — never above the recorded version (unproven: written
	// after the last commit the record knows), and the recorded version
	// only if its bytes are the recorded ones.
	vs, err := r.reg.History(ctx, 10_000_000)
	if err != nil {
		return err
	}
	recV, recSHA, err := r.reg.HeadRecord(ctx)
	if err != nil {
		return err
	}
	r.base = registry.Empty()
	for i := len(vs) - 1; i >= 0; i-- {
		if i == len(vs)-1 || (recSHA != "" && vs[i] > recV) {
			r.rep.Corrupt = append(r.rep.Corrupt, vs[i]) // in doubt
			continue
		}
		snap, err := r.reg.Read(ctx, vs[i])
		if err == nil && recSHA != "" && vs[i] == recV && snap.Ref().SHA256 != recSHA {
			err = registry.ErrCorruptRegistry // not the bytes its commit recorded
		}
		if err == nil {
			r.base, r.rep.From = snap, vs[i]
			break
		}
		if !errors.Is(err, registry.ErrCorruptRegistry) || errors.Is(err, registry.ErrNewerRegistry) {
			return err
		}
		r.rep.Corrupt = append(r.rep.Corrupt, vs[i])
	}
	if len(vs) > 0 {
		r.top = vs[len(vs)-1]
	}
	r.mismatch = true
	if untrusted != nil {
		r.above = untrusted
		// Checkpoints live in the base but not in the head in doubt:
		// deleted since (or so the head says). They come back live —
		// over-retained, never under — and the report names them.
		for _, c := range r.base.Live() {
			if hc, err := untrusted.ByID(c.ID); err != nil || hc.State != registry.Live {
				r.rep.Revived = append(r.rep.Revived, fmt.Sprintf("%s (%s)", c.Name, c.ID))
			}
		}
	}
	return r.readPrev(ctx)
}

// carryBoundaries copies into the draft the gc boundary rows of the head
// in doubt that are newer than the base's: a boundary only restricts (it
// refuses pins behind what a cleanup removed), so keeping more of them
// stays fail-closed, while dropping them would let a pin in behind a
// finished cleanup.
func (r *recovery) carryBoundaries() {
	if r.above == nil {
		return
	}
	rows, err := r.above.GCBoundaries()
	if err != nil {
		return
	}
	have, _ := r.draft.GCBoundaries()
	at := map[registry.ID]time.Time{}
	for _, g := range have {
		at[g.TableID] = g.At
	}
	for _, g := range rows {
		if t, ok := at[g.TableID]; !ok || g.At.After(t) {
			_ = r.draft.SetGCBoundary(g) // a row that does not check is left out
		}
	}
}

// readPrev reads the digest of the newest stored version, which the
// recovered version names as its predecessor.
func (r *recovery) readPrev(ctx context.Context) error {
	if r.top == 0 {
		return nil
	}
	body, _, err := r.s.ReadAll(ctx, registry.VersionKey(r.top))
	if err != nil {
		return err
	}
	r.prev = registry.DigestOf(body)
	return nil
}

// restoreOne rebuilds checkpoint id from its unexplained pins fs.
func (r *recovery) restoreOne(ctx context.Context, id registry.ID, fs []found, sc *Sidecar) (restored bool, err error) {
	rc := RecoveredCheckpoint{ID: id, Tables: []RecoveredPin{}}
	var nc registry.NewCheckpoint
	published := map[string]registry.Pin{} // by path: the rows a proven source gives
	haveHeader := false
	if cp, err := r.base.ByID(id); err == nil {
		nc = registry.NewCheckpoint{ID: id, Name: cp.Name, SourceBranch: cp.SourceBranch, CreatedAt: cp.CreatedAt, Actor: cp.Actor}
		for _, row := range cp.Rows {
			nc.Pins = append(nc.Pins, row.Pin)
		}
		rc.Source, haveHeader = SourceLive, true
		if t, ok := r.livePin[id]; ok {
			r.stale = append(r.stale, reclaim{root: registry.RegistryPath, tag: t, id: id, why: "replaced by the registry pin of the recovered version"})
		}
	}
	// Proof 1: a registry pin whose version still digests to its name.
	for _, f := range fs {
		if f.root != registry.RegistryPath {
			continue
		}
		r.stale = append(r.stale, reclaim{root: f.root, tag: f.tag, id: id, why: "replaced by the registry pin of the recovered version"})
		if haveHeader && rc.Source != SourceLive {
			continue
		}
		snap, err := r.reg.Read(ctx, registry.Version(f.tag.Version))
		if err != nil {
			continue
		}
		name, err := registry.RegistryPinTag(id, registry.RegistryTarget(snap.Ref()))
		if err != nil || name != f.tag.Name {
			continue
		}
		cp, err := snap.ByID(id)
		if err != nil || cp.State != registry.Live {
			continue
		}
		for _, row := range cp.Rows {
			published[row.Path] = row.Pin
		}
		if !haveHeader {
			nc = registry.NewCheckpoint{ID: id, Name: cp.Name, SourceBranch: cp.SourceBranch, CreatedAt: cp.CreatedAt, Actor: cp.Actor}
			rc.Source, haveHeader = fmt.Sprintf("%s %d", SourceRegistry, f.tag.Version), true
		}
	}
	if sc != nil {
		for _, p := range sc.Tables {
			published[p.Pin.Path] = p.Pin
		}
		if !haveHeader {
			nc = registry.NewCheckpoint{ID: id, Name: sc.Name, SourceBranch: sc.SourceBranch, CreatedAt: sc.CreatedAt, Actor: sc.Actor}
			rc.Source, haveHeader = SourceSidecar, true
		}
	}
	rows := map[string]registry.Pin{}
	for _, p := range nc.Pins {
		rows[p.Path] = p
	}
	explainedAt := map[string]bool{}
	placed := map[string]bool{} // tables an unexplained pin was placed on
	var spill []found
	for path, p := range rows {
		if tag, err := registry.TablePinTag(id, p); err == nil {
			explainedAt[path] = tagIn(fs, path, tag) || r.tagExists(ctx, path, tag)
		}
	}
	for _, f := range fs {
		if f.root == registry.RegistryPath {
			if rec, ok, err := registry.ParsePinRecord(f.tag.Metadata); ok && err == nil && rec.Checkpoint == id && !haveHeader {
				nc = registry.NewCheckpoint{ID: id, Name: rec.Name, SourceBranch: rec.SourceBranch, CreatedAt: rec.CreatedAt, Actor: rec.Actor}
				rc.Source, haveHeader = SourceRecord, true
			}
			continue
		}
		branch := branchOf(f.tag)
		pin, src, ok := r.provenPin(id, f, branch, published)
		if ok && !haveHeader {
			if rec, rok, err := registry.ParsePinRecord(f.tag.Metadata); rok && err == nil {
				nc = registry.NewCheckpoint{ID: id, Name: rec.Name, SourceBranch: rec.SourceBranch, CreatedAt: rec.CreatedAt, Actor: rec.Actor}
				rc.Source, haveHeader = SourceRecord, true
			}
		}
		if ok && !r.fitsCatalog(pin) {
			ok = false
		}
		rp := RecoveredPin{Path: f.root, Branch: branch, Version: f.tag.Version, Tag: f.tag.Name, Source: src}
		if !ok {
			var err error
			if pin, err = r.repin(ctx, f, branch); err != nil {
				r.rep.Unrecoverable = append(r.rep.Unrecoverable, Conflict{Kind: ConflictAuthority, Path: f.root, Tag: f.tag.Name,
					Detail: fmt.Sprintf("%v; if nothing needs it, drop it: retain registry recover STORE --drop-pin %s:%s --reason WHY", err, f.root, f.tag.Name)})
				continue
			}
			tag, err := registry.TablePinTag(id, pin)
			if err != nil {
				return false, err
			}
			rp.Tag, rp.Source, rp.Replaces = tag, SourceRepinned, f.tag.Name
			size, _ := lance.ParsePhysRef(pin.PhysicalRef)
			r.newTags = append(r.newTags, pendingTag{id: id, root: f.root, tag: tag, pin: pin, size: size.Size, replaces: f.tag.Name})
			r.stale = append(r.stale, reclaim{root: f.root, tag: f.tag, id: id, why: "re-pinned as " + tag})
		}
		if old, taken := rows[f.root]; taken && (explainedAt[f.root] || placed[f.root]) && old.Version != pin.Version {
			// The checkpoint already pins this table at another version,
			// and that pin is present: one row cannot hold both.
			r.dropPending(f.tag.Name)
			spill = append(spill, f)
			continue
		}
		placed[f.root] = true
		rows[f.root] = pin
		rc.Tables = append(rc.Tables, rp)
	}
	if !haveHeader {
		branch := registry.MainBranch
		created := r.now
		for _, f := range fs {
			if f.root != registry.RegistryPath {
				branch = branchOf(f.tag)
			}
			if !f.tag.CreatedAt.IsZero() && f.tag.CreatedAt.Before(created) {
				created = f.tag.CreatedAt
			}
		}
		nc = registry.NewCheckpoint{ID: id, Name: recoveredName(id), SourceBranch: branch, CreatedAt: created, Actor: r.actor}
		rc.Source = SourceRepinned
	}
	// Pins of this checkpoint on a table it already pins at another
	// version: after it claimed the catalog, each becomes a checkpoint of
	// its own, pinned afresh (its old tag goes once the new one is
	// published).
	defer func() {
		if len(spill) > 0 && err == nil {
			_, err = r.restoreOne(ctx, registry.NewID(), spill, nil)
		}
	}()
	if len(rows) == 0 {
		return false, nil // nothing left to pin
	}
	nc.Pins = nc.Pins[:0]
	for _, p := range rows {
		nc.Pins = append(nc.Pins, p)
	}
	sort.Slice(nc.Pins, func(i, j int) bool { return nc.Pins[i].TableID < nc.Pins[j].TableID })
	cp, err := r.draft.Restore(nc, r.now)
	if errors.Is(err, registry.ErrNameTaken) {
		rc.OriginalName, nc.Name = nc.Name, recoveredName(id)
		cp, err = r.draft.Restore(nc, r.now)
	}
	if err != nil {
		r.rep.Unrecoverable = append(r.rep.Unrecoverable, Conflict{Kind: ConflictAuthority, Detail: fmt.Sprintf("checkpoint %s: %v", id, err)})
		return false, nil
	}
	rc.Name = cp.Name
	r.rep.Checkpoints = append(r.rep.Checkpoints, rc)
	return true, nil
}

// provenPin is the pin f's own proof gives: its record, or a published
// row (registry version or sidecar) whose digest is its name.
func (r *recovery) provenPin(id registry.ID, f found, branch string, published map[string]registry.Pin) (registry.Pin, string, bool) {
	if rec, ok, err := registry.ParsePinRecord(f.tag.Metadata); ok && err == nil && rec.Checkpoint == id {
		if p, err := rec.TablePin(f.tag.Name, f.root, branch, f.tag.Version); err == nil {
			return p, SourceRecord, true
		}
	}
	if p, ok := published[f.root]; ok {
		if tag, err := registry.TablePinTag(id, p); err == nil && tag == f.tag.Name {
			return p, "published row", true
		}
	}
	return registry.Pin{}, "", false
}

// fitsCatalog reports whether p can be restored as is: its table id at its
// path, or neither known.
func (r *recovery) fitsCatalog(p registry.Pin) bool {
	byPath, okPath := r.draft.TableByPath(p.Path)
	byID, okID := r.draft.TableByID(p.TableID)
	switch {
	case okPath && byPath.ID != p.TableID:
		return false
	case okID && byID.Path != p.Path:
		return false
	}
	return true
}

// repin pins f's version afresh: the catalog's table id at its path (or a
// new one) in its current incarnation, the version's current physical ref.
func (r *recovery) repin(ctx context.Context, f found, branch string) (registry.Pin, error) {
	ds, err := lance.Open(r.s, f.root)
	if err != nil {
		return registry.Pin{}, err
	}
	if branch != registry.MainBranch {
		if ds, err = ds.Branch(branch); err != nil {
			return registry.Pin{}, err
		}
	}
	v, err := ds.VersionAt(ctx, f.tag.Version)
	if err != nil {
		return registry.Pin{}, fmt.Errorf("the pinned version %d on %s cannot be read (%v): nothing to re-pin; the tag is kept", f.tag.Version, branch, err)
	}
	ref, err := ds.PhysRef(ctx, v)
	if err != nil {
		return registry.Pin{}, fmt.Errorf("the pinned version %d on %s: %v; the tag is kept", f.tag.Version, branch, err)
	}
	p := registry.Pin{Incarnation: 1, Target: registry.Target{Path: f.root, Branch: branch, Version: f.tag.Version, PhysicalRef: ref.String()}}
	if t, ok := r.draft.TableByPath(f.root); ok {
		p.TableID, p.Incarnation = t.ID, t.Incarnation
	} else if id, ok := r.newIDs[f.root]; ok {
		p.TableID = id
	} else {
		p.TableID = registry.NewID()
		r.newIDs[f.root] = p.TableID
	}
	return p, nil
}

// dropPending forgets the re-pin planned for oldTag: it stays as it is.
func (r *recovery) dropPending(oldTag string) {
	for i, st := range r.stale {
		if st.tag.Name == oldTag {
			r.stale = append(r.stale[:i], r.stale[i+1:]...)
			break
		}
	}
	for i, nt := range r.newTags {
		if nt.replaces == oldTag {
			r.newTags = append(r.newTags[:i], r.newTags[i+1:]...)
			break
		}
	}
}

func (r *recovery) tagExists(ctx context.Context, root, tag string) bool {
	ds, err := lance.Open(r.s, root)
	if err != nil {
		return false
	}
	_, err = ds.ReadTag(ctx, tag)
	return err == nil
}

// publish writes the new pins, commits the recovered version, then
// deletes what it replaced.
func (r *recovery) publish(ctx context.Context, ro RecoverOptions) error {
	if ro.Audit != nil {
		if err := ro.Audit(ctx, "recovering", r.op, r.actor, r.rep); err != nil {
			return err
		}
	}
	if len(r.rep.Checkpoints) > 0 || r.mismatch || len(r.rep.Corrupt) > 0 {
		if err := r.commit(ctx); err != nil {
			return err
		}
	}
	restored := map[registry.ID]bool{}
	for _, rc := range r.rep.Checkpoints {
		restored[rc.ID] = true
	}
	for _, st := range r.stale {
		if !restored[st.id] {
			continue // its checkpoint was not restored: the pin stays
		}
		ds, err := lance.Open(r.s, st.root)
		if err == nil {
			err = deleteTag(ctx, ds, st.tag.Name)
		}
		if err != nil {
			r.rep.Unrecoverable = append(r.rep.Unrecoverable, Conflict{Kind: ConflictWrongTarget, Path: st.root, Tag: st.tag.Name, Detail: "replaced, but deleting it failed (reconcile reclaims it): " + err.Error()})
			continue
		}
		r.rep.Replaced = append(r.rep.Replaced, PinEvent{Path: st.root, Tag: st.tag.Name, CheckpointID: st.id, Branch: branchOf(st.tag), Version: st.tag.Version, Why: st.why})
	}
	for _, d := range r.drops {
		ds, err := lance.Open(r.s, d.root)
		if err == nil {
			err = deleteTag(ctx, ds, d.tag.Name)
		}
		if err != nil {
			return fmt.Errorf("dropping the pin %s:%s: %w", d.root, d.tag.Name, err)
		}
		r.rep.Dropped = append(r.rep.Dropped, PinEvent{Path: d.root, Tag: d.tag.Name, CheckpointID: d.id, Branch: branchOf(d.tag), Version: d.tag.Version, Why: d.why})
	}
	for _, key := range r.used {
		if err := r.s.Delete(ctx, key, storage.DeleteOptions{}); err != nil && !errors.Is(err, storage.ErrNotFound) {
			return err
		}
		r.rep.SidecarsRemoved = append(r.rep.SidecarsRemoved, key)
	}
	if ro.Audit != nil {
		return ro.Audit(ctx, "recovered", r.op, r.actor, r.rep)
	}
	return nil
}

// commit writes the new pins, then the recovered version, then its head
// record (which recover must not leave unsettled).
func (r *recovery) commit(ctx context.Context) error {
	_, ref, err := r.draft.Encode()
	if err != nil {
		return err
	}
	rds := registryDataset(r.s)
	restored := map[registry.ID]registry.Checkpoint{}
	for _, rc := range r.rep.Checkpoints {
		cp, err := r.draft.ByID(rc.ID)
		if err != nil {
			return err
		}
		restored[rc.ID] = cp
	}
	// Tags first, authority last: the re-pinned table pins, then every
	// restored checkpoint's registry pin for the version about to be
	// written.
	for _, nt := range r.newTags {
		cp, ok := restored[nt.id]
		if !ok {
			continue
		}
		ds, err := lance.Open(r.s, nt.root)
		if err != nil {
			return err
		}
		if err := ensureTableTag(ctx, ds, nt.tag, nt.pin, nt.size, recordOf(cp, &nt.pin)); err != nil {
			return fmt.Errorf("re-pinning %s: %w", nt.root, err)
		}
	}
	for _, rc := range r.rep.Checkpoints {
		cp := restored[rc.ID]
		tag, err := registry.RegistryPinTag(cp.ID, registry.RegistryTarget(ref))
		if err != nil {
			return err
		}
		if err := ensureRegistryTag(ctx, rds, tag, ref, recordOf(cp, nil)); err != nil {
			return err
		}
	}
	if _, err := r.reg.Commit(ctx, r.top, r.draft); err != nil {
		return fmt.Errorf("publishing the recovered registry version %d (the new pins stay; run recover again): %w", r.draft.Version, err)
	}
	r.rep.RegistryVersion = r.draft.Version
	if err := r.reg.WriteHeadRecord(ctx, r.draft.Version, r.draft); err != nil {
		return fmt.Errorf("writing the head record of the recovered version %d (run recover again): %w", r.draft.Version, err)
	}
	return nil
}

func recoveredName(id registry.ID) string { return "recovered/" + string(id) }

func hasTag(ts []lance.Tag, name string) bool {
	for _, t := range ts {
		if t.Name == name {
			return true
		}
	}
	return false
}

func tagIn(fs []found, root, tag string) bool {
	for _, f := range fs {
		if f.root == root && f.tag.Name == tag {
			return true
		}
	}
	return false
}

// takeDrops validates the pins the operator drops and takes them out of
// what recover restores: each must exist, be a v1 pin tag, and be needed by
// no live checkpoint.
func (r *recovery) takeDrops(ro RecoverOptions, tags map[string][]lance.Tag, explained map[string]bool, byID map[registry.ID][]found) error {
	if len(ro.DropPins) == 0 {
		return nil
	}
	if ro.Reason == "" {
		return storage.Errorf("recover", "", storage.ErrInvalidArgument, "dropping a pin needs a reason (--reason): say why nothing needs it")
	}
	for _, spec := range ro.DropPins {
		root, name, ok := strings.Cut(spec, ":")
		if !ok {
			return storage.Errorf("recover", storage.Quote(spec), storage.ErrInvalidArgument, "a pin to drop is ROOT:TAG (as recover reports it)")
		}
		pt, err := registry.ParsePinTag(name)
		var t *lance.Tag
		for i := range tags[root] {
			if tags[root][i].Name == name {
				t = &tags[root][i]
			}
		}
		switch {
		case err != nil:
			return storage.Errorf("recover", storage.Quote(spec), storage.ErrInvalidArgument, "not a pin tag: %v", err)
		case t == nil:
			return storage.Errorf("recover", storage.Quote(spec), storage.ErrNotFound, "no such pin in the store")
		case explained[root+":"+name]:
			return storage.Errorf("recover", storage.Quote(spec), storage.ErrInvalidArgument, "a live checkpoint needs this pin: delete the checkpoint instead (retain checkpoint delete)")
		}
		fs := byID[pt.CheckpointID]
		for i, f := range fs {
			if f.root == root && f.tag.Name == name {
				byID[pt.CheckpointID] = append(fs[:i:i], fs[i+1:]...)
				break
			}
		}
		if len(byID[pt.CheckpointID]) == 0 {
			delete(byID, pt.CheckpointID)
		}
		r.drops = append(r.drops, reclaim{root: root, tag: *t, id: pt.CheckpointID, why: "dropped by the operator: " + ro.Reason})
	}
	return nil
}
