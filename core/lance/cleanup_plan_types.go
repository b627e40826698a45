package lance

// What a cleanup plan is: its policy, windows, planned versions and files, results.

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/retain-dev/retain/core/internal/glob"
)

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
