package lance

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/retain-dev/retain/core/storage"
)

// InspectOptions narrows an inspection. With HasVersion it lists the files
// of Version of Branch; with HasBranch it shows only Branch ("" or "main"
// is main).
type InspectOptions struct {
	Version    uint64
	HasVersion bool
	Branch     string
	HasBranch  bool
}

// Inspection is what a dataset holds: its versions grouped by branch, its
// tags, and what could not be read. The JSON field names are the contract
// of `retain inspect --json` (documented there).
type Inspection struct {
	Naming   string             `json:"naming,omitempty"`
	Branches []*InspectedBranch `json:"branches"`
	Tags     []InspectedTag     `json:"tags"`
	Files    []InspectedFile    `json:"files,omitempty"`
	Summary  *InspectSummary    `json:"summary,omitempty"`
	Problems []InspectIssue     `json:"problems"`
	Warnings []InspectIssue     `json:"warnings"`
}

// Inspect reads what ds holds, read-only. Nothing unreadable stops it:
// malformed tag or branch files, unreadable manifests and failed listings
// become Problems, and everything else is still reported. It fails only
// when ds is not a dataset (ErrNotDataset), when the selected branch or
// version does not exist (storage.ErrNotFound), or when the selected version's
// branch could not be listed. ds must be the dataset at its store's root
// (Open(s, "")): the sizes of the files it references come from one
// listing of the whole store.
func Inspect(ctx context.Context, ds *Dataset, opts InspectOptions) (*Inspection, error) {
	if ds.Root != "" {
		return nil, fmt.Errorf("%w: inspect needs the dataset at its store's root, not %q below it: open the store at the dataset's own URI", storage.ErrInvalidArgument, ds.Root)
	}
	if opts.Branch == "main" {
		opts.Branch = ""
	}
	in := &inspector{ds: ds, opts: opts, rep: &Inspection{Branches: []*InspectedBranch{},
		Tags: []InspectedTag{}, Problems: []InspectIssue{}, Warnings: []InspectIssue{}}}
	if err := in.run(ctx); err != nil {
		return nil, err
	}
	return in.rep, nil
}

// VersionRef is a version of a branch ("main" for main).
type VersionRef struct {
	Branch  string `json:"branch"`
	Version uint64 `json:"version"`
}

// InspectedBranch is main or one branch, with the versions shown.
type InspectedBranch struct {
	Name      string              `json:"name"`
	Root      string              `json:"root"`
	RefKey    string              `json:"ref_key,omitempty"`
	Parent    *VersionRef         `json:"parent,omitempty"`
	CreatedAt *time.Time          `json:"created_at,omitempty"`
	Head      *uint64             `json:"head"`
	Versions  []*InspectedVersion `json:"versions"`

	ds      *Dataset
	listed  []Version // every version, also when only one is shown
	ok      bool      // listed without error
	listErr error
}

// InspectedVersion is one version: its manifest and what it references.
type InspectedVersion struct {
	Version      uint64      `json:"version"`
	Time         *time.Time  `json:"time"`
	ManifestKey  string      `json:"manifest_key"`
	ManifestSize int64       `json:"manifest_size"`
	Head         bool        `json:"head"`
	Tags         []string    `json:"tags"`
	ForkedBy     []string    `json:"forked_by"`
	ForkOf       *VersionRef `json:"fork_of,omitempty"`
	Files        int         `json:"files"`
	Bytes        int64       `json:"bytes"`
	UnknownSizes int         `json:"unknown_sizes"`
	Missing      int         `json:"missing"`
	Error        string      `json:"error,omitempty"`

	v Version
}

// InspectedTag is one tag file.
type InspectedTag struct {
	Name         string     `json:"name"`
	Branch       string     `json:"branch"`
	Version      uint64     `json:"version"`
	ManifestSize uint64     `json:"manifest_size"`
	Key          string     `json:"key"`
	CreatedAt    *time.Time `json:"created_at,omitempty"`
	Dangling     bool       `json:"dangling"`
}

// InspectedFile is one file a version references (InspectOptions.HasVersion).
type InspectedFile struct {
	Key       string `json:"key"`
	Kind      string `json:"kind"`
	Size      *int64 `json:"size"`
	Folder    bool   `json:"folder"`
	Owner     string `json:"owner"`
	Inherited bool   `json:"inherited"`
	Outside   bool   `json:"outside"`
	Missing   bool   `json:"missing"`
}

// InspectSummary totals the versions shown (absent with HasVersion).
type InspectSummary struct {
	Versions               int            `json:"versions"`
	UnreadableVersions     int            `json:"unreadable_versions"`
	Tags                   int            `json:"tags"`
	Branches               int            `json:"branches"`
	Latest                 *InspectLatest `json:"latest"`
	ReferencedFiles        int            `json:"referenced_files"`
	ReferencedBytes        int64          `json:"referenced_bytes"`
	ReferencedUnknownSizes int            `json:"referenced_unknown_sizes"`
	Folder                 *InspectFolder `json:"folder"`
}

// InspectLatest is the newest version shown of the first branch shown.
type InspectLatest struct {
	Branch       string `json:"branch"`
	Version      uint64 `json:"version"`
	Files        int    `json:"files"`
	Bytes        int64  `json:"bytes"`
	UnknownSizes int    `json:"unknown_sizes"`
}

// InspectFolder is the listed dataset folder's total.
type InspectFolder struct {
	Objects int   `json:"objects"`
	Bytes   int64 `json:"bytes"`
}

// InspectIssue is a problem (unreadable) or a warning (inconsistent).
type InspectIssue struct {
	What   string `json:"what"`
	Key    string `json:"key"`
	Reason string `json:"reason"`
}

// maxInspectObjects bounds the listing of the dataset folder.
const maxInspectObjects = 500_000

// manifestReaders is how many manifests are read at once.
const manifestReaders = 8

type inspector struct {
	ds   *Dataset
	opts InspectOptions
	rep  *Inspection

	objs     []storage.Info // the dataset folder, sorted; nil when not listed
	complete bool           // objs is the whole folder

	tags     []Tag
	branches []Branch
	groups   []*InspectedBranch // main first, then every readable branch
	union    map[string]int64
	mu       sync.Mutex
}

func (in *inspector) problem(what, key string, err error) {
	in.rep.Problems = append(in.rep.Problems, InspectIssue{What: what, Key: key, Reason: reason(err, key)})
}

func (in *inspector) warn(what, key, format string, args ...any) {
	in.rep.Warnings = append(in.rep.Warnings, InspectIssue{What: what, Key: key, Reason: fmt.Sprintf(format, args...)})
}

// reason is err's message without a leading copy of key.
func reason(err error, key string) string {
	s := err.Error()
	if key != "" {
		s = strings.TrimPrefix(s, key+": ")
	}
	return s
}

// malformed records each file of a *MalformedRefsError as a problem, and
// any other error under what.
func (in *inspector) malformed(what, dir string, err error) {
	var m *MalformedRefsError
	if errors.As(err, &m) {
		for _, f := range m.Files {
			in.rep.Problems = append(in.rep.Problems, InspectIssue{What: f.Ref, Key: f.Key, Reason: f.Reason})
		}
		return
	}
	in.problem(what, dir, err)
}

func (in *inspector) run(ctx context.Context) error {
	main := &InspectedBranch{Name: "main", Root: "", ds: in.ds, Versions: []*InspectedVersion{}}
	vs, err := in.ds.Versions(ctx)
	switch {
	case errors.Is(err, ErrNotDataset):
		return err
	case err != nil:
		main.listErr = err
		in.problem("versions", "_versions/", err)
	default:
		main.listed, main.ok = vs, true
		in.rep.Naming = vs[0].Naming.String()
	}
	in.groups = append(in.groups, main)
	in.list(ctx)

	in.tags, err = in.ds.ListTags(ctx)
	if err != nil {
		in.malformed("tags", "_refs/tags/", err)
	}
	in.branches, err = in.ds.ListBranches(ctx)
	if err != nil {
		in.malformed("branches", "_refs/branches/", err)
	}
	known := map[string]bool{}
	for _, b := range in.branches {
		known[b.Name] = true
		bds, err := in.ds.Branch(b.Name)
		if err != nil {
			in.problem("branch", b.Info.Key, err)
			continue
		}
		ca := b.CreatedAt
		g := &InspectedBranch{Name: b.Name, Root: bds.Root, RefKey: b.Info.Key, ds: bds, Versions: []*InspectedVersion{},
			Parent: &VersionRef{Branch: branchName(b.ParentBranch), Version: b.ParentVersion}}
		if !ca.IsZero() {
			g.CreatedAt = &ca
		}
		in.groups = append(in.groups, g)
		vs, err := bds.Versions(ctx)
		if err != nil {
			g.listErr = err
			in.problem("versions", bds.Key("_versions/"), err)
			continue
		}
		g.listed, g.ok = vs, true
	}
	if in.opts.Branch != "" && !known[in.opts.Branch] {
		// No readable branch file: show the branch's folder if it has one.
		bds, err := in.ds.Branch(in.opts.Branch)
		if err != nil {
			return err
		}
		vs, err := bds.Versions(ctx)
		if err != nil {
			var names []string
			for _, b := range in.branches {
				names = append(names, b.Name)
			}
			return fmt.Errorf("%w: no branch %q: no readable _refs/branches/ file names it and %s/_versions/ holds no manifests (branches: %s)",
				storage.ErrNotFound, in.opts.Branch, bds.Root, orNone(names))
		}
		in.warn("branch", bds.Root+"/", "branch %q has manifests but no readable _refs/branches/ file", in.opts.Branch)
		in.groups = append(in.groups, &InspectedBranch{Name: in.opts.Branch, Root: bds.Root, ds: bds, listed: vs, ok: true, Versions: []*InspectedVersion{}})
	}

	shown := in.selected()
	if in.opts.HasVersion {
		g := shown[0]
		if !g.ok {
			return fmt.Errorf("the versions of %s could not be listed: %w", inspectLabel(g.Name), g.listErr)
		}
		var hit *Version
		for i := range g.listed {
			if g.listed[i].N == in.opts.Version {
				hit = &g.listed[i]
			}
		}
		if hit == nil {
			return fmt.Errorf("%w: %s has no version %d (versions: %s)",
				storage.ErrNotFound, inspectLabel(g.Name), in.opts.Version, versionList(g.listed))
		}
		vr := in.newVersion(*hit)
		g.Versions = append(g.Versions, vr)
		in.rep.Files = []InspectedFile{}
		m, err := g.ds.ReadManifest(ctx, *hit)
		if err != nil {
			vr.Error = reason(err, hit.Key)
			in.problem("manifest", hit.Key, err)
		} else {
			in.fill(vr, m)
			in.rep.Files = in.files(g, m)
		}
	} else {
		in.union = map[string]int64{}
		for _, g := range shown {
			for _, v := range g.listed {
				g.Versions = append(g.Versions, in.newVersion(v))
			}
		}
		in.readManifests(ctx, shown)
	}
	in.rep.Branches = shown
	in.annotate()
	if !in.opts.HasVersion {
		in.summarize(shown)
	}
	return nil
}

func orNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// selected returns the groups to show.
func (in *inspector) selected() []*InspectedBranch {
	if !in.opts.HasBranch && !in.opts.HasVersion {
		return in.groups
	}
	for _, g := range in.groups {
		if g.Name == in.opts.Branch || (in.opts.Branch == "" && g.Name == "main") {
			return []*InspectedBranch{g}
		}
	}
	return nil // unreachable: run adds the selected branch
}

// list lists the dataset folder once, bounded, for sizes the manifests do
// not record, missing files and the folder's total.
func (in *inspector) list(ctx context.Context) {
	var objs []storage.Info
	opts := storage.ListOptions{}
	for {
		page, err := in.ds.Store.ListPage(ctx, opts)
		if err != nil {
			in.problem("listing", "", fmt.Errorf("listing the dataset folder: %w", err))
			return
		}
		for _, o := range page.Objects {
			objs = append(objs, storage.Info{Key: o.Key, Size: o.Size})
		}
		if len(objs) > maxInspectObjects {
			in.warn("listing", "", "more than %d objects: the folder's total is not computed, and sizes come from the manifests only", maxInspectObjects)
			return
		}
		if !page.More || len(page.Objects) == 0 {
			break
		}
		opts.StartAfter = page.Objects[len(page.Objects)-1].Key
	}
	in.objs, in.complete = objs, true
}

// lookup returns the listed size of key.
func (in *inspector) lookup(key string) (int64, bool) {
	i := sort.Search(len(in.objs), func(i int) bool { return in.objs[i].Key >= key })
	if i < len(in.objs) && in.objs[i].Key == key {
		return in.objs[i].Size, true
	}
	return 0, false
}

// under returns the listed objects under prefix.
func (in *inspector) under(prefix string) []storage.Info {
	i := sort.Search(len(in.objs), func(i int) bool { return in.objs[i].Key >= prefix })
	j := i
	for j < len(in.objs) && strings.HasPrefix(in.objs[j].Key, prefix) {
		j++
	}
	return in.objs[i:j]
}

// sizeOf returns a non-folder ref's size (-1 unknown) and whether it is
// known to be missing from the folder.
func (in *inspector) sizeOf(r FileRef) (int64, bool) {
	if r.Outside {
		return r.Size, false
	}
	listed, ok := in.lookup(r.Key)
	missing := in.complete && !ok
	switch {
	case r.Size >= 0:
		return r.Size, missing
	case ok:
		return listed, false
	}
	return -1, missing
}

// sized maps every object m references to its size (-1 unknown); an index
// folder stands for its listed objects, so a folder and the files its
// manifest lists are counted once. It also returns the missing count.
func (in *inspector) sized(m *Manifest) (map[string]int64, int) {
	refs := m.Files()
	out := make(map[string]int64, len(refs))
	add := func(k string, n int64) {
		if old, ok := out[k]; !ok || old < 0 {
			out[k] = n
		}
	}
	missing := 0
	var folders []string
	for _, r := range refs {
		if r.Prefix && !r.Outside {
			folders = append(folders, r.Key)
			if !in.complete {
				continue
			}
			objs := in.under(r.Key)
			if len(objs) == 0 {
				missing++
			}
			for _, o := range objs {
				add(o.Key, o.Size)
			}
			continue
		}
		if r.Prefix {
			add(r.Key, -1)
			continue
		}
		n, miss := in.sizeOf(r)
		if miss {
			missing++
		}
		add(r.Key, n)
	}
	if !in.complete {
		// Unlisted folders: their files the manifest names are all that is
		// known; a folder with none is one unknown size.
		for _, f := range folders {
			covered := false
			for k := range out {
				if strings.HasPrefix(k, f) {
					covered = true
					break
				}
			}
			if !covered {
				add(f, -1)
			}
		}
	}
	return out, missing
}

func (in *inspector) newVersion(v Version) *InspectedVersion {
	return &InspectedVersion{Version: v.N, ManifestKey: v.Key, ManifestSize: v.Info.Size, Tags: []string{}, ForkedBy: []string{}, v: v}
}

// fill sets what the manifest says about its version.
func (in *inspector) fill(vr *InspectedVersion, m *Manifest) {
	ts := m.Timestamp
	vr.Time = &ts
	vr.Files = len(m.Files())
	sizes, missing := in.sized(m)
	vr.Missing = missing
	for _, n := range sizes {
		if n < 0 {
			vr.UnknownSizes++
		} else {
			vr.Bytes += n
		}
	}
	if in.union != nil {
		in.mu.Lock()
		for k, n := range sizes {
			if old, ok := in.union[k]; !ok || old < 0 {
				in.union[k] = n
			}
		}
		in.mu.Unlock()
	}
}

// readManifests reads every listed version's manifest, a few at a time.
func (in *inspector) readManifests(ctx context.Context, groups []*InspectedBranch) {
	type job struct {
		g  *InspectedBranch
		vr *InspectedVersion
	}
	jobs := make(chan job)
	var wg sync.WaitGroup
	var pmu sync.Mutex
	for range manifestReaders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				m, err := j.g.ds.ReadManifest(ctx, j.vr.v)
				if err != nil {
					j.vr.Error = reason(err, j.vr.v.Key)
					pmu.Lock()
					in.problem("manifest", j.vr.v.Key, err)
					pmu.Unlock()
					continue
				}
				in.fill(j.vr, m)
			}
		}()
	}
	for _, g := range groups {
		for _, vr := range g.Versions {
			jobs <- job{g, vr}
		}
	}
	close(jobs)
	wg.Wait()
	sort.SliceStable(in.rep.Problems, func(i, j int) bool { return in.rep.Problems[i].Key < in.rep.Problems[j].Key })
}

// files lists the files of one version for --version.
func (in *inspector) files(g *InspectedBranch, m *Manifest) []InspectedFile {
	out := []InspectedFile{}
	for _, r := range m.Files() {
		f := InspectedFile{Key: r.Key, Kind: r.Kind.String(), Folder: r.Prefix, Outside: r.Outside}
		if !r.Outside {
			f.Owner = ownerName(r.Owner)
			f.Inherited = r.Owner != g.Root
		}
		var n int64 = -1
		switch {
		case r.Prefix && !r.Outside && in.complete:
			objs := in.under(r.Key)
			f.Missing = len(objs) == 0
			n = 0
			for _, o := range objs {
				n += o.Size
			}
		case r.Prefix:
		default:
			n, f.Missing = in.sizeOf(r)
		}
		if n >= 0 {
			f.Size = &n
		}
		out = append(out, f)
	}
	return out
}

// ownerName is the branch whose dataset root is key.
func ownerName(root string) string {
	if name, ok := strings.CutPrefix(root, "tree/"); ok {
		return name
	}
	return "main"
}

func inspectLabel(name string) string {
	if name == "main" {
		return "main"
	}
	return "branch " + strconv.Quote(name)
}

func versionList(vs []Version) string {
	var parts []string
	for i, v := range vs {
		if i == 20 {
			parts = append(parts, fmt.Sprintf("… %d more", len(vs)-20))
			break
		}
		parts = append(parts, strconv.FormatUint(v.N, 10))
	}
	return strings.Join(parts, ", ")
}

// annotate marks heads, tags, fork points, and what points nowhere.
func (in *inspector) annotate() {
	type at struct {
		branch string
		n      uint64
	}
	byName := map[string]*InspectedBranch{}
	exists := map[at]Version{}
	for _, g := range in.groups {
		byName[g.Name] = g
		for _, v := range g.listed {
			exists[at{g.Name, v.N}] = v
		}
		if len(g.listed) > 0 {
			h := g.listed[len(g.listed)-1].N
			g.Head = &h
		}
	}
	shown := map[at]*InspectedVersion{}
	for _, g := range in.rep.Branches {
		for _, vr := range g.Versions {
			shown[at{g.Name, vr.Version}] = vr
			vr.Head = g.Head != nil && *g.Head == vr.Version
			if g.Parent != nil && g.listed[0].N == vr.Version {
				p := *g.Parent
				vr.ForkOf = &p
			}
		}
	}
	for _, t := range in.tags {
		tr := InspectedTag{Name: t.Name, Branch: branchName(t.Branch), Version: t.Version, ManifestSize: t.ManifestSize, Key: t.Info.Key}
		if !t.CreatedAt.IsZero() {
			ca := t.CreatedAt
			tr.CreatedAt = &ca
		}
		k := at{tr.Branch, t.Version}
		switch g := byName[tr.Branch]; {
		case g == nil:
			in.warn("tag", t.Info.Key, "tag %q names %s, which has no readable branch file", t.Name, inspectLabel(tr.Branch))
		case !g.ok:
			// Its versions could not be listed: a problem already says so.
		default:
			if v, ok := exists[k]; !ok {
				tr.Dangling = true
				in.warn("tag", t.Info.Key, "tag %q names %s version %d, which does not exist", t.Name, inspectLabel(tr.Branch), t.Version)
			} else if int64(t.ManifestSize) != v.Info.Size {
				in.warn("tag", t.Info.Key, "tag %q records a manifest of %d bytes, but %s is %d bytes", t.Name, t.ManifestSize, v.Key, v.Info.Size)
			}
		}
		if vr := shown[k]; vr != nil {
			vr.Tags = append(vr.Tags, t.Name)
		}
		in.rep.Tags = append(in.rep.Tags, tr)
	}
	for _, g := range in.groups {
		if g.Parent == nil {
			continue
		}
		k := at{g.Parent.Branch, g.Parent.Version}
		if vr := shown[k]; vr != nil {
			vr.ForkedBy = append(vr.ForkedBy, g.Name)
		}
		if p := byName[g.Parent.Branch]; p != nil && p.ok {
			if _, ok := exists[k]; !ok {
				in.warn("branch", g.RefKey, "branch %q was forked from %s version %d, which does not exist", g.Name, inspectLabel(g.Parent.Branch), g.Parent.Version)
			}
		}
	}
	// tree/<name>/_versions/ folders no readable branch file names.
	if in.complete {
		orphans := map[string]bool{}
		for _, o := range in.under("tree/") {
			rest := strings.TrimPrefix(o.Key, "tree/")
			if i := strings.Index(rest, "/_versions/"); i > 0 && strings.HasSuffix(o.Key, ".manifest") {
				if name := rest[:i]; byName[name] == nil && !orphans[name] {
					orphans[name] = true
					in.warn("branch", "tree/"+name+"/", "holds manifests but no readable _refs/branches/ file names branch %q (left by a failed branch create or delete?)", name)
				}
			}
		}
	}
	// Missing files, one warning per version.
	for _, g := range in.rep.Branches {
		for _, vr := range g.Versions {
			if vr.Missing > 0 {
				in.warn("manifest", vr.ManifestKey, "%s version %d references %d file(s) that are not in the dataset folder", inspectLabel(g.Name), vr.Version, vr.Missing)
			}
		}
	}
}

func (in *inspector) summarize(shown []*InspectedBranch) {
	s := &InspectSummary{Tags: len(in.tags), Branches: len(in.branches)}
	for _, g := range shown {
		for _, vr := range g.Versions {
			s.Versions++
			if vr.Error != "" {
				s.UnreadableVersions++
			}
		}
	}
	if g := shown[0]; len(g.Versions) > 0 {
		vr := g.Versions[len(g.Versions)-1]
		s.Latest = &InspectLatest{Branch: g.Name, Version: vr.Version, Files: vr.Files, Bytes: vr.Bytes, UnknownSizes: vr.UnknownSizes}
	}
	for _, n := range in.union {
		s.ReferencedFiles++
		if n < 0 {
			s.ReferencedUnknownSizes++
		} else {
			s.ReferencedBytes += n
		}
	}
	if in.complete {
		s.Folder = &InspectFolder{Objects: len(in.objs)}
		for _, o := range in.objs {
			s.Folder.Bytes += o.Size
		}
	}
	in.rep.Summary = s
}
