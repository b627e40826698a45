package lance

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/retain-dev/retain/core/storage"
)

// Refusals of a branch delete. Each *BranchDeleteError matches the
// sentinels of the reasons it lists and their core kinds.
var (
	// ErrBranchHasChildren: other branches were forked from the branch
	// (their parentBranch names it) and read its files through their base
	// paths. Real Lance refuses too ("Branch a is referenced by [("c", 3)]
	// versions, can not delete"). Kind storage.ErrPreconditionFailed.
	ErrBranchHasChildren = errors.New("Lance branch has child branches")
	// ErrBranchHasTags: tags name a version of the branch. Real Lance
	// refuses too ("Branch d is referenced by tags [("dtag", 3)], can not
	// delete"). Kind storage.ErrPreconditionFailed.
	ErrBranchHasTags = errors.New("Lance branch is referenced by tags")
	// ErrBranchOverlap: the branch's folder tree/<name>/ and another
	// branch's own files cannot be told apart (nested names such as
	// "exp/data", whose folder is branch "exp"'s data folder). Real Lance
	// deletes the other branch's files then (docs/lance.md); retain refuses.
	// Kind storage.ErrPreconditionFailed.
	ErrBranchOverlap = errors.New("Lance branch folders overlap another branch's files")
	// ErrBranchDeleteUnsafe: a name real Lance's own delete mis-resolves:
	// branches.delete("main/x") deletes the whole dataset. retain refuses
	// rather than guess what such a name means to Lance. Kind
	// storage.ErrUnsupported.
	ErrBranchDeleteUnsafe = errors.New("Lance mis-resolves this branch name on delete")
	// ErrBranchChanged: the branch file changed between planning and the
	// delete, and was kept. Kind storage.ErrPreconditionFailed.
	ErrBranchChanged = errors.New("Lance branch file changed since the delete was planned")
)

var branchDeleteKind = map[error]storage.Kind{
	ErrBranchHasChildren:  storage.ErrPreconditionFailed,
	ErrBranchHasTags:      storage.ErrPreconditionFailed,
	ErrBranchOverlap:      storage.ErrPreconditionFailed,
	ErrBranchDeleteUnsafe: storage.ErrUnsupported,
	ErrBranchChanged:      storage.ErrPreconditionFailed,
}

// maxTreeList bounds the listing of one branch's folder.
const maxTreeList = 10_000_000

// BranchDeleteError refuses the delete of one branch of one dataset and
// says every reason found, not only the first. Nothing was deleted.
type BranchDeleteError struct {
	// Dataset is the main dataset's root.
	Dataset string `json:"dataset"`
	Branch  string `json:"branch"`
	// Reasons are the sentinels that apply, in Lance's order: children,
	// tags, then retain's own overlap and name refusals.
	Reasons []error `json:"-"`
	// Children are the branches forked from it, with the version each was
	// forked at.
	Children []BranchRef `json:"children,omitempty"`
	// Tags are the tags naming one of its versions.
	Tags []BranchRef `json:"tags,omitempty"`
	// Overlaps are the branches whose files share folders with it, each
	// with why.
	Overlaps []string `json:"overlaps,omitempty"`
	Msg      string   `json:"message,omitempty"`
}

// BranchRef is a child branch or a tag that keeps a branch, with the
// version of the branch it names.
type BranchRef struct {
	Name    string `json:"name"`
	Version uint64 `json:"version"`
}

func (e *BranchDeleteError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "delete of branch %q", e.Branch)
	if e.Dataset != "" {
		fmt.Fprintf(&b, " of %q", e.Dataset)
	}
	b.WriteString(" refused")
	sep := ": "
	add := func(format string, args ...any) {
		b.WriteString(sep)
		fmt.Fprintf(&b, format, args...)
		sep = "; "
	}
	list := func(what string, rs []BranchRef) string {
		parts := make([]string, len(rs))
		for i, r := range rs {
			parts[i] = fmt.Sprintf("%q (%s v%d)", r.Name, what, r.Version)
		}
		return strings.Join(parts, ", ")
	}
	if len(e.Children) > 0 {
		add("%v: %s read its files: delete them first", ErrBranchHasChildren, list("forked from its", e.Children))
	}
	if len(e.Tags) > 0 {
		add("%v: %s: delete them first", ErrBranchHasTags, list("on its", e.Tags))
	}
	for _, o := range e.Overlaps {
		add("%v: %s", ErrBranchOverlap, o)
	}
	if e.Msg != "" {
		add("%s", e.Msg)
	}
	b.WriteString("; nothing was deleted")
	return b.String()
}

// Unwrap matches every reason and its core kind.
func (e *BranchDeleteError) Unwrap() []error {
	var out []error
	seen := map[storage.Kind]bool{}
	for _, r := range e.Reasons {
		out = append(out, r)
		if k, ok := branchDeleteKind[r]; ok && !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	return out
}

// CheckBranchDeletable refuses, before anything is read, a name that is
// never deleted: "main" (the main branch; *NameError, kind
// storage.ErrInvalidArgument), a name Lance would not accept for a branch
// (*NameError), and a name whose first segment is "main", which real
// Lance's own branches.delete resolves to the main dataset and deletes
// whole (ErrBranchDeleteUnsafe).
func CheckBranchDeletable(name string) error {
	if name == "main" {
		return &NameError{Ref: "branch", Name: name, Rule: "the main branch can never be deleted"}
	}
	if err := ValidateBranchName(name); err != nil {
		return err
	}
	if strings.HasPrefix(name, "main/") {
		return &BranchDeleteError{Branch: name, Reasons: []error{ErrBranchDeleteUnsafe},
			Msg: fmt.Sprintf("%v: real Lance's branches.delete(%q) deletes the whole dataset, not tree/%s/; retain does not delete a branch whose name begins with \"main/\"", ErrBranchDeleteUnsafe, name, name)}
	}
	return nil
}

// lanceOwnedSegment: a folder name Lance uses, or may use, directly under
// a dataset (or branch) root: data/, tree/ and every "_" folder
// (_versions, _deletions, _indices, _transactions, _refs, _mem_wal, ...).
func lanceOwnedSegment(seg string) bool {
	return seg == "data" || seg == treeDir || strings.HasPrefix(seg, "_")
}

// BranchDeletePlan is what deleting one branch of one dataset removes. It
// is made by PlanBranchDelete, which refuses when Lance's rules or
// retain's forbid the delete.
type BranchDeletePlan struct {
	// Dataset is the main dataset's root.
	Dataset string `json:"dataset"`
	Branch  string `json:"branch"`
	// Ref is the branch file as read; nil when there is none: a delete
	// that stopped after removing it, or the leftovers of a branch create
	// Lance refused. Only its folder is left to delete then.
	Ref *Branch `json:"-"`
	// RefKey is the key of the branch file (_refs/branches/<name>.json).
	RefKey string `json:"ref_key"`
	// Tree is the branch's folder, tree/<name>, under the dataset.
	Tree string `json:"tree"`
	// Files are the objects under Tree/ that belong to the branch: every
	// one but those under another branch's folder (Excluded). Manifests
	// come first.
	Files []storage.Info `json:"-"`
	// Excluded are the folders of other branches nested under Tree/,
	// which are kept.
	Excluded []string `json:"excluded,omitempty"`
}

// Bytes is the size of the files.
func (p *BranchDeletePlan) Bytes() int64 {
	var n int64
	for _, f := range p.Files {
		n += f.Size
	}
	return n
}

// PlanBranchDelete decides whether branch name of d (the main dataset) may
// be deleted, and what that removes. It reads the branch files, the tags
// and one listing of tree/<name>/; it writes nothing.
//
// Refusals (*BranchDeleteError), mirroring real Lance 12's branches.delete
// where Lance is right and refusing where Lance is not:
//
//   - child branches (parentBranch = name): ErrBranchHasChildren, as Lance;
//   - tags naming the branch: ErrBranchHasTags, as Lance;
//   - another branch's files in the same folders (ErrBranchOverlap): the
//     branch is nested under a Lance folder of another branch ("exp/data"
//     under "exp"), or another branch is nested under one of its Lance
//     folders ("exp" while "exp/data" exists). Lance deletes the other
//     branch's data in the first case; retain refuses both. A nested
//     branch whose folder is not a Lance folder of this one ("x/y" under
//     "x") is kept: its folder is excluded from the delete (Lance instead
//     keeps all of tree/x/ behind, which then breaks a later create of x);
//   - a malformed branch or tag file (ErrMalformedBranch, ErrMalformedTag):
//     Lance cannot list the refs either, and nothing can be verified. These
//     errors are the *MalformedRefsError of the listing, not a
//     *BranchDeleteError; a dataset where the branch does not exist is
//     ErrBranchNotFound all the same.
//
// The children and tags rules apply even when the branch file is gone:
// a child still reads the folder's files. A branch with neither a branch
// file nor files of its own is ErrBranchNotFound (kind storage.ErrNotFound).
func (d *Dataset) PlanBranchDelete(ctx context.Context, name string) (*BranchDeletePlan, error) {
	if err := CheckBranchDeletable(name); err != nil {
		if be, ok := err.(*BranchDeleteError); ok {
			be.Dataset = d.Root
		}
		return nil, err
	}
	file, err := branchFileName(name)
	if err != nil {
		return nil, err
	}
	bd, err := d.Branch(name)
	if err != nil {
		return nil, err
	}
	plan := &BranchDeletePlan{Dataset: d.Root, Branch: name, RefKey: d.Key(branchesDir + "/" + file), Tree: bd.Root}
	branches, malformed := d.ListBranches(ctx)
	refMalformed := false
	if malformed != nil {
		var me *MalformedRefsError
		if !errors.As(malformed, &me) {
			return nil, malformed
		}
		for _, k := range me.Keys() {
			refMalformed = refMalformed || k == plan.RefKey
		}
	}
	refusal := &BranchDeleteError{Dataset: d.Root, Branch: name}
	var nested []string
	insideAncestor := false
	for i, b := range branches {
		switch {
		case b.Name == name:
			plan.Ref = &branches[i]
		case strings.HasPrefix(b.Name, name+"/"):
			// Its folder is tree/<b>/, inside ours: kept either way.
			nested = append(nested, d.Key(treeDir+"/"+b.Name)+"/")
			seg, _, _ := strings.Cut(strings.TrimPrefix(b.Name, name+"/"), "/")
			if lanceOwnedSegment(seg) {
				refusal.Overlaps = append(refusal.Overlaps, fmt.Sprintf(
					"branch %q lives in tree/%s/, inside this branch's own %s/ folder, so their files cannot be told apart: retain deletes neither (real Lance keeps all of tree/%s/ behind)",
					b.Name, b.Name, seg, name))
			}
		case strings.HasPrefix(name, b.Name+"/"):
			seg, _, _ := strings.Cut(strings.TrimPrefix(name, b.Name+"/"), "/")
			if lanceOwnedSegment(seg) {
				insideAncestor = true
				refusal.Overlaps = append(refusal.Overlaps, fmt.Sprintf(
					"this branch lives in tree/%s/, inside branch %q's own %s/ folder, so their files cannot be told apart: real Lance's delete removes %q's files too (docs/lance.md); retain refuses",
					name, b.Name, seg, b.Name))
			}
		}
		if b.ParentBranch == name {
			refusal.Children = append(refusal.Children, BranchRef{Name: b.Name, Version: b.ParentVersion})
		}
	}
	plan.Excluded = nested
	objs, err := d.Store.List(ctx, plan.Tree+"/", maxTreeList)
	if err != nil {
		return nil, err
	}
	for _, o := range objs {
		if underAny(nested, o.Key) {
			continue
		}
		plan.Files = append(plan.Files, o)
	}
	if plan.Ref == nil && !refMalformed && (len(plan.Files) == 0 || insideAncestor) {
		// No branch file, and nothing under the folder that is the
		// branch's own (inside a Lance folder of an ancestor every object
		// is the ancestor's).
		return nil, &RefError{Op: "delete-branch", Key: plan.RefKey, Err: ErrBranchNotFound,
			Msg: fmt.Sprintf("no branch %q (no branch file and no files of its own under %s/)", name, plan.Tree), Cause: storage.ErrNotFound}
	}
	if malformed != nil {
		// Children and nesting cannot be verified (Lance's own listing
		// fails too): fail closed.
		return nil, malformed
	}
	tags, err := d.ListTags(ctx)
	if err != nil {
		return nil, err // malformed tag files included: fail closed
	}
	for _, t := range tags {
		if t.Branch == name {
			refusal.Tags = append(refusal.Tags, BranchRef{Name: t.Name, Version: t.Version})
		}
	}
	if len(refusal.Children) > 0 {
		refusal.Reasons = append(refusal.Reasons, ErrBranchHasChildren)
	}
	if len(refusal.Tags) > 0 {
		refusal.Reasons = append(refusal.Reasons, ErrBranchHasTags)
	}
	if len(refusal.Overlaps) > 0 {
		refusal.Reasons = append(refusal.Reasons, ErrBranchOverlap)
	}
	if len(refusal.Reasons) > 0 {
		return nil, refusal
	}
	// Manifests first: a folder whose manifests are gone is no dataset any
	// more, so a delete that stops half way never leaves a version that
	// opens but cannot be read (Lance opens tree/<name>/ by name even
	// without a branch file).
	versions := plan.Tree + "/" + versionsDir + "/"
	sort.SliceStable(plan.Files, func(i, j int) bool {
		return strings.HasPrefix(plan.Files[i].Key, versions) && !strings.HasPrefix(plan.Files[j].Key, versions)
	})
	return plan, nil
}

// underAny: key lies under one of the folder prefixes.
func underAny(prefixes []string, key string) bool {
	for _, r := range prefixes {
		if strings.HasPrefix(key, r) {
			return true
		}
	}
	return false
}

// DeleteBranchRef removes the plan's branch file: the step that makes the
// branch disappear for Lance and for retain. Where the store can
// delete-if-version it deletes exactly the file that was planned (a file
// rewritten since is kept: ErrBranchChanged); a file already gone is fine.
// Without a branch file in the plan it does nothing.
//
// Order: the branch file goes first, the folder after (DeleteBranchTree).
// A crash in between leaves an orphaned folder nothing lists — bytes
// leaked until the delete is run again, never a branch that is listed but
// cannot be opened. The other order would leave a branch file naming a
// half-deleted folder: Lance lists it and fails to open it, and every
// cleanup of the dataset refuses on it. Real Lance 12 uses the same order.
func (d *Dataset) DeleteBranchRef(ctx context.Context, plan *BranchDeletePlan) (bool, error) {
	if plan.Ref == nil {
		return false, nil
	}
	opts := storage.DeleteOptions{}
	if d.Store.Require(storage.FeatureDeleteIfVersion, storage.ScopeProcess) == nil {
		opts.IfVersion = plan.Ref.Info.Version
	}
	err := d.Store.Delete(ctx, plan.RefKey, opts)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, storage.ErrNotFound):
		return false, nil // deleted meanwhile: the outcome is the one wanted
	case errors.Is(err, storage.ErrPreconditionFailed):
		return false, &RefError{Op: "delete-branch", Key: plan.RefKey, Err: ErrBranchChanged,
			Msg: "the branch file was rewritten since it was read and was kept: plan the delete again", Cause: err}
	}
	return false, err
}

// BranchTreeResult is what DeleteBranchTree removed.
type BranchTreeResult struct {
	FilesDeleted int            `json:"files_deleted"`
	BytesDeleted int64          `json:"bytes_deleted"`
	Failed       []FailedDelete `json:"failed,omitempty"`
}

// DeleteBranchTree deletes the plan's files, manifests first, then the
// rest. Run it only after DeleteBranchRef: until then the folder is a
// listed branch. What fails to delete is unreferenced and reported; a
// later PlanBranchDelete of the same name finds it (the branch file being
// gone) and finishes.
func (d *Dataset) DeleteBranchTree(ctx context.Context, plan *BranchDeletePlan) (*BranchTreeResult, error) {
	res := &BranchTreeResult{}
	versions := plan.Tree + "/" + versionsDir + "/"
	split := 0
	for split < len(plan.Files) && strings.HasPrefix(plan.Files[split].Key, versions) {
		split++
	}
	for _, group := range [][]storage.Info{plan.Files[:split], plan.Files[split:]} {
		if len(group) == 0 {
			continue
		}
		keys := make([]string, len(group))
		for i, f := range group {
			keys[i] = f.Key
		}
		out, err := d.Store.DeleteMany(ctx, keys)
		for i, o := range out {
			switch {
			case o.Err != nil && !errors.Is(o.Err, storage.ErrNotFound):
				res.Failed = append(res.Failed, FailedDelete{Key: o.Key, Err: o.Err.Error()})
			case o.Err == nil && err == nil:
				res.FilesDeleted++
				res.BytesDeleted += group[i].Size
			}
		}
		if err != nil {
			return res, fmt.Errorf("deleting the folder %s/ of branch %q: %w; the branch file is gone, so nothing references what is left: delete the branch again to finish", plan.Tree, plan.Branch, err)
		}
		if len(res.Failed) > 0 {
			// Keep the rest while manifests remain: never a folder with
			// manifests and missing data.
			return res, fmt.Errorf("deleting the folder %s/ of branch %q: %d object(s) could not be deleted (first %q: %s); nothing references them: delete the branch again to finish",
				plan.Tree, plan.Branch, len(res.Failed), res.Failed[0].Key, res.Failed[0].Err)
		}
	}
	return res, nil
}
