package checkpoint

// Restoring one recovered checkpoint, and publishing what was recovered.

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/retain-dev/retain/core/checkpoint/registry"
	"github.com/retain-dev/retain/core/lance"
	"github.com/retain-dev/retain/core/storage"
)

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
