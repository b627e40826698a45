package lance

import (
	"context"
	"sort"

	"github.com/retain-dev/retain/core/storage"
)

// Refs is one reading of a dataset's _refs/: its tags as ListTags returns
// them (the good tags, and in TagsErr a *MalformedRefsError naming the bad
// files) and the listing of its branches. Whoever reads a table's tags
// anyway (reconcile, under the run's claim) hands the Refs to cleanup
// planning through Policy.Refs, so the plan does not list _refs/ again.
type Refs struct {
	Dataset string // the root of the dataset read
	Tags    []Tag
	TagsErr error

	// The branch files listed, read only when a plan needs them: most
	// tables have none, and reconcile does not look at branches.
	branchFiles []refFile
	branchesBad []*MalformedRefError
}

// ReadRefs lists _refs/ once, for tags and branches together (one request
// where listing each folder costs two), and reads every tag file. A
// storage error returns no refs. d must be the main dataset.
func (d *Dataset) ReadRefs(ctx context.Context) (*Refs, error) {
	tagObjs, branchObjs, err := d.refsListing(ctx)
	if err != nil {
		return nil, err
	}
	return d.refsFrom(ctx, tagObjs, branchObjs)
}

// refsFrom reads the tags of a listing of _refs/tags/ and keeps the
// listing of _refs/branches/ for a plan to read.
func (d *Dataset) refsFrom(ctx context.Context, tagObjs, branchObjs []storage.Info) (*Refs, error) {
	tagPrefix, branchPrefix := d.Key(tagsDir)+"/", d.Key(branchesDir)+"/"
	r := &Refs{Dataset: d.Root}
	var badTags []*MalformedRefError
	jobs := refFiles("tag", tagPrefix, tagObjs, tagNameFromFile, func(m *MalformedRefError) { badTags = append(badTags, m) })
	r.branchFiles = refFiles("branch", branchPrefix, branchObjs, branchNameFromFile, func(m *MalformedRefError) { r.branchesBad = append(r.branchesBad, m) })
	err := d.readRefFiles(ctx, jobs, func(_ int, name string, body []byte, info storage.Info) {
		t, err := parseTag(body)
		if err != nil {
			badTags = append(badTags, &MalformedRefError{Ref: "tag", Key: info.Key, Reason: err.Error()})
			return
		}
		t.Name, t.Info = name, info
		r.Tags = append(r.Tags, t)
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(r.Tags, func(i, j int) bool { return r.Tags[i].Name < r.Tags[j].Name })
	r.TagsErr = malformedRefs("tag", badTags)
	return r, nil
}

// Branches reads the branch files r listed, as d.ListBranches would
// (malformed files are a *MalformedRefsError beside the good ones), without
// listing _refs/ again: a table with no branch file costs no request. d is
// the dataset r was read from.
func (r *Refs) Branches(ctx context.Context, d *Dataset) ([]Branch, error) { return r.branches(ctx, d) }

// branches reads the branch files r listed, as ListBranches would. It
// leaves r as it was: a plan falling back to its manifests reads them
// again.
func (r *Refs) branches(ctx context.Context, d *Dataset) ([]Branch, error) {
	bad := append([]*MalformedRefError(nil), r.branchesBad...)
	var good []Branch
	err := d.readRefFiles(ctx, r.branchFiles, func(_ int, name string, body []byte, info storage.Info) {
		b, err := parseBranch(body)
		if err != nil {
			bad = append(bad, &MalformedRefError{Ref: "branch", Key: info.Key, Reason: err.Error()})
			return
		}
		b.Name, b.Info = name, info
		good = append(good, b)
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(good, func(i, j int) bool { return good[i].Name < good[j].Name })
	return good, malformedRefs("branch", bad)
}

// malformedRefs is the error for bad files of one kind of ref, nil for none.
func malformedRefs(ref string, bad []*MalformedRefError) error {
	if len(bad) == 0 {
		return nil
	}
	sort.Slice(bad, func(i, j int) bool { return bad[i].Key < bad[j].Key })
	return &MalformedRefsError{Ref: ref, Files: bad}
}

// refsListing splits one listing of _refs/ into the tags' and the
// branches' folders (anything else under _refs/ Lance does not read).
func (d *Dataset) refsListing(ctx context.Context) (tags, branches []storage.Info, err error) {
	objs, err := d.Store.List(ctx, d.Key(refsDir)+"/", 2*maxRefsList)
	if err != nil {
		return nil, nil, err
	}
	return under(objs, d.Key(tagsDir)+"/"), under(objs, d.Key(branchesDir)+"/"), nil
}
