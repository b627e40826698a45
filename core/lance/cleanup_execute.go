package lance

// Carrying out a plan: the recheck under the plan's tokens, then deletes.

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"sync"

	"github.com/retain-dev/retain/core/failpoint"
	"github.com/retain-dev/retain/core/storage"
)

// FPCleanupAfterManifests is the failpoint inside a table's cleanup: the
// removed versions' manifests are gone, their files not yet.
const FPCleanupAfterManifests = "lance-cleanup/after-manifests"

// ExecuteCleanup carries out plan on d (the main dataset it was made for).
// First it re-checks what the plan relied on — every branch's latest
// version, every tag and branch file — and refuses with ErrPlanStale if any
// changed (a commit, a tag, a branch since planning). It also refuses a
// plan whose objects are not ones cleanup may delete. Then it deletes the
// manifests of removed versions, and only when all of them are gone, the
// other files, in DeleteMany batches (deleteParallelism at once). A crash part-way leaves only
// unreferenced files: the next plan collects them once they are older
// than the safety window (their removed versions, the proof, are gone).
// Failed deletes are listed in Result.Failed and reported as an error; a
// failed manifest delete stops before any other file is deleted.
func (d *Dataset) ExecuteCleanup(ctx context.Context, plan *Plan) (*Result, error) {
	res := &Result{}
	stale := func(key, reason string, cause error) error {
		return &CleanupError{Dataset: d.Root, Key: key, Reason: reason, Err: ErrPlanStale, Cause: cause}
	}
	if plan == nil || plan.Dataset != d.Root {
		return res, storage.Errorf("lance-cleanup", d.Root, storage.ErrInvalidArgument, "the plan is for another dataset")
	}
	if err := d.checkPlanShape(plan); err != nil {
		return res, err
	}
	if err := d.recheck(ctx, plan, stale); err != nil {
		return res, err
	}
	removedKeys := map[string]bool{}
	for _, v := range plan.Versions {
		if !v.Keep {
			removedKeys[v.Key] = true
		}
	}
	var manifests, files []PlannedFile
	for _, f := range plan.Files {
		if removedKeys[f.Key] {
			manifests = append(manifests, f)
		} else {
			files = append(files, f)
		}
	}
	res.Started = true
	if err := d.deleteAll(ctx, manifests, res, true); err != nil || len(res.Failed) > 0 {
		// Files go only once every removed version's manifest is gone:
		// until then a removed version may still be read.
		for _, f := range files {
			res.Remaining = append(res.Remaining, f.Key)
		}
		if err != nil {
			return res, err
		}
		return res, fmt.Errorf("%w: cleanup of %q: %d manifest(s) could not be deleted (first %q: %s); no other file was deleted: carry out the plan again",
			ErrDeletesFailed, d.Root, len(res.Failed), res.Failed[0].Key, res.Failed[0].Err)
	}
	failpoint.Hit(FPCleanupAfterManifests)
	if err := d.deleteAll(ctx, files, res, false); err != nil {
		return res, err
	}
	if len(res.Failed) > 0 {
		return res, fmt.Errorf("%w: cleanup of %q: %d file(s) could not be deleted (first %q: %s); they stay, unreferenced: carry out the plan again to retry them",
			ErrDeletesFailed, d.Root, len(res.Failed), res.Failed[0].Key, res.Failed[0].Err)
	}
	return res, nil
}

// checkPlanShape refuses a plan (perhaps edited, perhaps read back from
// JSON) that would delete an object cleanup never deletes: a kept
// manifest, a ref, anything outside the managed folders of the family.
func (d *Dataset) checkPlanShape(plan *Plan) error {
	bad := func(key, why string) error {
		return &CleanupError{Dataset: d.Root, Key: key, Reason: "the plan is not one PlanCleanup makes: " + why, Err: ErrCleanupRefused}
	}
	roots := map[string]bool{}
	for _, h := range plan.Snapshot.Heads {
		if h.Branch == "" && h.Root != d.Root {
			return bad(h.Root, "its main root is not this dataset's")
		}
		if h.Branch != "" {
			b, err := d.Branch(h.Branch)
			if err != nil || b.Root != h.Root {
				return bad(h.Root, "branch "+h.Branch+" does not live there")
			}
		}
		roots[h.Root] = true
	}
	versions := map[string]PlannedVersion{}
	for _, v := range plan.Versions {
		versions[v.Key] = v
	}
	for _, f := range plan.Files {
		owner, ok := ownerRoot(roots, f.Key)
		if !ok {
			return bad(f.Key, "it lies in no dataset of the family")
		}
		if v, ok := versions[f.Key]; ok {
			if v.Keep {
				return bad(f.Key, "it is the manifest of a kept version")
			}
			if f.Kind != KindManifest || path.Dir(f.Key) != join(owner, versionsDir) {
				return bad(f.Key, "a version's manifest in the wrong place")
			}
			continue
		}
		if _, _, _, ok := classify(owner, f.Key); !ok {
			return bad(f.Key, "not a file of Lance's managed folders")
		}
	}
	return nil
}

// ownerRoot returns the dataset of the family whose folders hold key: the
// deepest root key lies in a subfolder of (as sweep decides: a nested
// branch's root may sit in another branch's data/ folder, where that
// branch's own files lie directly).
func ownerRoot(roots map[string]bool, key string) (string, bool) {
	owner, found := "", false
	for r := range roots {
		rest, ok := strings.CutPrefix(key, r+"/")
		if r == "" {
			rest, ok = key, true
		}
		if ok && strings.Contains(rest, "/") && (!found || len(r) > len(owner)) {
			owner, found = r, true
		}
	}
	return owner, found
}

// recheck compares the dataset with the plan's snapshot.
func (d *Dataset) recheck(ctx context.Context, plan *Plan, stale func(key, reason string, cause error) error) error {
	if plan.Snapshot.Whole {
		if ok, err := d.recheckWhole(ctx, plan, stale); ok {
			return err
		}
	}
	// One listing of _refs/ for tags and branches both.
	tagObjs, branchObjs, err := d.refsListing(ctx)
	if err != nil {
		return &CleanupError{Dataset: d.Root, Key: d.Key(refsDir + "/"), Reason: "re-reading the tags and branches", Err: ErrCleanupRefused, Cause: err}
	}
	if err := d.recheckRefs(ctx, plan, tagObjs, branchObjs, stale); err != nil {
		return err
	}
	return d.recheckHeads(plan, func(ds *Dataset) (Version, error) { return ds.Latest(ctx) }, stale)
}

// recheckHeads refuses a plan when a branch's latest version (as latest
// reads it) is not the head the plan was made at.
func (d *Dataset) recheckHeads(plan *Plan, latest func(*Dataset) (Version, error), stale func(key, reason string, cause error) error) error {
	for _, h := range plan.Snapshot.Heads {
		ds := d
		if h.Branch != "" {
			var err error
			if ds, err = d.Branch(h.Branch); err != nil {
				return stale(h.Root, "branch "+h.Branch, err)
			}
		}
		v, err := latest(ds)
		if errors.Is(err, ErrNotDataset) {
			return stale(ds.Key(versionsDir+"/"), branchName(h.Branch)+" has no versions any more", err)
		}
		if err != nil {
			return &CleanupError{Dataset: d.Root, Key: ds.Key(versionsDir + "/"), Reason: "re-reading the latest version of " + branchName(h.Branch),
				Err: ErrCleanupRefused, Cause: err}
		}
		if v.N != h.Version || v.Key != h.Key || v.Info.Version != h.ObjectVersion {
			return stale(v.Key, fmt.Sprintf("%s's latest version is %d, the plan was made at %d: a commit since planning", branchName(h.Branch), v.N, h.Version), nil)
		}
	}
	return nil
}

// recheckRefs compares the listings of the tags' and the branches' folders
// with the plan's refs.
func (d *Dataset) recheckRefs(ctx context.Context, plan *Plan, tagObjs, branchObjs []storage.Info, stale func(key, reason string, cause error) error) error {
	key, same, err := d.refsSince(ctx, tagsDir, tagObjs, tagNameFromFile, plan.Snapshot.Tags)
	if err != nil {
		return &CleanupError{Dataset: d.Root, Key: d.Key(tagsDir + "/"), Reason: "re-reading the tags", Err: ErrCleanupRefused, Cause: err}
	}
	if !same {
		return stale(key, "a tag was created, changed or deleted", nil)
	}
	key, same, err = d.refsSince(ctx, branchesDir, branchObjs, branchNameFromFile, plan.Snapshot.Branches)
	if err != nil {
		return &CleanupError{Dataset: d.Root, Key: d.Key(branchesDir + "/"), Reason: "re-reading the branches", Err: ErrCleanupRefused, Cause: err}
	}
	if !same {
		return stale(key, "a branch was created, changed or deleted", nil)
	}
	return nil
}

// refsSince says whether the ref files under dir (objs, its listing) are
// still the ones a plan recorded: the same keys and names, each at the
// version recorded. It reads only a file whose listed version is not the
// recorded one (a ref that changed, or a store whose listings name
// versions otherwise than its reads), so an unchanged folder costs one
// listing where reading every ref cost one request more per ref. Any file
// the plan did not record (a new ref, one Lance cannot read) is a change:
// planning refuses those, so it is new. key names the first change.
func (d *Dataset) refsSince(ctx context.Context, dir string, objs []storage.Info, nameOf func(string) (string, string), planned []RefSnapshot) (key string, same bool, err error) {
	prefix := d.Key(dir) + "/"
	var bad string
	files := refFiles("ref", prefix, objs, nameOf, func(m *MalformedRefError) {
		if bad == "" {
			bad = m.Key
		}
	})
	if bad != "" {
		return bad, false, nil
	}
	want := make(map[string]RefSnapshot, len(planned))
	for _, r := range planned {
		want[r.Key] = r
	}
	for _, f := range files {
		p, ok := want[f.info.Key]
		if !ok || p.Name != f.name {
			return f.info.Key, false, nil
		}
		delete(want, f.info.Key)
		if f.info.Version != "" && f.info.Version == p.ObjectVersion {
			continue
		}
		_, info, err := d.Store.ReadAll(ctx, f.info.Key)
		if errors.Is(err, storage.ErrNotFound) {
			return f.info.Key, false, nil
		}
		if err != nil {
			return "", false, err
		}
		if info.Version != p.ObjectVersion {
			return f.info.Key, false, nil
		}
	}
	for _, r := range planned {
		if _, left := want[r.Key]; left {
			return r.Key, false, nil
		}
	}
	return "", true, nil
}

// deleteParallelism is how many DeleteMany calls run at once: Lance's own
// cleanup deletes with its I/O parallelism too, and a store's batch delete
// is one request whose latency dominates.
const deleteParallelism = 4

// deleteAll deletes files in DeleteMany calls, up to deleteParallelism at
// once, in chunks of at most the adapter's batch limit (smaller when that
// spreads the work over the parallel calls, but not below 100 keys), and
// records the outcome. A failed call is returned once all calls ended;
// failed keys, and every key of a failed call the store did not confirm,
// are recorded in res.Failed and res.Remaining.
func (d *Dataset) deleteAll(ctx context.Context, files []PlannedFile, res *Result, manifests bool) error {
	if len(files) == 0 {
		return nil
	}
	batch := d.Store.Capabilities().Limits.MaxDeleteBatch
	if batch <= 0 {
		batch = 1000
	}
	chunk := min(batch, max(100, (len(files)+deleteParallelism-1)/deleteParallelism))
	type outcome struct {
		files []PlannedFile
		out   []storage.DeleteResult
		err   error
	}
	var chunks [][]PlannedFile
	for len(files) > 0 {
		n := min(chunk, len(files))
		chunks = append(chunks, files[:n])
		files = files[n:]
	}
	results := make([]outcome, len(chunks))
	sem := make(chan struct{}, deleteParallelism)
	var wg sync.WaitGroup
	for i, c := range chunks {
		keys := make([]string, len(c))
		for j, f := range c {
			keys[j] = f.Key
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			out, err := d.Store.DeleteMany(ctx, keys)
			results[i] = outcome{c, out, err}
		}()
	}
	wg.Wait()
	var firstErr error
	for _, r := range results {
		for i, f := range r.files {
			var err error
			switch {
			case i < len(r.out) && r.out[i].Key == f.Key && r.out[i].Err != nil:
				err = r.out[i].Err
			case r.err != nil:
				// The call failed: a key it reports no error for may or
				// may not be gone. Not counted; named.
				err = fmt.Errorf("outcome unknown: the batch delete failed: %w", r.err)
			case i >= len(r.out) || r.out[i].Key != f.Key:
				err = fmt.Errorf("outcome unknown: the store returned no result for the key")
			}
			if err != nil && storage.KindOf(err) == storage.ErrNotFound && r.err == nil {
				err = nil // already gone
			}
			if err != nil {
				res.Failed = append(res.Failed, FailedDelete{Key: f.Key, Err: err.Error()})
				res.Remaining = append(res.Remaining, f.Key)
				continue
			}
			res.FilesDeleted++
			res.BytesDeleted += f.Size
			if manifests {
				res.ManifestsDeleted++
			}
		}
		if r.err != nil && firstErr == nil {
			firstErr = fmt.Errorf("%w: cleanup of %q: deleting %d objects: %w; they may stay, unreferenced: carry out the plan again to retry them", ErrDeletesFailed, d.Root, len(r.files), r.err)
		}
	}
	return firstErr
}
