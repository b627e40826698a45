package retention

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/retain-dev/retain/core/checkpoint/registry"
	"github.com/retain-dev/retain/core/lance"
	"github.com/retain-dev/retain/core/storage"
)

// The registry's own cleanup (issue 7, section 3.5). A registry version
// depends on nothing older (a segmented one on segments named by digest,
// deleted after it when only removed versions reference them), and nothing
// depends on it except the checkpoints whose registry pin (`_m_` tag)
// names it. A run
// removes a registry version only when all of these hold:
//   - it is older than the head the run's boundary commit makes (the head
//     and anything newer are never candidates);
//   - no tag under _retain/registry/_refs/tags names it, and no live
//     checkpoint's header does (a live checkpoint whose `_m_` tag went
//     missing still keeps its version: fail closed);
//   - the window allows it: not among the newest KeepLast versions (the
//     boundary commit counting as the newest), and written before the
//     cut-off when OlderThan is set.
// The list is made while planning, under the claim, and journaled; the run
// re-reads the registry pins right before deleting.

// registryPins returns the registry versions that registry pin tags and
// live checkpoints keep.
func registryPins(ctx context.Context, s *storage.Store, snap *registry.Snapshot) (map[uint64]string, error) {
	keep := map[uint64]string{}
	ds, err := lance.Open(s, registry.RegistryPath)
	if err != nil {
		return nil, err
	}
	tags, err := ds.ListTags(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the registry pins under %s/_refs/tags: %w", registry.RegistryPath, err)
	}
	for _, t := range tags {
		keep[t.Version] = "registry pin " + t.Name
	}
	for _, c := range snap.Live() {
		if _, ok := keep[uint64(c.RegistryVersion)]; !ok {
			keep[uint64(c.RegistryVersion)] = fmt.Sprintf("checkpoint %s (%s)", c.Name, c.ID)
		}
	}
	return keep, nil
}

// registryReads is what the registry's own cleanup plan is made from: its
// version objects, the versions its pins keep, and the head record's
// version.
type registryReads struct {
	objs  []storage.Info
	keep  map[uint64]string
	floor registry.Version
}

// readRegistry makes the three reads of planRegistry side by side.
func readRegistry(ctx context.Context, s *storage.Store, snap *registry.Snapshot) (registryReads, error) {
	var rr registryReads
	var errs [3]error
	var wg sync.WaitGroup
	wg.Add(3)
	go func() {
		defer wg.Done()
		if rr.objs, errs[0] = s.List(ctx, registry.VersionsPrefix, 0); errs[0] != nil {
			errs[0] = fmt.Errorf("listing the registry's versions: %w", errs[0])
		}
	}()
	go func() { defer wg.Done(); rr.keep, errs[1] = registryPins(ctx, s, snap) }()
	go func() { defer wg.Done(); rr.floor, errs[2] = registry.Open(s, registry.Options{}).RecordedVersion(ctx) }()
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return registryReads{}, err
		}
	}
	return rr, nil
}

// registryPrefetch is readRegistry started early (as soon as the run's
// plan has read the registry head), so that its round trips overlap the
// planning of the tables.
type registryPrefetch struct {
	snap *registry.Snapshot
	done chan struct{}
	rr   registryReads
	err  error
}

func prefetchRegistry(ctx context.Context, s *storage.Store, snap *registry.Snapshot) *registryPrefetch {
	f := &registryPrefetch{snap: snap, done: make(chan struct{})}
	go func() {
		defer close(f.done)
		f.rr, f.err = readRegistry(ctx, s, snap)
	}()
	return f
}

func (f *registryPrefetch) wait(ctx context.Context) (registryReads, error) {
	select {
	case <-f.done:
		return f.rr, f.err
	case <-ctx.Done():
		return registryReads{}, context.Cause(ctx)
	}
}

// planRegistryFrom lists the registry versions the run removes, from its
// reads. snap is the head the run plans against; boundary says whether the
// run commits a new head on top of it.
func planRegistryFrom(rr registryReads, snap *registry.Snapshot, p Policy, now time.Time, boundary bool) RegistryCleanup {
	rc := RegistryCleanup{Remove: []uint64{}, State: TableDone}
	type version struct {
		v   uint64
		mod time.Time
	}
	var vs []version
	for _, o := range rr.objs {
		v, ok := registry.ParseVersionKey(o.Key)
		if !ok {
			continue // not a version object: never ours to delete
		}
		if uint64(v) <= uint64(snap.Version) {
			vs = append(vs, version{uint64(v), o.ModTime})
		}
	}
	sort.Slice(vs, func(i, j int) bool { return vs[i].v > vs[j].v }) // newest first
	keep, floor := rr.keep, rr.floor
	if boundary && floor == snap.Version {
		// The boundary commit will record itself; cleanRegistry checks the
		// record again before deleting, and keeps the old head if that
		// record write was lost.
		floor++
	}
	newer := 0 // versions kept newer than this one, the boundary commit included
	if boundary {
		newer = 1
	}
	var cutoff time.Time
	if p.OlderThan > 0 {
		cutoff = now.Add(-p.OlderThan)
	}
	for i, v := range vs {
		rank := newer + i // versions newer than v
		switch {
		case v.v == uint64(snap.Version) && !boundary:
			rc.Kept++ // the head
		case keep[v.v] != "":
			rc.Kept++
		case floor > 0 && v.v >= uint64(floor):
			rc.Kept++ // the head record's version and above: the chain to the head
		case p.KeepLast > 0 && rank < p.KeepLast:
			rc.Kept++
		case p.OlderThan > 0 && (v.mod.IsZero() || !v.mod.Before(cutoff)):
			rc.Kept++ // inside the window, or of unknown age: keep
		case p.KeepLast == 0 && p.OlderThan == 0:
			rc.Kept++
		default:
			rc.Remove = append(rc.Remove, v.v)
		}
	}
	sort.Slice(rc.Remove, func(i, j int) bool { return rc.Remove[i] < rc.Remove[j] })
	if len(rc.Remove) > 0 {
		rc.State = TablePending
	}
	return rc
}

// cleanRegistry deletes the journaled registry versions that the registry
// pins still do not keep; failures are recorded for resume.
func cleanRegistry(ctx context.Context, s *storage.Store, au *auditor, rc *RegistryCleanup) {
	reg := registry.Open(s, registry.Options{})
	// The head record is read while the head and its pins are.
	var floor registry.Version
	var floorErr error
	recorded := make(chan struct{})
	go func() {
		defer close(recorded)
		floor, floorErr = reg.RecordedVersion(ctx)
	}()
	_, snap, err := reg.Head(ctx)
	var keep map[uint64]string
	if err == nil {
		keep, err = registryPins(ctx, s, snap)
	}
	<-recorded
	if err == nil {
		err = floorErr
	}
	if err != nil {
		rc.State, rc.Error = TableFailed, "re-reading the registry pins: "+err.Error()
		return
	}
	var keys []string
	for _, v := range rc.Remove {
		if keep[v] != "" || v >= uint64(snap.Version) || (floor > 0 && v >= uint64(floor)) {
			continue // pinned since planning: kept
		}
		keys = append(keys, registry.VersionKey(registry.Version(v)))
	}
	if len(keys) == 0 {
		rc.State, rc.Error = TableDone, ""
		return
	}
	line := AuditRecord{Event: AuditRemoving, Table: registry.RegistryPath, FilesPlanned: len(keys)}
	for _, k := range keys {
		v, _ := registry.ParseVersionKey(k)
		line.Versions = append(line.Versions, fmt.Sprintf("registry v%d", v))
	}
	if err := au.write(ctx, line); err != nil {
		rc.State, rc.Error = TableFailed, "nothing deleted: "+err.Error()
		return
	}
	// The segments only these versions reference are found before the
	// versions go (it reads them) and deleted after (a version never names
	// a segment that is not there).
	garbage, gerr := segmentGarbage(ctx, s, reg, keys)
	res, err := s.DeleteMany(ctx, keys)
	rc.State, rc.Error, rc.Deleted = TableDone, "", 0
	if err != nil {
		rc.State, rc.Error = TableFailed, "deleting old registry versions: "+err.Error()
	}
	for _, r := range res {
		if r.Err != nil {
			rc.State, rc.Error = TableFailed, fmt.Sprintf("deleting %s: %v", r.Key, r.Err)
			continue
		}
		if err == nil {
			rc.Deleted++
		}
	}
	deleted := map[registry.Version]bool{}
	for _, r := range res {
		if r.Err == nil && err == nil {
			v, _ := registry.ParseVersionKey(r.Key)
			deleted[v] = true
		}
	}
	rc.SegmentsDeleted, rc.SegmentsError = deleteSegments(ctx, s, garbage, gerr, deleted)
	line.Event, line.VersionsRemoved, line.FilesRemoved = AuditRemoved, rc.Deleted, rc.Deleted+rc.SegmentsDeleted
	if rc.State == TableFailed {
		line.Event, line.Error = AuditRemoveFailed, rc.Error
	}
	if err := au.write(ctx, line); err != nil && rc.State != TableFailed {
		rc.Error = "the audit line of the outcome was not written: " + err.Error()
	}
}

// segmentGarbage lists the stored registry versions and asks the registry
// which segments only the versions at keys reference.
func segmentGarbage(ctx context.Context, s *storage.Store, reg *registry.Registry, keys []string) (map[string][]registry.Version, error) {
	objs, err := s.List(ctx, registry.VersionsPrefix, 0)
	if err != nil {
		return nil, err
	}
	var stored, gone []registry.Version
	for _, o := range objs {
		if v, ok := registry.ParseVersionKey(o.Key); ok {
			stored = append(stored, v)
		}
	}
	for _, k := range keys {
		v, _ := registry.ParseVersionKey(k)
		gone = append(gone, v)
	}
	return reg.SegmentGarbage(ctx, stored, gone)
}

// deleteSegments deletes the garbage segments whose versions were all
// deleted, and says how many went and why any did not.
func deleteSegments(ctx context.Context, s *storage.Store, garbage map[string][]registry.Version, gerr error, deleted map[registry.Version]bool) (int, string) {
	if gerr != nil {
		return 0, "finding the segments only removed versions reference: " + gerr.Error()
	}
	var keys []string
	for k, vs := range garbage {
		all := true
		for _, v := range vs {
			all = all && deleted[v]
		}
		if all {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return 0, ""
	}
	sort.Strings(keys)
	res, err := s.DeleteMany(ctx, keys)
	n := 0
	msg := ""
	for _, r := range res {
		if r.Err == nil && err == nil {
			n++
		} else if msg == "" && r.Err != nil {
			msg = fmt.Sprintf("deleting %s: %v", r.Key, r.Err)
		}
	}
	if err != nil {
		msg = "deleting registry segments: " + err.Error()
	}
	return n, msg
}
