package lance

// Classifying what a family's listing holds, against what kept versions need.

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/retain-dev/retain/core/storage"
)

func (pl *planner) removedReason(w window, ts time.Time) string {
	var why []string
	if !w.olderThan.IsZero() {
		why = append(why, "committed "+ts.UTC().Format(time.RFC3339Nano)+", before the cut-off")
	}
	if w.keepLast > 0 {
		why = append(why, "not among the last "+strconv.Itoa(w.keepLast))
	}
	return "removed: " + strings.Join(why, " and ") + w.suffix() + "; not the latest, tagged, a fork point or an extra root"
}

// managedDirs are the folders of a dataset Lance's cleanup manages.
var managedDirs = []string{versionsDir, "_transactions", "_deletions", "_indices", "data"}

// classify says whether key, under member root, is a file cleanup may
// delete, of which kind, and under which key a removed version's
// reference to it is recorded. tmp marks an unfinished manifest.
func classify(root, key string) (kind FileKind, refKey string, tmp, ok bool) {
	rel, found := strings.CutPrefix(key, root+"/")
	if root == "" {
		rel, found = key, true
	}
	if !found {
		return 0, "", false, false
	}
	dir, rest, _ := strings.Cut(rel, "/")
	if rest == "" {
		return 0, "", false, false
	}
	switch dir {
	case versionsDir:
		// Committed manifests are decided per version; .tmp files are
		// Lance's unfinished commits.
		if !strings.Contains(rest, "/") && strings.HasPrefix(rest, ".tmp") {
			return KindManifest, key, true, true
		}
	case "_transactions":
		if strings.HasSuffix(rest, ".txn") {
			return KindTransaction, key, false, true
		}
	case "_deletions":
		if strings.HasSuffix(rest, ".arrow") || strings.HasSuffix(rest, ".bin") {
			return KindDeletion, key, false, true
		}
	case "_indices":
		// Indices are referenced by their folder, _indices/<uuid>/.
		if uuid, _, nested := strings.Cut(rest, "/"); nested && uuid != "" {
			return KindIndex, key[:len(key)-len(rest)] + uuid + "/", false, true
		}
	case "data":
		switch {
		case strings.HasSuffix(rest, ".lance"):
			return KindData, key, false, true
		case strings.HasSuffix(rest, ".blob") && strings.Count(rest, "/") == 1:
			// A blob v2 sidecar lives as long as data/<stem>.lance.
			stem, _, _ := strings.Cut(rest, "/")
			return KindData, key[:len(key)-len(rest)] + stem + ".lance", false, true
		}
	}
	return 0, "", false, false
}

// sweep lists m's managed folders, page by page, and adds every object to
// delete to the plan.
func (pl *planner) sweep(ctx context.Context, m *member) error {
	removedManifest := map[string]bool{}
	for _, v := range pl.plan.Versions {
		if v.Branch == m.branch && !v.Keep {
			removedManifest[v.Key] = true
		}
	}
	for _, dir := range managedDirs {
		prefix := m.ds.Key(dir) + "/"
		pl.listed = append(pl.listed, prefix)
		if dir == "_transactions" && m.txns != nil {
			for _, o := range m.txns {
				pl.consider(m, o, removedManifest)
			}
			continue
		}
		if dir == versionsDir && m.versionObjs != nil {
			for _, o := range m.versionObjs {
				pl.consider(m, o, removedManifest)
			}
			continue
		}
		if err := pl.listDir(ctx, m, dir, func(o storage.Info) { pl.consider(m, o, removedManifest) }); err != nil {
			return pl.refuse(prefix, "listing "+branchName(m.branch)+"'s files", err)
		}
	}
	return nil
}

func (pl *planner) consider(m *member, o storage.Info, removedManifest map[string]bool) {
	pl.seen(o)
	for _, n := range m.nested {
		// Another branch's folders: its objects all lie in subfolders of
		// its root, while files directly in it are this member's (branch
		// "a/data" has its root in a's data/ folder, and a's data files
		// lie right there).
		if rest, ok := strings.CutPrefix(o.Key, n); ok && strings.Contains(rest, "/") {
			return
		}
	}
	if pl.kept.Contains(o.Key) {
		pl.plan.Totals.ReferencedFiles++
		pl.plan.Totals.ReferencedBytes += o.Size
		return
	}
	if removedManifest[o.Key] {
		return // listed with its version in finish
	}
	kind, refKey, tmp, ok := classify(m.ds.Root, o.Key)
	if !ok {
		return // not Lance's to collect, or a committed manifest: never
	}
	f := PlannedFile{Key: o.Key, Size: o.Size, Kind: kind, ModTime: o.ModTime}
	r := pl.removed[refKey]
	if r == nil && kind == KindIndex {
		r = pl.removed[o.Key]
	}
	switch {
	case r != nil && !tmp:
		f.Verified = true
		rr := *r
		f.RemovedBy = &rr
		f.Reason = fmt.Sprintf("referenced only by removed versions (%d: %s … %s)", r.Count, r.First, r.Last)
		if r.Count == 1 {
			f.Reason = "referenced only by removed version " + r.First.String()
		}
	case pl.window >= 0 && (o.ModTime.IsZero() || !o.ModTime.Before(pl.now.Add(-pl.window))):
		// Maybe a commit in flight; a store that reports no time keeps.
		pl.plan.Totals.YoungFiles++
		pl.plan.Totals.YoungBytes += o.Size
		return
	default:
		what := "referenced by no version"
		if tmp {
			what = "an unfinished manifest (.tmp)"
		}
		if pl.window < 0 {
			f.Reason = what + " (no safety window)"
		} else {
			f.Reason = fmt.Sprintf("%s, last modified %s, older than the %s safety window", what,
				o.ModTime.UTC().Format(time.RFC3339), pl.window)
		}
	}
	pl.plan.Files = append(pl.plan.Files, f)
}

// needFiles records the files kept version id (manifest key) references
// that the listings must show. Transaction files are not required: Lance's
// own cleanup deletes a kept fork point's, and no read needs them. Index
// folders are required through the files the manifest lists in them (an
// index may live in the manifest alone); files outside the family
// (Outside) cannot be listed and are never deleted.
func (pl *planner) needFiles(key string, id VersionID, files []FileRef) error {
	for _, f := range files {
		if f.Outside || f.Prefix || f.Kind == KindTransaction {
			continue
		}
		kf := pl.need[f.Key]
		if kf == nil {
			kf = &keptFile{size: f.Size, first: id, listed: -1}
			pl.need[f.Key] = kf
		}
		kf.n++
		switch {
		case f.Size <= 0:
		case kf.size <= 0:
			kf.size = f.Size
		case kf.size != f.Size:
			return pl.refuse(key, fmt.Sprintf("%s records %q with %d bytes, %s with %d: the manifests disagree about a file a kept version needs",
				id, f.Key, f.Size, kf.first, kf.size), ErrCorruptManifest)
		}
	}
	return nil
}

// seen records what the listing shows of the files kept versions need:
// the object itself, or objects under its key as under a folder (a folder
// where a file should be).
func (pl *planner) seen(o storage.Info) {
	if kf := pl.need[o.Key]; kf != nil {
		kf.listed = o.Size
		return
	}
	for i := strings.LastIndexByte(o.Key, '/'); i > 0; i = strings.LastIndexByte(o.Key[:i], '/') {
		if kf := pl.need[o.Key[:i]]; kf != nil {
			kf.folder = true
			return
		}
	}
}

// checkKept refuses the dataset when a file a kept version needs is not in
// the listings sweep made, or not with its recorded size: that version is
// already broken, and what the plan takes for unreferenced may be the file
// it really needs (a manifest naming a data file with one character
// changed would have the real file deleted). It reads nothing: the
// listings are the ones the sweep made. A needed file outside every listed
// folder is not checked (cleanup deletes nothing there); the plan notes it.
func (pl *planner) checkKept() error {
	var broken, unlisted []string
	for k, kf := range pl.need {
		switch {
		case kf.folder && kf.listed < 0, kf.listed >= 0 && kf.size > 0 && kf.listed != kf.size:
			broken = append(broken, k)
		case kf.listed >= 0:
		case pl.underListed(k):
			broken = append(broken, k)
		default:
			unlisted = append(unlisted, k)
		}
	}
	if len(unlisted) > 0 {
		sort.Strings(unlisted)
		pl.note("%d file(s) kept versions reference lie outside the folders cleanup lists (first %q) and were not checked; cleanup deletes nothing there", len(unlisted), unlisted[0])
	}
	if len(broken) == 0 {
		pl.need = nil
		return nil
	}
	sort.Strings(broken)
	k := broken[0]
	kf := pl.need[k]
	e := &KeptFileError{Key: k, Version: kf.first, Referencing: kf.n, Recorded: kf.size, Listed: kf.listed, Folder: kf.folder, More: len(broken) - 1}
	if e.Recorded <= 0 {
		e.Recorded = -1
	}
	for _, v := range pl.plan.Versions {
		if v.Branch == kf.first.Branch && v.Version == kf.first.Version {
			e.Reasons = v.Reasons
		}
	}
	return &CleanupError{Dataset: pl.d.Root, Key: k, Err: ErrKeptVersionBroken, Cause: e}
}

func (pl *planner) underListed(key string) bool {
	for _, p := range pl.listed {
		if strings.HasPrefix(key, p) {
			return true
		}
	}
	return false
}

// finish puts the removed manifests first and sums up.
func (pl *planner) finish() {
	var manifests []PlannedFile
	for _, v := range pl.plan.Versions {
		if v.Keep {
			pl.plan.Totals.VersionsKept++
			continue
		}
		pl.plan.Totals.VersionsRemoved++
		id := VersionID{v.Branch, v.Version}
		manifests = append(manifests, PlannedFile{Key: v.Key, Size: v.Size, Kind: KindManifest, Verified: true,
			Reason: "manifest of removed version " + id.String(), RemovedBy: &RemovedRefs{Count: 1, First: id, Last: id}})
	}
	others := pl.plan.Files
	sort.Slice(others, func(i, j int) bool { return others[i].Key < others[j].Key })
	pl.plan.Files = append(manifests, others...)
	pl.plan.Totals.ManifestsToDelete = len(manifests)
	pl.plan.Totals.FilesToDelete = len(pl.plan.Files)
	for _, f := range pl.plan.Files {
		pl.plan.Totals.BytesToDelete += f.Size
	}
	pl.removed = nil
}
