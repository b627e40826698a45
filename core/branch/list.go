package branch

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/retain-dev/retain/core/lance"
	"github.com/retain-dev/retain/core/refs/lifecycle"
	"github.com/retain-dev/retain/core/refs/refmeta"
)

// LineageStep is one fork in a branch's ancestry: the branch was (or
// an ancestor was) forked from Branch ("main" for main) at Version.
type LineageStep struct {
	Branch  string `json:"branch"`
	Version uint64 `json:"version"`
	// Missing: no branch file of that name was listed (its own ancestry
	// is unknown).
	Missing bool `json:"missing,omitempty"`
}

// Info is one branch as `retain branch list` shows it.
type Info struct {
	Name string `json:"name"`
	// State is the lifecycle state; "invalid" when Problem says why it
	// cannot be read.
	State     lifecycle.State  `json:"state"`
	Lifecycle lifecycle.Record `json:"lifecycle"`
	// Metadata is the user metadata: the file's metadata without the
	// reserved keys, which Lifecycle shows.
	Metadata      map[string]string `json:"metadata"`
	ParentBranch  string            `json:"parent_branch"` // "main" for main
	ParentVersion uint64            `json:"parent_version"`
	// CreatedAt is the file's createAt (Lance writes Unix seconds).
	CreatedAt time.Time `json:"created_at"`
	// Expires is the branch's expiry (`branch create --expires`), when it
	// has one that parses; the daemon deletes it after that.
	Expires *time.Time `json:"expires,omitempty"`
	// Lineage is the parent chain, oldest first: main at the version the
	// first ancestor was forked from, ..., the parent at ParentVersion.
	Lineage []LineageStep `json:"lineage"`
	// Key is the branch file's key.
	Key     string `json:"key"`
	Problem string `json:"problem,omitempty"`
	// Lance is the branch as read (its Info carries the version token a
	// lifecycle transition compares against).
	Lance lance.Branch `json:"-"`
}

// Visible reports whether a default listing shows the branch: ready only.
func (b Info) Visible() bool { return b.State == lifecycle.Ready }

// ListOptions select what List returns.
type ListOptions struct {
	// Filter keeps the branches whose metadata carries every pair. Reserved
	// keys may be filtered on (an unmanaged branch matches
	// retain.state=ready).
	Filter refmeta.Filter
	// All lists creating, deleting and invalid branches too.
	All bool
}

// Listing is what List found.
type Listing struct {
	// Branches are those selected, by name.
	Branches []Info `json:"branches"`
	// Hidden counts the branches matching the filter that are not ready
	// and were left out (always 0 with All).
	Hidden int `json:"hidden"`
	// Total is the number of branch files read.
	Total int `json:"total"`
}

// List lists the branches of ds (a main dataset) with their
// lifecycle, user metadata and lineage. It reads only the branch files —
// one listing of _refs/branches/ and one read per file — never a manifest
// or data file, whatever the filter. Malformed branch files are left out
// and returned as the *lance.MalformedRefsError next to the listing.
func List(ctx context.Context, ds *lance.Dataset, o ListOptions) (*Listing, error) {
	all, listErr := ds.ListBranches(ctx)
	var malformed *lance.MalformedRefsError
	if listErr != nil && !errors.As(listErr, &malformed) {
		return nil, listErr
	}
	infos := branchInfos(all)
	out := &Listing{Branches: []Info{}, Total: len(all)}
	for _, b := range infos {
		if !o.Filter.Match(branchMatchMeta(b.Lance.Metadata, b.Lifecycle)) {
			continue
		}
		if !o.All && !b.Visible() {
			out.Hidden++
			continue
		}
		out.Branches = append(out.Branches, b)
	}
	return out, listErr
}

// branchInfos describes every branch of one listing, in its order.
func branchInfos(all []lance.Branch) []Info {
	byName := make(map[string]*lance.Branch, len(all))
	for i := range all {
		byName[all[i].Name] = &all[i]
	}
	out := make([]Info, len(all))
	for i, b := range all {
		out[i] = branchInfo(b, byName)
	}
	return out
}

func branchInfo(b lance.Branch, byName map[string]*lance.Branch) Info {
	info := Info{
		Name: b.Name, Metadata: refmeta.User(b.Metadata), ParentBranch: mainName(b.ParentBranch),
		ParentVersion: b.ParentVersion, CreatedAt: b.CreatedAt, Key: b.Info.Key, Lance: b,
	}
	l, err := lifecycle.Parse(b.Metadata)
	if err != nil {
		info.State, info.Problem = lifecycle.Invalid, err.Error()
		l = lifecycle.Record{State: lifecycle.Invalid, Managed: true}
	} else {
		info.State = l.State
	}
	info.Lifecycle = l
	if at, ok, err := refmeta.Expiry(b.Metadata); ok && err == nil {
		info.Expires = &at
	} else if err != nil && info.Problem == "" {
		info.Problem = err.Error() + " (never deleted by expiry)"
	}
	info.Lineage = branchLineage(b, byName)
	return info
}

// branchLineage walks the parent chain of b through the listed branches.
func branchLineage(b lance.Branch, byName map[string]*lance.Branch) []LineageStep {
	var rev []LineageStep
	seen := map[string]bool{b.Name: true}
	cur := b
	for {
		step := LineageStep{Branch: mainName(cur.ParentBranch), Version: cur.ParentVersion}
		if cur.ParentBranch == "" {
			rev = append(rev, step)
			break
		}
		p, ok := byName[cur.ParentBranch]
		if !ok || seen[cur.ParentBranch] {
			step.Missing = true
			rev = append(rev, step)
			break
		}
		rev = append(rev, step)
		seen[cur.ParentBranch] = true
		cur = *p
	}
	out := make([]LineageStep, len(rev))
	for i, s := range rev {
		out[len(rev)-1-i] = s
	}
	return out
}

// Detail is one branch as `retain branch show` shows it.
type Detail struct {
	Info
	// Children are the branches forked from it, with the version of it
	// each was forked at.
	Children []lance.BranchRef `json:"children"`
	// Head is its newest version; nil with HeadError when it cannot be
	// listed.
	Head      *uint64 `json:"head"`
	HeadError string  `json:"head_error,omitempty"`
	// Identifier is Lance's own identifier.version_mapping (one
	// [version, id] per fork of its ancestry), when the file has it.
	Identifier []lance.BranchFork `json:"identifier,omitempty"`
}

// Show describes branch name of ds whatever its state: the branch
// files (for lineage and children) and one listing of its _versions/ for
// its head. A missing branch is lance.ErrBranchNotFound; its own
// malformed file lance.ErrMalformedBranch. Other malformed branch files
// are returned as the *lance.MalformedRefsError next to the detail.
func Show(ctx context.Context, ds *lance.Dataset, name string) (*Detail, error) {
	if err := lance.ValidateBranchName(name); err != nil {
		return nil, err
	}
	all, listErr := ds.ListBranches(ctx)
	var malformed *lance.MalformedRefsError
	if listErr != nil && !errors.As(listErr, &malformed) {
		return nil, listErr
	}
	if !slices.ContainsFunc(all, func(b lance.Branch) bool { return b.Name == name }) {
		// Not listed: missing, or its own file is malformed (ReadBranch
		// says which, typed), or created since the listing.
		b, err := ds.ReadBranch(ctx, name)
		if err != nil {
			return nil, err
		}
		all = append(all, b)
	}
	var d *Detail
	var children []lance.BranchRef
	for _, b := range branchInfos(all) {
		if b.Name == name {
			d = &Detail{Info: b, Identifier: b.Lance.Lineage}
		}
		if b.Lance.ParentBranch == name {
			children = append(children, lance.BranchRef{Name: b.Name, Version: b.ParentVersion})
		}
	}
	sort.Slice(children, func(i, j int) bool { return children[i].Name < children[j].Name })
	d.Children = children
	if d.Children == nil {
		d.Children = []lance.BranchRef{}
	}
	if v, err := ds.BranchHead(ctx, name); err != nil {
		d.HeadError = err.Error()
	} else {
		d.Head = &v.N
	}
	return d, listErr
}

// branchMatchMeta is the map a --filter matches: the file's metadata, with
// the implicit state of an unmanaged branch (retain.state=ready).
func branchMatchMeta(meta map[string]string, l lifecycle.Record) map[string]string {
	if l.Managed {
		return meta
	}
	m := maps.Clone(meta)
	if m == nil {
		m = map[string]string{}
	}
	m[lifecycle.StateKey] = string(lifecycle.Ready)
	return m
}
