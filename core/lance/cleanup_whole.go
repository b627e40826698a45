package lance

import (
	"context"
	"strings"

	"github.com/retain-dev/retain/core/storage"
)

// A table small enough for one listing page (most of a fleet: a few
// versions, a few files) is listed whole, once: that page holds its
// versions, its refs, every managed folder and its branches' folders,
// where listing each folder costs six requests a table and the recheck
// before deleting two more. A table that does not fit is listed folder by
// folder as before, for one request more.
//
// One page is not a snapshot: its keys are read in order, and _deletions/,
// _indices/ and _transactions/ sort before _versions/, so a version
// committed while the page is read can show without a deletion or index
// file it wrote just before. Such a plan can only keep too much or refuse
// (checkKept: a kept file missing), never delete what a version it saw
// references; a refusal from a whole listing is retried folder by folder
// (PlanCleanup), where every folder is listed after the versions. The
// replay from transactions does not take the page's _transactions/ at
// all: it relies on every transaction of a version seen being listed, and
// lists that folder again after the versions (txnCandidates).

// wholePage lists the dataset root as one page; nil when it does not fit
// (or fails: the folder listings that follow report the error).
func (pl *planner) wholePage(ctx context.Context) []storage.Info {
	if pl.d.Root == "" || pl.p.folderByFolder {
		return nil // a dataset at the store's root: its page is the whole store
	}
	page, err := pl.d.Store.ListPage(ctx, storage.ListOptions{Prefix: pl.d.Root + "/"})
	if err != nil || page.More {
		return nil
	}
	if page.Objects == nil {
		page.Objects = []storage.Info{}
	}
	return page.Objects
}

// under returns the objects of a whole listing under prefix, in its order.
func under(objs []storage.Info, prefix string) []storage.Info {
	out := []storage.Info{}
	for _, o := range objs {
		if strings.HasPrefix(o.Key, prefix) {
			out = append(out, o)
		}
	}
	return out
}

// fromWhole fills m's versions listing and folders' first pages from the
// whole listing.
func (pl *planner) fromWhole(m *member) []storage.Info {
	m.first = map[string]*firstPage{}
	for _, dir := range managedDirs {
		if dir == versionsDir {
			continue
		}
		fp := &firstPage{done: make(chan struct{}), page: storage.ListPage{Objects: under(pl.whole, m.ds.Key(dir)+"/")}}
		close(fp.done)
		m.first[dir] = fp
	}
	return under(pl.whole, m.ds.Key(versionsDir)+"/")
}

// refsFromWhole reads the refs a whole listing shows.
func (pl *planner) refsFromWhole(ctx context.Context) (*Refs, error) {
	return pl.d.refsFrom(ctx, under(pl.whole, pl.d.Key(tagsDir)+"/"), under(pl.whole, pl.d.Key(branchesDir)+"/"))
}

// recheckWhole is recheck for a plan made from a whole listing: one page
// of the root shows the refs and every branch's latest version. ok is
// false when the table no longer fits one page (recheck then lists
// folder by folder).
func (d *Dataset) recheckWhole(ctx context.Context, plan *Plan, stale func(key, reason string, cause error) error) (ok bool, err error) {
	page, err := d.Store.ListPage(ctx, storage.ListOptions{Prefix: d.Root + "/"})
	if err != nil {
		return true, &CleanupError{Dataset: d.Root, Key: d.Root + "/", Reason: "re-reading the tags, branches and versions", Err: ErrCleanupRefused, Cause: err}
	}
	if page.More {
		return false, nil
	}
	if err := d.recheckRefs(ctx, plan, under(page.Objects, d.Key(tagsDir)+"/"), under(page.Objects, d.Key(branchesDir)+"/"), stale); err != nil {
		return true, err
	}
	err = d.recheckHeads(plan, func(ds *Dataset) (Version, error) {
		vs, err := ds.versionsIn(under(page.Objects, ds.Key(versionsDir)+"/"))
		if err != nil {
			return Version{}, err
		}
		return vs[len(vs)-1], nil
	}, stale)
	if err != nil {
		return true, err
	}
	return true, nil
}
