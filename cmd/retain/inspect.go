package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/retain-dev/retain/core"
	"github.com/retain-dev/retain/core/lance"
)

const inspectLong = `Shows what a Lance dataset holds, read-only: every version of main and of
each branch (grouped) with its commit time, manifest size, the tags and
branches that point at it and the bytes it references; the tags; and a
summary. With --version V (and --branch B for a branch) it lists the files of
that one version instead.

The table URI is a store URI whose location is the dataset itself:
/data/db/t.lance, file:///data/db/t.lance, s3://bucket/db/t.lance,
gs://bucket/db/t.lance, az://container/db/t.lance (with the options each
backend takes, e.g. ?endpoint=...). A dataset is a folder with _versions/.

Nothing unreadable stops the listing: malformed tag or branch files,
unreadable manifests and failed listings are reported under "problems" with
their key and reason, everything else is still shown, and the exit status is
1. Warnings (a tag naming a version that does not exist, files a version
references that are not in the folder, tree/ folders no branch file names,
a recorded manifest size that differs from the manifest's) do not change
the exit status. Exit status: 0 everything was readable, 1 something was
not (or the URI is not a dataset), 2 the command line or URI is malformed.

Bytes a version references are the sizes its manifest records; where it
records none (deletion and transaction files, index folders) the size found
by one listing of the dataset folder is used, and a file whose size is known
from neither counts as unknown. Above 500000 objects the listing stops:
sizes then come from the manifests alone and the folder total is not given.

--json prints one object:
  uri, adapter          the table URI as given; the adapter that served it
  naming                "v1" or "v2": main's manifest naming scheme
  branches[]            main first, then branches by name (only the one
                        selected with --branch); each:
    name                "main" or the branch name
    root                key prefix of its dataset: "" or "tree/<name>"
    ref_key             its _refs/branches/ file (absent for main)
    parent              {branch, version} it was forked from (absent for main)
    created_at          from the branch file (absent for main)
    head                its newest version, null if none could be listed
    versions[]          oldest first (only V with --version); each:
      version, time     number; commit time (RFC 3339, UTC; null if unreadable)
      manifest_key      key of the manifest, relative to the dataset
      manifest_size     bytes of the manifest object
      head              the newest version of its branch
      tags[]            names of tags pointing at it
      forked_by[]       branches whose fork point it is
      fork_of           {branch, version} when it is its branch's fork point
      files             number of files (and index folders) it references,
                        its manifest included
      bytes             sum of the sizes of those files
      unknown_sizes     how many of them have no known size (not in bytes)
      missing           how many are not in the folder (listing done only)
      error             why its manifest could not be read (absent if fine)
  tags[]                every tag, by name: name, branch ("main" or a branch),
                        version, manifest_size (recorded), key, created_at,
                        dangling (its version does not exist)
  files[]               only with --version: key (relative to the dataset, a
                        URI when outside), kind (manifest, data, overlay,
                        deletion, index, transaction, external), size (null
                        if unknown), folder (an index folder, referenced
                        whole), owner (the branch whose folder holds it,
                        "" when outside), inherited (owned by a parent
                        branch), outside (not in this dataset family; never
                        deleted by retain), missing (not in the folder)
  summary               absent with --version: versions, unreadable_versions,
                        tags, branches, latest {branch, version, files, bytes,
                        unknown_sizes} (main's head, or the --branch head),
                        referenced_files, referenced_bytes,
                        referenced_unknown_sizes (union over every version
                        shown), folder {objects, bytes} (null if not listed)
  problems[]            {what, key, reason}: what is tag, branch, tags,
                        branches, versions, manifest or listing
  warnings[]            {what, key, reason}`

// Reports of `retain inspect --json`; the fields are documented in
// inspectLong and are part of the CLI's contract.
type inspectReport struct {
	URI      string          `json:"uri"`
	Adapter  string          `json:"adapter"`
	Naming   string          `json:"naming,omitempty"`
	Branches []*branchReport `json:"branches"`
	Tags     []tagReport     `json:"tags"`
	Files    []fileReport    `json:"files,omitempty"`
	Summary  *inspectSummary `json:"summary,omitempty"`
	Problems []inspectIssue  `json:"problems"`
	Warnings []inspectIssue  `json:"warnings"`
}

type versionRef struct {
	Branch  string `json:"branch"`
	Version uint64 `json:"version"`
}

type branchReport struct {
	Name      string           `json:"name"`
	Root      string           `json:"root"`
	RefKey    string           `json:"ref_key,omitempty"`
	Parent    *versionRef      `json:"parent,omitempty"`
	CreatedAt *time.Time       `json:"created_at,omitempty"`
	Head      *uint64          `json:"head"`
	Versions  []*versionReport `json:"versions"`

	ds      *lance.Dataset
	listed  []lance.Version // every version, also when only one is shown
	ok      bool            // listed without error
	listErr error
}

type versionReport struct {
	Version      uint64      `json:"version"`
	Time         *time.Time  `json:"time"`
	ManifestKey  string      `json:"manifest_key"`
	ManifestSize int64       `json:"manifest_size"`
	Head         bool        `json:"head"`
	Tags         []string    `json:"tags"`
	ForkedBy     []string    `json:"forked_by"`
	ForkOf       *versionRef `json:"fork_of,omitempty"`
	Files        int         `json:"files"`
	Bytes        int64       `json:"bytes"`
	UnknownSizes int         `json:"unknown_sizes"`
	Missing      int         `json:"missing"`
	Error        string      `json:"error,omitempty"`

	v lance.Version
}

type tagReport struct {
	Name         string     `json:"name"`
	Branch       string     `json:"branch"`
	Version      uint64     `json:"version"`
	ManifestSize uint64     `json:"manifest_size"`
	Key          string     `json:"key"`
	CreatedAt    *time.Time `json:"created_at,omitempty"`
	Dangling     bool       `json:"dangling"`
}

type fileReport struct {
	Key       string `json:"key"`
	Kind      string `json:"kind"`
	Size      *int64 `json:"size"`
	Folder    bool   `json:"folder"`
	Owner     string `json:"owner"`
	Inherited bool   `json:"inherited"`
	Outside   bool   `json:"outside"`
	Missing   bool   `json:"missing"`
}

type inspectSummary struct {
	Versions               int            `json:"versions"`
	UnreadableVersions     int            `json:"unreadable_versions"`
	Tags                   int            `json:"tags"`
	Branches               int            `json:"branches"`
	Latest                 *latestSummary `json:"latest"`
	ReferencedFiles        int            `json:"referenced_files"`
	ReferencedBytes        int64          `json:"referenced_bytes"`
	ReferencedUnknownSizes int            `json:"referenced_unknown_sizes"`
	Folder                 *folderSummary `json:"folder"`
}

type latestSummary struct {
	Branch       string `json:"branch"`
	Version      uint64 `json:"version"`
	Files        int    `json:"files"`
	Bytes        int64  `json:"bytes"`
	UnknownSizes int    `json:"unknown_sizes"`
}

type folderSummary struct {
	Objects int   `json:"objects"`
	Bytes   int64 `json:"bytes"`
}

type inspectIssue struct {
	What   string `json:"what"`
	Key    string `json:"key"`
	Reason string `json:"reason"`
}

// maxInspectObjects bounds the listing of the dataset folder.
const maxInspectObjects = 500_000

// manifestReaders is how many manifests are read at once.
const manifestReaders = 8

type inspectOptions struct {
	version    uint64
	hasVersion bool
	branch     string
	hasBranch  bool
}

func (a *app) inspectCmd() *cobra.Command {
	var o inspectOptions
	cmd := &cobra.Command{
		Use:   "inspect TABLE-URI [--version V] [--branch B]",
		Short: "Show a Lance dataset's versions, tags, branches and the bytes each version references",
		Long:  inspectLong,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.hasVersion = cmd.Flags().Changed("version")
			o.hasBranch = cmd.Flags().Changed("branch")
			return a.inspect(cmd.Context(), args[0], o)
		},
	}
	cmd.Flags().Uint64Var(&o.version, "version", 0, "list the files of this version")
	cmd.Flags().StringVar(&o.branch, "branch", "", "only this branch (\"main\" for main); with --version, the branch the version is on")
	return cmd
}

// errUnreadable: inspect printed everything it could, but some metadata
// could not be read (exit 1).
var errUnreadable = errors.New("some of the dataset could not be read")

func (a *app) inspect(ctx context.Context, uri string, o inspectOptions) error {
	loc, err := core.ParseLocation(uri)
	if err != nil {
		return err
	}
	if o.branch == "main" {
		o.branch = ""
	}
	if o.branch != "" {
		if err := lance.ValidateBranchName(o.branch); err != nil {
			return usageError{fmt.Errorf("--branch: %w", err)}
		}
	}
	// A local path is checked before the store is opened, for a clearer
	// message about a mistyped path. The store is opened read-only: inspect
	// writes nothing, not even the adapter's own folder or probe objects.
	if loc.Scheme == "file" {
		if err := checkLocalDataset(uri, loc.Path); err != nil {
			return err
		}
	}
	// a.open, not openStoreReadOnly: the URI is a table, not a store.
	s, _, err := a.open(ctx, uri, true)
	if err != nil {
		return err
	}
	defer s.Close()
	ds, err := lance.Open(s, "")
	if err != nil {
		return err
	}
	in := &inspector{ds: ds, opts: o, rep: &inspectReport{URI: uri, Adapter: s.Adapter(),
		Branches: []*branchReport{}, Tags: []tagReport{}, Problems: []inspectIssue{}, Warnings: []inspectIssue{}}}
	if err := in.run(ctx); err != nil {
		if errors.Is(err, lance.ErrNotDataset) {
			found := strings.TrimPrefix(err.Error(), lance.ErrNotDataset.Error()+": ")
			return notDataset(uri, found, remoteTables(ctx, s))
		}
		return err
	}
	if a.jsonOut {
		if err := a.printJSON(in.rep); err != nil {
			return err
		}
	} else {
		in.printText(a.stdout)
	}
	if n := len(in.rep.Problems); n > 0 {
		keys := make([]string, n)
		for i, p := range in.rep.Problems {
			keys[i] = p.Key
		}
		return fmt.Errorf("%w: %d problem(s), see the listing: %s", errUnreadable, n, strings.Join(keys, ", "))
	}
	return nil
}

// notDataset is the error for a table URI that is not a Lance dataset.
func notDataset(uri, found string, tables []string) error {
	msg := fmt.Sprintf("%s is not a Lance dataset: expected a folder with _versions/ holding its manifests (a LanceDB table is <db>/<table>.lance/); %s", showURI(uri), found)
	if len(tables) > 0 {
		more := ""
		if len(tables) > 5 {
			more = fmt.Sprintf(" and %d more", len(tables)-5)
			tables = tables[:5]
		}
		msg += fmt.Sprintf(". It holds tables: %s%s — inspect one of them, e.g. %s", strings.Join(tables, ", "), more, childURI(uri, tables[0]))
	}
	return notDatasetError{msg}
}

// notDatasetError matches lance.ErrNotDataset; its message names the URI.
type notDatasetError struct{ msg string }

func (e notDatasetError) Error() string { return e.msg }
func (e notDatasetError) Unwrap() error { return lance.ErrNotDataset }

// childURI appends name to a table URI's path, keeping its query.
func childURI(uri, name string) string {
	base, query, _ := strings.Cut(uri, "?")
	out := strings.TrimRight(base, "/") + "/" + name
	if query != "" {
		out += "?" + query
	}
	return out
}

// checkLocalDataset refuses a local path that is not a dataset folder
// without touching it.
func checkLocalDataset(uri, dir string) error {
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return notDataset(uri, "it does not exist", nil)
	case err != nil:
		// Not the *PathError itself: it would repeat the path in full.
		return fmt.Errorf("cannot read %s: %w", showURI(uri), errors.Unwrap(err))
	case !st.IsDir():
		return notDataset(uri, "it is a file, not a folder", nil)
	}
	if st, err := os.Stat(filepath.Join(dir, "_versions")); err == nil && st.IsDir() {
		return nil
	}
	var tables []string
	if ents, err := os.ReadDir(dir); err == nil {
		for _, e := range ents {
			if e.IsDir() && strings.HasSuffix(e.Name(), ".lance") {
				tables = append(tables, e.Name())
			}
		}
	}
	return notDataset(uri, "it has no _versions/ folder", tables)
}

// remoteTables names the *.lance folders at the top of a store, from one
// bounded listing page, to suggest what to inspect instead.
func remoteTables(ctx context.Context, s *core.Store) []string {
	page, err := s.ListPage(ctx, core.ListOptions{PageSize: 1000})
	if err != nil {
		return nil
	}
	seen := map[string]bool{}
	var out []string
	for _, o := range page.Objects {
		if first, _, ok := strings.Cut(o.Key, "/"); ok && strings.HasSuffix(first, ".lance") && !seen[first] {
			seen[first] = true
			out = append(out, first)
		}
	}
	return out
}

type inspector struct {
	ds   *lance.Dataset
	opts inspectOptions
	rep  *inspectReport

	objs     []core.Info // the dataset folder, sorted; nil when not listed
	complete bool        // objs is the whole folder

	tags     []lance.Tag
	branches []lance.Branch
	groups   []*branchReport // main first, then every readable branch
	union    map[string]int64
	mu       sync.Mutex
}

func (in *inspector) problem(what, key string, err error) {
	in.rep.Problems = append(in.rep.Problems, inspectIssue{What: what, Key: key, Reason: reason(err, key)})
}

func (in *inspector) warn(what, key, format string, args ...any) {
	in.rep.Warnings = append(in.rep.Warnings, inspectIssue{What: what, Key: key, Reason: fmt.Sprintf(format, args...)})
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
	var m *lance.MalformedRefsError
	if errors.As(err, &m) {
		for _, f := range m.Files {
			in.rep.Problems = append(in.rep.Problems, inspectIssue{What: f.Ref, Key: f.Key, Reason: f.Reason})
		}
		return
	}
	in.problem(what, dir, err)
}

func (in *inspector) run(ctx context.Context) error {
	main := &branchReport{Name: "main", Root: "", ds: in.ds, Versions: []*versionReport{}}
	vs, err := in.ds.Versions(ctx)
	switch {
	case errors.Is(err, lance.ErrNotDataset):
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
		g := &branchReport{Name: b.Name, Root: bds.Root, RefKey: b.Info.Key, ds: bds, Versions: []*versionReport{},
			Parent: &versionRef{Branch: branchName(b.ParentBranch), Version: b.ParentVersion}}
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
	if in.opts.branch != "" && !known[in.opts.branch] {
		// No readable branch file: show the branch's folder if it has one.
		bds, err := in.ds.Branch(in.opts.branch)
		if err != nil {
			return usageError{err}
		}
		vs, err := bds.Versions(ctx)
		if err != nil {
			var names []string
			for _, b := range in.branches {
				names = append(names, b.Name)
			}
			return fmt.Errorf("%w: no branch %q: no readable _refs/branches/ file names it and %s/_versions/ holds no manifests (branches: %s)",
				core.ErrNotFound, in.opts.branch, bds.Root, orNone(names))
		}
		in.warn("branch", bds.Root+"/", "branch %q has manifests but no readable _refs/branches/ file", in.opts.branch)
		in.groups = append(in.groups, &branchReport{Name: in.opts.branch, Root: bds.Root, ds: bds, listed: vs, ok: true, Versions: []*versionReport{}})
	}

	shown := in.selected()
	if in.opts.hasVersion {
		g := shown[0]
		if !g.ok {
			return fmt.Errorf("the versions of %s could not be listed: %w", branchLabel(g.Name), g.listErr)
		}
		var hit *lance.Version
		for i := range g.listed {
			if g.listed[i].N == in.opts.version {
				hit = &g.listed[i]
			}
		}
		if hit == nil {
			return fmt.Errorf("%w: %s has no version %d (versions: %s)",
				core.ErrNotFound, branchLabel(g.Name), in.opts.version, versionList(g.listed))
		}
		vr := in.newVersion(*hit)
		g.Versions = append(g.Versions, vr)
		in.rep.Files = []fileReport{}
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
	if !in.opts.hasVersion {
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
func (in *inspector) selected() []*branchReport {
	if !in.opts.hasBranch && !in.opts.hasVersion {
		return in.groups
	}
	for _, g := range in.groups {
		if g.Name == in.opts.branch || (in.opts.branch == "" && g.Name == "main") {
			return []*branchReport{g}
		}
	}
	return nil // unreachable: run adds the selected branch
}

// list lists the dataset folder once, bounded, for sizes the manifests do
// not record, missing files and the folder's total.
func (in *inspector) list(ctx context.Context) {
	var objs []core.Info
	opts := core.ListOptions{}
	for {
		page, err := in.ds.Store.ListPage(ctx, opts)
		if err != nil {
			in.problem("listing", "", fmt.Errorf("listing the dataset folder: %w", err))
			return
		}
		for _, o := range page.Objects {
			objs = append(objs, core.Info{Key: o.Key, Size: o.Size})
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
func (in *inspector) under(prefix string) []core.Info {
	i := sort.Search(len(in.objs), func(i int) bool { return in.objs[i].Key >= prefix })
	j := i
	for j < len(in.objs) && strings.HasPrefix(in.objs[j].Key, prefix) {
		j++
	}
	return in.objs[i:j]
}

// sizeOf returns a non-folder ref's size (-1 unknown) and whether it is
// known to be missing from the folder.
func (in *inspector) sizeOf(r lance.FileRef) (int64, bool) {
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
func (in *inspector) sized(m *lance.Manifest) (map[string]int64, int) {
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

func (in *inspector) newVersion(v lance.Version) *versionReport {
	return &versionReport{Version: v.N, ManifestKey: v.Key, ManifestSize: v.Info.Size, Tags: []string{}, ForkedBy: []string{}, v: v}
}

// fill sets what the manifest says about its version.
func (in *inspector) fill(vr *versionReport, m *lance.Manifest) {
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
func (in *inspector) readManifests(ctx context.Context, groups []*branchReport) {
	type job struct {
		g  *branchReport
		vr *versionReport
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
func (in *inspector) files(g *branchReport, m *lance.Manifest) []fileReport {
	out := []fileReport{}
	for _, r := range m.Files() {
		f := fileReport{Key: r.Key, Kind: r.Kind.String(), Folder: r.Prefix, Outside: r.Outside}
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

func branchName(b string) string {
	if b == "" {
		return "main"
	}
	return b
}

func branchLabel(name string) string {
	if name == "main" {
		return "main"
	}
	return "branch " + strconv.Quote(name)
}

func versionList(vs []lance.Version) string {
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
	byName := map[string]*branchReport{}
	exists := map[at]lance.Version{}
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
	shown := map[at]*versionReport{}
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
		tr := tagReport{Name: t.Name, Branch: branchName(t.Branch), Version: t.Version, ManifestSize: t.ManifestSize, Key: t.Info.Key}
		if !t.CreatedAt.IsZero() {
			ca := t.CreatedAt
			tr.CreatedAt = &ca
		}
		k := at{tr.Branch, t.Version}
		switch g := byName[tr.Branch]; {
		case g == nil:
			in.warn("tag", t.Info.Key, "tag %q names %s, which has no readable branch file", t.Name, branchLabel(tr.Branch))
		case !g.ok:
			// Its versions could not be listed: a problem already says so.
		default:
			if v, ok := exists[k]; !ok {
				tr.Dangling = true
				in.warn("tag", t.Info.Key, "tag %q names %s version %d, which does not exist", t.Name, branchLabel(tr.Branch), t.Version)
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
				in.warn("branch", g.RefKey, "branch %q was forked from %s version %d, which does not exist", g.Name, branchLabel(g.Parent.Branch), g.Parent.Version)
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
				in.warn("manifest", vr.ManifestKey, "%s version %d references %d file(s) that are not in the dataset folder", branchLabel(g.Name), vr.Version, vr.Missing)
			}
		}
	}
}

func (in *inspector) summarize(shown []*branchReport) {
	s := &inspectSummary{Tags: len(in.tags), Branches: len(in.branches)}
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
		s.Latest = &latestSummary{Branch: g.Name, Version: vr.Version, Files: vr.Files, Bytes: vr.Bytes, UnknownSizes: vr.UnknownSizes}
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
		s.Folder = &folderSummary{Objects: len(in.objs)}
		for _, o := range in.objs {
			s.Folder.Bytes += o.Size
		}
	}
	in.rep.Summary = s
}

// Text output.

func (in *inspector) printText(w io.Writer) {
	r := in.rep
	naming := ""
	if r.Naming != "" {
		naming = ", " + strings.ToUpper(r.Naming) + " manifest names"
	}
	fmt.Fprintf(w, "Lance dataset %s (%s%s)\n", r.URI, r.Adapter, naming)
	if r.Files != nil {
		in.printVersionFiles(w)
	} else {
		for _, g := range r.Branches {
			fmt.Fprintln(w)
			printGroup(w, g)
		}
		if len(r.Tags) > 0 {
			fmt.Fprintf(w, "\ntags (%d):\n", len(r.Tags))
			tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
			for _, t := range r.Tags {
				note := ""
				if t.Dangling {
					note = "\tDANGLING: no such version"
				}
				fmt.Fprintf(tw, "  %s\t%s v%d\t%s%s\n", t.Name, t.Branch, t.Version, t.Key, note)
			}
			tw.Flush()
		}
	}
	if len(r.Problems) > 0 {
		fmt.Fprintf(w, "\nPROBLEMS (%d): could not be read; everything else is shown above\n", len(r.Problems))
		for _, p := range r.Problems {
			fmt.Fprintf(w, "  %s %s: %s\n", problemLabel(p.What), orDash(p.Key), p.Reason)
		}
	}
	if len(r.Warnings) > 0 {
		fmt.Fprintf(w, "\nwarnings (%d):\n", len(r.Warnings))
		for _, p := range r.Warnings {
			fmt.Fprintf(w, "  %s %s: %s\n", p.What, orDash(p.Key), p.Reason)
		}
	}
	if s := r.Summary; s != nil {
		fmt.Fprintln(w)
		var per []string
		for _, g := range r.Branches {
			per = append(per, fmt.Sprintf("%s %d", g.Name, len(g.Versions)))
		}
		unreadable := ""
		if s.UnreadableVersions > 0 {
			unreadable = fmt.Sprintf(", %d unreadable", s.UnreadableVersions)
		}
		fmt.Fprintf(w, "%d versions (%s%s), %d tags, %d branches\n", s.Versions, strings.Join(per, ", "), unreadable, s.Tags, s.Branches)
		if l := s.Latest; l != nil {
			fmt.Fprintf(w, "latest: %s v%d references %d files, %s%s\n", l.Branch, l.Version, l.Files, humanBytes(l.Bytes), unknownNote(l.UnknownSizes))
		}
		fmt.Fprintf(w, "all versions shown reference %d files, %s%s\n", s.ReferencedFiles, humanBytes(s.ReferencedBytes), unknownNote(s.ReferencedUnknownSizes))
		if f := s.Folder; f != nil {
			fmt.Fprintf(w, "dataset folder: %d objects, %s\n", f.Objects, humanBytes(f.Bytes))
		} else {
			fmt.Fprintln(w, "dataset folder: not listed")
		}
	}
}

func problemLabel(what string) string {
	switch what {
	case "tag", "branch":
		return "malformed " + what + " file"
	case "tags", "branches":
		return what
	case "manifest":
		return "unreadable manifest"
	case "versions":
		return "versions not listed"
	case "listing":
		return "listing failed"
	}
	return what
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func printGroup(w io.Writer, g *branchReport) {
	head := "no versions"
	if g.Head != nil {
		head = fmt.Sprintf("head v%d", *g.Head)
	}
	if g.Parent == nil {
		fmt.Fprintf(w, "%s: %d versions, %s\n", g.Name, len(g.Versions), head)
	} else {
		fmt.Fprintf(w, "branch %s: forked from %s v%d, %d versions, %s (%s)\n", g.Name, g.Parent.Branch, g.Parent.Version, len(g.Versions), head, orDash(g.RefKey))
	}
	if len(g.Versions) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  VERSION\tTIME (UTC)\tMANIFEST\tFILES\tBYTES\tPOINTED AT BY")
	for _, vr := range g.Versions {
		fmt.Fprintf(tw, "  %d\t%s\t%d\t%s\t%s\t%s\n", vr.Version, fmtTime(vr.Time), vr.ManifestSize, filesCell(vr), bytesCell(vr), pointers(g, vr))
	}
	tw.Flush()
}

func fmtTime(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format("2006-01-02T15:04:05.000Z")
}

func filesCell(vr *versionReport) string {
	if vr.Error != "" {
		return "-"
	}
	return strconv.Itoa(vr.Files)
}

func bytesCell(vr *versionReport) string {
	if vr.Error != "" {
		return "-"
	}
	s := strconv.FormatInt(vr.Bytes, 10)
	var notes []string
	if vr.UnknownSizes > 0 {
		notes = append(notes, fmt.Sprintf("+%d unknown", vr.UnknownSizes))
	}
	if vr.Missing > 0 {
		notes = append(notes, fmt.Sprintf("%d missing", vr.Missing))
	}
	if len(notes) > 0 {
		s += " (" + strings.Join(notes, ", ") + ")"
	}
	return s
}

func pointers(g *branchReport, vr *versionReport) string {
	var p []string
	if vr.Error != "" {
		p = append(p, "UNREADABLE MANIFEST")
	}
	if vr.Head {
		p = append(p, "head of "+g.Name)
	}
	if vr.ForkOf != nil {
		p = append(p, fmt.Sprintf("fork of %s v%d", vr.ForkOf.Branch, vr.ForkOf.Version))
	}
	for _, t := range vr.Tags {
		p = append(p, "tag "+t)
	}
	for _, b := range vr.ForkedBy {
		p = append(p, "fork point of branch "+b)
	}
	return strings.Join(p, "; ")
}

func (in *inspector) printVersionFiles(w io.Writer) {
	g := in.rep.Branches[0]
	vr := g.Versions[0]
	fmt.Fprintf(w, "\n%s v%d: %s, manifest %s (%d bytes)", branchLabel(g.Name), vr.Version, fmtTime(vr.Time), vr.ManifestKey, vr.ManifestSize)
	if p := pointers(g, vr); p != "" {
		fmt.Fprintf(w, "; %s", p)
	}
	fmt.Fprintln(w)
	if vr.Error != "" {
		return
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  KEY\tKIND\tSIZE\tFROM")
	for _, f := range in.rep.Files {
		size := "?"
		if f.Size != nil {
			size = strconv.FormatInt(*f.Size, 10)
		}
		kind := f.Kind
		if f.Folder {
			kind += " (folder)"
		}
		from := "own"
		switch {
		case f.Outside:
			from = "OUTSIDE the dataset family (never deleted)"
		case f.Inherited:
			from = "inherited from " + f.Owner
		}
		if f.Missing {
			from += "; MISSING from the folder"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", f.Key, kind, size, from)
	}
	tw.Flush()
	fmt.Fprintf(w, "%d files, %s%s", vr.Files, humanBytes(vr.Bytes), unknownNote(vr.UnknownSizes))
	if vr.Missing > 0 {
		fmt.Fprintf(w, ", %d missing", vr.Missing)
	}
	fmt.Fprintln(w)
}

func unknownNote(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" + %d of unknown size", n)
}

// humanBytes renders n as "512 bytes" or "3.1 KiB (3172 bytes)".
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d bytes", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 5; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB (%d bytes)", float64(n)/float64(div), "KMGTPE"[exp], n)
}
