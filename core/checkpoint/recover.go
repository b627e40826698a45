package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"sort"
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
