package lance

import (
	"context"
	"errors"
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/retain-dev/retain/core/failpoint"
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

// Typed refusals of cleanup.
var (
	// ErrCleanupRefused: cleanup of the dataset was refused and nothing
	// was deleted: something it relies on is unreadable or not understood
	// (a corrupt manifest, an unknown feature flag, a malformed tag or
	// branch file, mixed manifest naming, a storage failure). The error
	// also matches the cause.
	ErrCleanupRefused = errors.New("Lance cleanup refused")
	// ErrPlanStale: the dataset changed since the plan was made (a new
	// version, a tag or branch created, changed or deleted). Nothing was
	// deleted; plan again. It also matches ErrCleanupRefused.
	ErrPlanStale = errors.New("Lance dataset changed since the cleanup was planned")
	// ErrKeptVersionBroken: a version the cleanup keeps (a branch head, a
	// tagged or pinned version, one the window keeps) references a file
	// the store does not have as the manifest records it: missing, a
	// folder in its place, or another size. What the plan would take for
	// unreferenced may then be the file that version really needs, so
	// nothing of the dataset is deleted. The error (a *CleanupError whose
	// Cause is a *KeptFileError) also matches ErrCleanupRefused.
	ErrKeptVersionBroken = errors.New("a version cleanup keeps references a file the store does not have as recorded")
	// ErrDeletesFailed: the store did not confirm every delete of the plan
	// (refused, failed, or a batch whose outcome is unknown). The objects
	// are named in Result.Failed; carrying out the plan again retries them.
	ErrDeletesFailed = errors.New("Lance cleanup: some deletes were not confirmed")
)

// KeptFileError names a file a kept version needs and the store does not
// have as recorded.
type KeptFileError struct {
	// Key is the file's store key.
	Key string
	// Version is the first kept version (in plan order) referencing it;
	// Referencing counts the kept versions that do.
	Version     VersionID
	Referencing int
	// Reasons say why Version is kept (as in the plan: "latest", "tag T",
	// "extra root: ...", "keep-last N", ...).
	Reasons []string
	// Recorded is the size the manifest records (-1: none recorded, so
	// only existence was required); Listed is the size the listing shows
	// (-1: no such object).
	Recorded, Listed int64
	// Folder: objects lie under Key as under a folder.
	Folder bool
	// More counts further broken files of the dataset.
	More int
}

func (e *KeptFileError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s (kept: %s) references %q", e.Version, strings.Join(e.Reasons, ", "), e.Key)
	if e.Referencing > 1 {
		fmt.Fprintf(&b, " (and %d more kept version(s))", e.Referencing-1)
	}
	switch {
	case e.Folder:
		b.WriteString(", but a folder stands there, not the file")
	case e.Listed < 0:
		b.WriteString(", which the store does not have")
	default:
		fmt.Fprintf(&b, " with %d bytes, but the store has %d", e.Recorded, e.Listed)
	}
	if e.More > 0 {
		fmt.Fprintf(&b, "; %d more file(s) kept versions reference are broken too", e.More)
	}
	return b.String()
}

// DefaultSafetyWindow is how long an unreferenced file is kept because it
// may belong to a commit in flight: Lance's UNVERIFIED_THRESHOLD_DAYS.
const DefaultSafetyWindow = 7 * 24 * time.Hour

// CleanupError is a refusal of a cleanup. It matches Err (ErrCleanupRefused
// or ErrPlanStale, which also matches ErrCleanupRefused) and the cause, so
// errors.Is(err, ErrCorruptManifest) and storage.KindOf work through it.
type CleanupError struct {
	// Dataset is the main dataset's root.
	Dataset string
	// Key is the object that caused the refusal ("" when none).
	Key    string
	Reason string
	Err    error
	Cause  error
}

func (e *CleanupError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "cleanup of %q: %v", e.Dataset, e.Err)
	if e.Key != "" {
		fmt.Fprintf(&b, ": %q", e.Key)
	}
	if e.Reason != "" {
		b.WriteString(": " + e.Reason)
	}
	if e.Cause != nil {
		b.WriteString(": " + e.Cause.Error())
	}
	switch e.Err {
	case ErrPlanStale:
		b.WriteString("; nothing was deleted: plan again")
	case ErrKeptVersionBroken:
		b.WriteString("; nothing of this dataset was deleted: restore the file (from a backup or the store's object versioning), or stop keeping that version, then run the cleanup again")
	default:
		b.WriteString("; nothing was deleted: fix or remove the object named, then run the cleanup again")
	}
	return b.String()
}

func (e *CleanupError) Unwrap() []error {
	out := []error{e.Err}
	if e.Err == ErrPlanStale || e.Err == ErrKeptVersionBroken {
		out = append(out, ErrCleanupRefused)
	}
	if e.Cause != nil {
		out = append(out, e.Cause)
	}
	return out
}

// Root is a version the caller pins: kept with every file it references.
type Root struct {
	// Branch is "" (or "main") for main.
	Branch  string `json:"branch,omitempty"`
	Version uint64 `json:"version"`
	// Reason is shown in the plan ("checkpoint nightly-3"); optional.
	Reason string `json:"reason,omitempty"`
}

// Policy says which versions a cleanup keeps besides those always kept
// (each branch's latest, tagged versions, fork points of branches). At
// least one of OlderThan and KeepLast must be set; a version is kept when
// either keeps it.
type Policy struct {
	// OlderThan is the cut-off: a version committed before it may be
	// removed, one committed at or after it is kept. Zero: no time window.
	OlderThan time.Time
	// KeepLast keeps the newest KeepLast versions of each branch. 0: none
	// (1 keeps only the latest, which is always kept).
	KeepLast int
	// Branches replace OlderThan and KeepLast for the branches they match:
	// the first window whose Pattern matches a branch's name ("main" for
	// main) is that branch's window. A branch no window matches has
	// OlderThan and KeepLast.
	Branches []BranchWindow
	// ExtraRoots are versions the caller pins (checkpoints). A root that
	// names a branch or version that does not exist refuses the cleanup.
	ExtraRoots []Root
	// SafetyWindow: an unreferenced file that no removed version
	// references either is deleted only when its ModTime is older than
	// this. 0 means DefaultSafetyWindow (7 days). Negative disables it, as
	// Lance's delete_unverified: only for callers that guarantee no writer
	// is active. Files referenced by removed versions are deleted
	// whatever their age.
	SafetyWindow time.Duration
	// Now is the clock (nil: time.Now); tests move it.
	Now func() time.Time
	// ReadAhead is how many manifests are read and parsed ahead of the
	// one being decided (0: the store's parallelism, at most maxReadAhead).
	// A caller planning many tables at once lowers it, so the manifests in
	// memory stay bounded across all of them.
	ReadAhead int

	// FromTransactions plans the removed versions of main from their
	// transactions where it can, instead of reading their manifests
	// (cleanup_replay.go): for a long history a few percent of the bytes.
	// It applies to policies without OlderThan; the plan is the same but
	// for what PlannedVersion.FromTransaction says.
	FromTransactions bool

	// Refs are the dataset's tags and branches read already (ReadRefs),
	// by a caller that read them anyway: the plan takes them instead of
	// reading _refs/ again. They may be a little older than the plan: the
	// plan records them, and ExecuteCleanup refuses a table whose refs
	// changed since. Refs of another dataset are ignored.
	Refs *Refs

	// folderByFolder: list each folder, not the whole table in one page
	// (the retry of a plan a whole listing refused).
	folderByFolder bool
}

// BranchWindow is the window of the branches a pattern matches.
type BranchWindow struct {
	// Pattern is a glob over branch names (internal/glob: `*` matches any
	// run, '/' included; "main" is main).
	Pattern string `json:"pattern"`
	// Rule names the rule in the plan's reasons ("branch rule session/*");
	// "" shows the pattern.
	Rule      string    `json:"rule,omitempty"`
	OlderThan time.Time `json:"olderThan,omitzero"`
	KeepLast  int       `json:"keepLast,omitempty"`

	match *glob.Pattern
}

// window is the cut-off and keep-last one branch is planned with, and the
// rule that set them ("" for the policy's own).
type window struct {
	olderThan time.Time
	keepLast  int
	rule      string
}

// suffix is the rule as it follows a reason: " (branch rule session/*)".
func (w window) suffix() string {
	if w.rule == "" {
		return ""
	}
	return " (" + w.rule + ")"
}

// branchWindow is branch b's window: the first matching branch window's, else
// the policy's.
func (pl *planner) branchWindow(b string) window {
	for _, bw := range pl.p.Branches {
		if bw.match.Match(branchName(b)) {
			r := bw.Rule
			if r == "" {
				r = "branch rule " + bw.Pattern
			}
			return window{bw.OlderThan, bw.KeepLast, r}
		}
	}
	return window{pl.p.OlderThan, pl.p.KeepLast, ""}
}

func (p Policy) now() time.Time {
	if p.Now != nil {
		return p.Now()
	}
	return time.Now()
}

func (p Policy) safetyWindow() time.Duration {
	if p.SafetyWindow == 0 {
		return DefaultSafetyWindow
	}
	return p.SafetyWindow
}

// VersionID names a version of a branch ("" for main).
type VersionID struct {
	Branch  string `json:"branch,omitempty"`
	Version uint64 `json:"version"`
}

func (v VersionID) String() string {
	return branchName(v.Branch) + " v" + strconv.FormatUint(v.Version, 10)
}

func branchName(b string) string {
	if b == "" {
		return "main"
	}
	return b
}

// Plan is what a cleanup would do: every version of every branch, kept or
// removed with the reasons, and every object to delete with its size and
// why. ExecuteCleanup carries it out after re-checking Snapshot. Its JSON
// form is stable: `retain cleanup preview --json` prints it.
type Plan struct {
	// Dataset is the main dataset's root key.
	Dataset   string     `json:"dataset"`
	PlannedAt time.Time  `json:"plannedAt"`
	Policy    PlanPolicy `json:"policy"`
	// Versions lists every version: main first, then branches by name,
	// each oldest first.
	Versions []PlannedVersion `json:"versions"`
	// Files lists every object to delete: the manifests of removed
	// versions first, then the other files by key.
	Files  []PlannedFile `json:"files"`
	Totals PlanTotals    `json:"totals"`
	// Notes are things worth knowing that did not stop the plan (a tag on
	// a version that no longer exists, ...).
	Notes []string `json:"notes,omitempty"`
	// Snapshot is what the plan relied on; ExecuteCleanup refuses if it
	// changed.
	Snapshot PlanSnapshot `json:"snapshot"`

	stats planStats
	// tags and branches are the refs the plan read (RefsRead).
	tags     []Tag
	branches []Branch
}

// RefsRead are the tags and branches the plan was made with: a caller
// describing them (their lifetimes, say) reads nothing more.
func (p *Plan) RefsRead() ([]Tag, []Branch) { return p.tags, p.branches }

// PlanPolicy echoes the policy a plan was made with.
type PlanPolicy struct {
	OlderThan    *time.Time     `json:"olderThan,omitempty"`
	KeepLast     int            `json:"keepLast,omitempty"`
	Branches     []BranchWindow `json:"branches,omitempty"`
	ExtraRoots   []Root         `json:"extraRoots,omitempty"`
	SafetyWindow string         `json:"safetyWindow"`
}

// PlannedVersion is one version and the decision about it.
type PlannedVersion struct {
	// Branch is "" for main.
	Branch    string    `json:"branch,omitempty"`
	Version   uint64    `json:"version"`
	Timestamp time.Time `json:"timestamp"`
	// Key and Size are the manifest object's.
	Key     string   `json:"key"`
	Size    int64    `json:"size"`
	Keep    bool     `json:"keep"`
	Reasons []string `json:"reasons"`
	// Rule names the branch window the version was planned with
	// (BranchWindow.Rule, "branch rule session/*"); "" for the policy's own.
	Rule string `json:"rule,omitempty"`
	// FromTransaction: a removed version planned from its transaction,
	// its manifest not read (cleanup_replay.go); Timestamp is then the
	// manifest object's modification time, not the commit time.
	FromTransaction bool `json:"fromTransaction,omitempty"`
}

// PlannedFile is one object to delete.
type PlannedFile struct {
	Key     string    `json:"key"`
	Size    int64     `json:"size"`
	Kind    FileKind  `json:"kind"`
	ModTime time.Time `json:"modTime"`
	// Verified: a removed version references it, so it is no commit in
	// flight. Otherwise it is referenced by no version and older than the
	// safety window.
	Verified bool   `json:"verified"`
	Reason   string `json:"reason"`
	// RemovedBy says which removed versions reference it (for manifests:
	// the version itself).
	RemovedBy *RemovedRefs `json:"removedBy,omitempty"`
}

// RemovedRefs summarises the removed versions that reference a file: how
// many, and the first and last of them in plan order.
type RemovedRefs struct {
	Count int       `json:"count"`
	First VersionID `json:"first"`
	Last  VersionID `json:"last"`
}

// PlanTotals sums a plan up.
type PlanTotals struct {
	VersionsKept      int   `json:"versionsKept"`
	VersionsRemoved   int   `json:"versionsRemoved"`
	ManifestsToDelete int   `json:"manifestsToDelete"`
	FilesToDelete     int   `json:"filesToDelete"` // manifests included
	BytesToDelete     int64 `json:"bytesToDelete"`
	// ReferencedFiles and ReferencedBytes: objects in the managed folders
	// that kept versions reference (kept manifests included).
	ReferencedFiles int   `json:"referencedFiles"`
	ReferencedBytes int64 `json:"referencedBytes"`
	// Young: unreferenced objects kept because they are younger than the
	// safety window.
	YoungFiles int   `json:"youngFiles"`
	YoungBytes int64 `json:"youngBytes"`
}

// PlanSnapshot is the state a plan was made against.
type PlanSnapshot struct {
	// Heads: the latest version of every branch, main first.
	Heads []HeadSnapshot `json:"heads"`
	// Tags and Branches: every ref file and its version token.
	Tags     []RefSnapshot `json:"tags"`
	Branches []RefSnapshot `json:"branches"`
	// Whole: the plan was made from one listing page of the whole table
	// (cleanup_whole.go), so one page rechecks it.
	Whole bool `json:"whole,omitempty"`
}

// HeadSnapshot is the latest manifest of one branch.
type HeadSnapshot struct {
	Branch string `json:"branch,omitempty"`
	// Root is the branch dataset's root key.
	Root          string `json:"root"`
	Version       uint64 `json:"version"`
	Key           string `json:"key"`
	ObjectVersion string `json:"objectVersion"`
}

// RefSnapshot is one tag or branch file.
type RefSnapshot struct {
	Name          string `json:"name"`
	Key           string `json:"key"`
	ObjectVersion string `json:"objectVersion"`
}

// Result is what ExecuteCleanup did. A delete counts only when the store
// confirmed it for that key; an object the store reports already absent
// (ErrNotFound) counts as deleted, since gone is what was asked and most
// stores do not tell the two apart.
type Result struct {
	ManifestsDeleted int   `json:"manifestsDeleted"`
	FilesDeleted     int   `json:"filesDeleted"` // manifests included
	BytesDeleted     int64 `json:"bytesDeleted"`
	// Failed lists objects whose delete failed or whose outcome is unknown
	// (the batch call failed); they may stay, and carrying out the plan
	// again retries them.
	Failed []FailedDelete `json:"failed,omitempty"`
	// Started: deleting began (the plan passed its re-checks). Remaining
	// then lists every object of the plan not confirmed deleted: failed,
	// unknown, or not attempted (after a failed manifest delete).
	Started   bool     `json:"-"`
	Remaining []string `json:"-"`
}

// FailedDelete is one object that could not be deleted.
type FailedDelete struct {
	Key string `json:"key"`
	Err string `json:"error"`
}

// UnmarshalText reads what MarshalText writes, so a plan read back from
// JSON can be executed.
func (k *FileKind) UnmarshalText(b []byte) error {
	for c := KindManifest; c <= KindExternal; c++ {
		if c.String() == string(b) {
			*k = c
			return nil
		}
	}
	return fmt.Errorf("unknown file kind %q", b)
}

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
