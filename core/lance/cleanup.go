package lance

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/retain-dev/retain/core/internal/glob"
	"github.com/retain-dev/retain/core/storage"
)

// Cleanup of one Lance dataset family: the main dataset and every branch
// under its tree/.
//
// It mirrors Lance's own cleanup (rust/lance/src/dataset/cleanup.rs, Lance
// 12) where the two overlap:
//   - a version is kept when it is the latest of its branch, tagged, or not
//     older than the cut-off (committed at or after it; Lance:
//     timestamp < before_timestamp means "old");
//   - files referenced by a kept version are kept; files referenced only by
//     removed versions are deleted together with those versions, whatever
//     their age ("verified" in Lance's words);
//   - a file no version references at all is deleted only when it is older
//     than a safety window (Lance: 7 days, or never with delete_unverified),
//     because it may belong to a commit in flight;
//   - only Lance's managed folders are looked at, each for its own kinds of
//     file: _versions/.tmp*, _transactions/*.txn, _deletions/*.arrow|.bin,
//     _indices/<uuid>/*, data/*.lance and the blob sidecars
//     data/<stem>/<blob>.blob. Everything else — _refs/, tree/ of another
//     branch, _mem_wal/, unknown folders and extensions, detached manifests,
//     the version hint — is never touched.
//
// It adds what retain needs and Lance does not offer:
//   - a window of the last N versions per branch (Lance has
//     retain_n_versions in Rust, not in LanceDB's Node or Python optimize);
//   - explicit extra roots from the caller (checkpoints);
//   - a tagged old version is kept, not a reason to abort (Lance aborts the
//     whole run unless error_if_tagged_old_versions is off);
//   - branches are planned together with main: every branch is cleaned by
//     the same policy, and a branch's fork point (its parent's version
//     ParentVersion) is always kept with all its files, where Lance keeps
//     the fork-point manifest only while the branch still uses parent files
//     and deletes the fork point's own transaction file. Every file a kept
//     version of any branch references is kept, wherever it lives in the
//     family, so parent files a branch inherits survive the parent's
//     cleanup;
//   - a plan that can be previewed, and an execution that re-checks what
//     the plan relied on and deletes manifests before files.
//
// Where it knowingly differs from Lance 12 (found by the differential test
// against Lance's own cleanup, differential_test.go):
//   - a file directly under _indices/ (not in a <uuid>/ folder) is kept;
//     Lance takes its name for an index uuid and deletes it;
//   - files referenced only by removed versions are deleted whatever their
//     modification time; Lance lists most folders only up to the oldest
//     kept manifest's timestamp, so with a sparse keep (an old tag) it can
//     leave such files behind for good (lance-format/lance#8705);
//   - Lance's cleanup inside LanceDB's optimize keeps the version it read
//     (the latest after compaction) even when index optimization commits a
//     newer one right after; retain keeps what is latest when it plans.
//
// Everything it does not fully understand refuses the whole family, typed
// (ErrCleanupRefused), before anything is deleted.

// member is one dataset of the family: main or a branch.
type member struct {
	branch string // "" for main
	ds     *Dataset
	// nested: roots (with '/') of other members under this one's root,
	// whose folders are theirs, never this member's. Lance puts branch
	// "a/data" at tree/a/data/, inside branch a's data/ folder, and Lance
	// 12's own cleanup of a then takes the nested branch's data and index
	// files for a's unreferenced data files and deletes them (seen with
	// delete_unverified; after 7 days without it).
	nested   []string
	versions []Version
	// txns: the listing of _transactions/ decideReplay made, which sweep
	// uses rather than list it again (nil: not listed yet).
	// versionObjs: the listing of _versions/ the versions came from,
	// which sweep reuses.
	versionObjs []storage.Info
	txns        []storage.Info
	// first: the first listing page of each managed folder but
	// _versions/, requested side by side as soon as the versions are
	// listed (never before: a kept version's files must be in a listing
	// made after it was seen) and awaited where the folder is walked.
	first map[string]*firstPage
}

// firstPage is one folder's first listing page, requested ahead.
type firstPage struct {
	done chan struct{}
	page storage.ListPage
	err  error
}

// prefetch requests the first page of m's managed folders (but
// _versions/, listed already) in the background.
func (pl *planner) prefetch(ctx context.Context, m *member) {
	m.first = map[string]*firstPage{}
	for _, dir := range managedDirs {
		if dir == versionsDir {
			continue
		}
		fp := &firstPage{done: make(chan struct{})}
		m.first[dir] = fp
		go func() {
			defer close(fp.done)
			fp.page, fp.err = pl.d.Store.ListPage(ctx, storage.ListOptions{Prefix: m.ds.Key(dir) + "/"})
		}()
	}
}

// listDir walks every page of folder dir of m, the first from the
// prefetch, handing each object to fn.
func (pl *planner) listDir(ctx context.Context, m *member, dir string, fn func(storage.Info)) error {
	prefix := m.ds.Key(dir) + "/"
	opts := storage.ListOptions{Prefix: prefix}
	var page storage.ListPage
	var err error
	if fp := m.first[dir]; fp != nil {
		select {
		case <-fp.done:
		case <-ctx.Done():
			return ctx.Err()
		}
		page, err = fp.page, fp.err
	} else {
		page, err = pl.d.Store.ListPage(ctx, opts)
	}
	for {
		if err != nil {
			return err
		}
		for _, o := range page.Objects {
			fn(o)
		}
		if !page.More {
			return nil
		}
		if len(page.Objects) == 0 {
			return fmt.Errorf("listing %s: the store returned an empty page that claims more", prefix)
		}
		opts.StartAfter = page.Objects[len(page.Objects)-1].Key
		page, err = pl.d.Store.ListPage(ctx, opts)
	}
}

// planner holds the state of one PlanCleanup.
type planner struct {
	d       *Dataset
	p       Policy
	now     time.Time
	window  time.Duration
	members []*member
	plan    *Plan
	// kept: every file a kept version references. removed: for files
	// that removed versions reference, which ones (by key; index folders
	// by their folder key).
	kept    *RefSet
	removed map[string]*RemovedRefs
	// need: every file a kept version references that must be in the
	// listings (checkKept); listed: the prefixes sweep listed.
	need   map[string]*keptFile
	listed []string
	stats  planStats
	// whole: the table's one listing page, when it fit in one
	// (cleanup_whole.go); nil: folder by folder.
	whole []storage.Info
}

// keptFile is one file kept versions need, and what the listings showed.
type keptFile struct {
	size   int64 // recorded size; <= 0: none recorded
	first  VersionID
	n      int
	listed int64 // -1 until listed
	folder bool
}

func (pl *planner) refuse(key, reason string, cause error) error {
	return &CleanupError{Dataset: pl.d.Root, Key: key, Reason: reason, Err: ErrCleanupRefused, Cause: cause}
}

// PlanCleanup plans the cleanup of the dataset family rooted at d, which
// must be the main dataset (its tags and branches live there). It reads
// every manifest of every branch once (with p.FromTransactions, main's
// removed versions mostly from their transactions instead:
// cleanup_replay.go) — at most maxReadAhead of them
// in memory at a time, each released once decided, so memory is bounded by
// a few manifests plus the plan, not by the history — and lists Lance's
// managed folders page by page; it deletes nothing. Anything it cannot fully read or
// understand refuses the whole family with a *CleanupError
// (ErrCleanupRefused) naming the object. A policy that keeps nothing but
// the pinned versions must say so (KeepLast: 1).
func (d *Dataset) PlanCleanup(ctx context.Context, p Policy) (*Plan, error) {
	if p.OlderThan.IsZero() && p.KeepLast == 0 {
		return nil, storage.Errorf("lance-cleanup", d.Root, storage.ErrInvalidArgument,
			"the policy sets neither OlderThan nor KeepLast: say which versions to keep (KeepLast: 1 keeps only the latest)")
	}
	if p.KeepLast < 0 {
		return nil, storage.Errorf("lance-cleanup", d.Root, storage.ErrInvalidArgument, "KeepLast %d is negative", p.KeepLast)
	}
	p.Branches = append([]BranchWindow(nil), p.Branches...)
	for i := range p.Branches {
		bw := &p.Branches[i]
		m, err := glob.Compile(bw.Pattern)
		if err != nil {
			return nil, storage.Errorf("lance-cleanup", d.Root, storage.ErrInvalidArgument, "branch window %q: %v", bw.Pattern, err)
		}
		if bw.OlderThan.IsZero() && bw.KeepLast <= 0 {
			return nil, storage.Errorf("lance-cleanup", d.Root, storage.ErrInvalidArgument,
				"branch window %q sets neither OlderThan nor a positive KeepLast: say which versions to keep", bw.Pattern)
		}
		bw.match = m
	}
	pl := &planner{d: d, p: p, now: p.now(), window: p.safetyWindow(), kept: NewRefSet(), removed: map[string]*RemovedRefs{}, need: map[string]*keptFile{}}
	pl.plan = &Plan{Dataset: d.Root, PlannedAt: pl.now, Policy: PlanPolicy{KeepLast: p.KeepLast, Branches: p.Branches, SafetyWindow: pl.windowText()}}
	if !p.OlderThan.IsZero() {
		t := p.OlderThan
		pl.plan.Policy.OlderThan = &t
	}
	for _, r := range p.ExtraRoots {
		if r.Branch == "main" {
			r.Branch = ""
		}
		pl.plan.Policy.ExtraRoots = append(pl.plan.Policy.ExtraRoots, r)
	}
	pl.whole = pl.wholePage(ctx)
	pl.plan.Snapshot.Whole = pl.whole != nil
	tags, branches, err := pl.readRefs(ctx)
	if err != nil {
		return nil, err
	}
	if err := pl.listMembers(ctx, branches); err != nil {
		return nil, err
	}
	roots, err := pl.roots(tags, branches)
	if err != nil {
		return nil, err
	}
	for _, m := range pl.members {
		decide := pl.decide
		if pl.replayable(m) && pl.worthReplaying(m, roots[m.branch]) {
			decide = pl.decideReplay
		}
		if err := decide(ctx, m, roots[m.branch]); err != nil {
			if errors.Is(err, errReplayMismatch) {
				// Not what the replay models: plan from every manifest.
				mismatch := pl.stats.mismatch
				p.FromTransactions = false
				plan, err := d.PlanCleanup(ctx, p)
				if plan != nil {
					plan.stats.fellBack, plan.stats.mismatch = true, mismatch
				}
				return plan, err
			}
			return nil, err
		}
	}
	for _, m := range pl.members {
		if err := pl.sweep(ctx, m); err != nil {
			return nil, err
		}
	}
	if err := pl.checkKept(); err != nil {
		if pl.whole != nil && errors.Is(err, ErrKeptVersionBroken) {
			// Perhaps only the page's order (cleanup_whole.go): look again,
			// every folder listed after the versions.
			p.folderByFolder = true
			return d.PlanCleanup(ctx, p)
		}
		return nil, err
	}
	pl.finish()
	pl.plan.stats = pl.stats
	return pl.plan, nil
}

func (pl *planner) windowText() string {
	if pl.window < 0 {
		return "none"
	}
	return pl.window.String()
}

// readRefs reads tags and branches (or takes Policy.Refs, read already);
// a malformed file refuses.
func (pl *planner) readRefs(ctx context.Context) ([]Tag, []Branch, error) {
	refs := pl.p.Refs
	if refs == nil || refs.Dataset != pl.d.Root {
		var err error
		if pl.whole != nil {
			refs, err = pl.refsFromWhole(ctx)
		} else {
			refs, err = pl.d.ReadRefs(ctx)
		}
		if err != nil {
			return nil, nil, pl.refuseRefs(err, "tags and branches")
		}
	}
	if refs.TagsErr != nil {
		return nil, nil, pl.refuseRefs(refs.TagsErr, "tags")
	}
	branches, err := refs.branches(ctx, pl.d)
	if err != nil {
		return nil, nil, pl.refuseRefs(err, "branches")
	}
	tags := refs.Tags
	pl.plan.tags, pl.plan.branches = tags, branches
	for _, t := range tags {
		pl.plan.Snapshot.Tags = append(pl.plan.Snapshot.Tags, RefSnapshot{Name: t.Name, Key: t.Info.Key, ObjectVersion: t.Info.Version})
	}
	for _, b := range branches {
		pl.plan.Snapshot.Branches = append(pl.plan.Snapshot.Branches, RefSnapshot{Name: b.Name, Key: b.Info.Key, ObjectVersion: b.Info.Version})
	}
	return tags, branches, nil
}

func (pl *planner) refuseRefs(err error, what string) error {
	var bad *MalformedRefsError
	if errors.As(err, &bad) {
		return pl.refuse(strings.Join(bad.Keys(), ", "), "a "+bad.Ref+" file Lance cannot read either: what it pins is unknown", err)
	}
	return pl.refuse(pl.d.Key("_refs/"), "listing "+what, err)
}

// listMembers lists the versions of main and of every branch.
func (pl *planner) listMembers(ctx context.Context, branches []Branch) error {
	pl.members = append(pl.members, &member{ds: pl.d})
	for _, b := range branches {
		bd, err := pl.d.Branch(b.Name)
		if err != nil {
			return pl.refuse(b.Info.Key, "branch name", err)
		}
		pl.members = append(pl.members, &member{branch: b.Name, ds: bd})
	}
	for _, m := range pl.members {
		for _, o := range pl.members {
			if o != m && strings.HasPrefix(o.ds.Root, m.ds.Root+"/") {
				m.nested = append(m.nested, o.ds.Root+"/")
			}
		}
		// One listing of _versions/ serves both the versions and the sweep
		// (its .tmp files): a second would cost a request per 1,000
		// manifests and show nothing the plan could act on.
		var objs []storage.Info
		var err error
		if pl.whole != nil {
			objs = pl.fromWhole(m)
		} else {
			objs, err = pl.d.Store.List(ctx, m.ds.Key(versionsDir)+"/", maxVersionsList)
		}
		var vs []Version
		if err == nil {
			vs, err = m.ds.versionsIn(objs)
		}
		if err != nil {
			return pl.refuse(m.ds.Key(versionsDir+"/"), "listing the versions of "+branchName(m.branch), err)
		}
		m.versions, m.versionObjs = vs, objs
		if pl.whole == nil {
			pl.prefetch(ctx, m)
		}
		last := vs[len(vs)-1]
		pl.plan.Snapshot.Heads = append(pl.plan.Snapshot.Heads, HeadSnapshot{Branch: m.branch, Root: m.ds.Root,
			Version: last.N, Key: last.Key, ObjectVersion: last.Info.Version})
	}
	return nil
}

// roots collects the reasons to keep, per branch and version, that are
// known before any manifest is read.
func (pl *planner) roots(tags []Tag, branches []Branch) (map[string]map[uint64][]string, error) {
	out := map[string]map[uint64][]string{}
	byName := map[string]*member{}
	for _, m := range pl.members {
		byName[m.branch] = m
		out[m.branch] = map[uint64][]string{}
	}
	has := func(m *member, n uint64) bool {
		i := sort.Search(len(m.versions), func(i int) bool { return m.versions[i].N >= n })
		return i < len(m.versions) && m.versions[i].N == n
	}
	for _, m := range pl.members {
		vs := m.versions
		out[m.branch][vs[len(vs)-1].N] = append(out[m.branch][vs[len(vs)-1].N], "latest")
		w := pl.branchWindow(m.branch)
		for i := max(0, len(vs)-w.keepLast); i < len(vs) && w.keepLast > 0; i++ {
			out[m.branch][vs[i].N] = append(out[m.branch][vs[i].N], "keep-last "+strconv.Itoa(w.keepLast)+w.suffix())
		}
	}
	for _, t := range tags {
		m := byName[t.Branch]
		switch {
		case m == nil:
			pl.note("tag %q names branch %q, which has no branch file: it pins nothing", t.Name, t.Branch)
		case !has(m, t.Version):
			pl.note("tag %q names %s, which no longer exists", t.Name, VersionID{t.Branch, t.Version})
		default:
			out[t.Branch][t.Version] = append(out[t.Branch][t.Version], "tag "+t.Name)
		}
	}
	for _, b := range branches {
		m := byName[b.ParentBranch]
		switch {
		case m == nil:
			return nil, pl.refuse(b.Info.Key, fmt.Sprintf("branch %q names parent branch %q, which has no branch file", b.Name, b.ParentBranch), nil)
		case !has(m, b.ParentVersion):
			// The branch reads its inherited files through its own
			// manifests' base paths, which keep those files below.
			pl.note("fork point %s of branch %q no longer exists", VersionID{b.ParentBranch, b.ParentVersion}, b.Name)
		default:
			out[b.ParentBranch][b.ParentVersion] = append(out[b.ParentBranch][b.ParentVersion], "fork point of branch "+b.Name)
		}
	}
	for _, r := range pl.plan.Policy.ExtraRoots {
		m := byName[r.Branch]
		id := VersionID{r.Branch, r.Version}
		if m == nil || !has(m, r.Version) {
			return nil, pl.refuse("", fmt.Sprintf("extra root %s does not exist: the caller pins a version that is gone; fix the pin first", id), nil)
		}
		reason := "extra root"
		if r.Reason != "" {
			reason += ": " + r.Reason
		}
		out[r.Branch][r.Version] = append(out[r.Branch][r.Version], reason)
	}
	return out, nil
}

func (pl *planner) note(format string, args ...any) {
	pl.plan.Notes = append(pl.plan.Notes, fmt.Sprintf(format, args...))
}

// decide reads each manifest of m (in order, a few read ahead), decides
// whether its version is kept, and records the files it references; the
// manifest is dropped right after.
func (pl *planner) decide(ctx context.Context, m *member, roots map[uint64][]string) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	next := readAhead(ctx, m.ds, m.versions, pl.p.ReadAhead)
	w := pl.branchWindow(m.branch)
	for _, v := range m.versions {
		man, err := next()
		if err != nil {
			return pl.refuse(v.Key, "reading the manifest of "+VersionID{m.branch, v.N}.String(), err)
		}
		pl.stats.manifestsRead++
		pl.stats.manifestBytes += man.Size
		if man.Branch != m.branch {
			return pl.refuse(v.Key, fmt.Sprintf("the manifest says it belongs to %s, but it lies under %s; cleanup runs on the main dataset's root",
				branchName(man.Branch), branchName(m.branch)), nil)
		}
		reasons := append([]string(nil), roots[v.N]...)
		if !w.olderThan.IsZero() && !man.Timestamp.Before(w.olderThan) {
			reasons = append(reasons, "not older than the cut-off "+w.olderThan.UTC().Format(time.RFC3339Nano)+w.suffix())
		}
		pv := PlannedVersion{Branch: m.branch, Version: v.N, Timestamp: man.Timestamp, Key: v.Key, Size: v.Info.Size, Keep: len(reasons) > 0, Rule: w.rule}
		id := VersionID{m.branch, v.N}
		if pv.Keep {
			pv.Reasons = reasons
			pl.kept.Add(man.Files()...)
			if err := pl.needFiles(v.Key, id, man.Files()); err != nil {
				return err
			}
		} else {
			pv.Reasons = []string{pl.removedReason(w, man.Timestamp)}
			for _, f := range man.Files() {
				if f.Outside || f.Kind == KindManifest {
					continue
				}
				r := pl.removed[f.Key]
				if r == nil {
					r = &RemovedRefs{First: id}
					pl.removed[f.Key] = r
				}
				r.Count++
				r.Last = id
			}
		}
		pl.plan.Versions = append(pl.plan.Versions, pv)
	}
	return nil
}

// maxReadAhead bounds how many manifests are read and parsed ahead of the
// one being decided: the reads overlap (a GET's latency dominates on
// object stores) as far as the store's parallelism allows, while memory
// stays bounded by this many manifests, never by the history's length.
const maxReadAhead = 16

// readAhead reads the manifests of vs in the background, at most the
// store's parallelism (and maxReadAhead) ahead, and returns them in order,
// one per call.
func readAhead(ctx context.Context, d *Dataset, vs []Version, depth int) func() (*Manifest, error) {
	type result struct {
		m   *Manifest
		err error
	}
	futures := make([]chan result, len(vs))
	for i := range futures {
		futures[i] = make(chan result, 1)
	}
	if depth <= 0 {
		depth = min(d.Store.Parallelism(), maxReadAhead)
	}
	sem := make(chan struct{}, max(1, depth))
	go func() {
		for i, v := range vs {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			go func() {
				m, err := d.ReadManifest(ctx, v)
				futures[i] <- result{m, err}
			}()
		}
	}()
	i := 0
	return func() (*Manifest, error) {
		// A read the producer never started (it stops when ctx ends) has
		// no result to wait for.
		select {
		case r := <-futures[i]:
			i++
			<-sem
			return r.m, r.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}
