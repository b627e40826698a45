// Package quickstart is `retain quickstart`: the product's whole job on a
// local LanceDB store, with nothing installed but Go. It replays commits a
// real LanceDB made (Go cannot write Lance data), pins one version with a
// checkpoint, lets the "writer" commit more, previews and runs a cleanup
// and proves the pinned version survived intact while the unpinned ones
// are gone. Every step is checked, so it doubles as a smoke test
// (docs/quickstart.md).
package quickstart

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/retain-dev/retain/core/checkpoint"
	"github.com/retain-dev/retain/core/checkpoint/registry"
	"github.com/retain-dev/retain/core/lance"
	"github.com/retain-dev/retain/core/retention"
	"github.com/retain-dev/retain/core/storage"
)

// CheckpointName is the checkpoint quickstart creates.
const CheckpointName = "quickstart-v3"

// KeepLast is the cleanup window quickstart uses. The fixture's commits
// carry the time LanceDB made them, long ago, so an --older-than window
// would say nothing about this run: only --keep-last is meaningful here.
const KeepLast = 1

// Step names, in order (Report.FailedStep).
const (
	StepPrepare    = "prepare"
	StepReplay     = "replay"
	StepCheckpoint = "checkpoint"
	StepWriter     = "writer"
	StepPreview    = "preview"
	StepCleanup    = "cleanup"
	StepShow       = "show"
	StepVerify     = "verify"
)

// ErrDirNotEmpty: the directory named for quickstart holds something;
// quickstart never writes into a non-empty directory.
var ErrDirNotEmpty = errors.New("not an empty directory")

// PrepareDir returns the absolute directory quickstart runs in: dir if it
// does not exist (it is created) or is an empty directory, a fresh
// retain-quickstart-* under os.TempDir when dir is "". Anything else is
// ErrDirNotEmpty, and nothing is written.
func PrepareDir(dir string) (string, error) {
	if dir == "" {
		return os.MkdirTemp("", "retain-quickstart-*")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	fi, err := os.Lstat(abs)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return abs, os.MkdirAll(abs, 0o755)
	case err != nil:
		return "", err
	case !fi.IsDir():
		return "", fmt.Errorf("%s: %w: it is a %s; name a new or empty directory", abs, ErrDirNotEmpty, fileType(fi))
	}
	entries, err := os.ReadDir(abs)
	if err != nil {
		return "", err
	}
	if len(entries) > 0 {
		return "", fmt.Errorf("%s: %w (it holds %d entries, e.g. %q); quickstart never writes into a non-empty directory: name a new or empty one, or none for a fresh temporary directory",
			abs, ErrDirNotEmpty, len(entries), entries[0].Name())
	}
	return abs, nil
}

func fileType(fi os.FileInfo) string {
	if fi.Mode()&os.ModeSymlink != 0 {
		return "symbolic link"
	}
	return "file"
}

// Options configure Run.
type Options struct {
	// Dir is the store's directory (from PrepareDir).
	Dir string
	// Store is the store opened writable, the way every retain command
	// opens it (through its bundled adapter), at its location (Store.At).
	Store *storage.Store
	// ReadOnly is the same store opened read-only, as `cleanup preview`
	// and `checkpoint show` open it; nil means Store.
	ReadOnly *storage.Store
	// Out receives the narrative; nil prints nothing.
	Out io.Writer
	// Retain is how the narrative names the retain command ("retain").
	Retain string
	// Actor is recorded in the checkpoint, the claims and the audit
	// lines, as by `retain --actor`; "" is the claim's default.
	Actor string
}

// Report is every step's result: `retain quickstart --json`.
type Report struct {
	OK      bool   `json:"ok"`
	Dir     string `json:"dir"`
	Store   string `json:"store"`
	Adapter string `json:"adapter"`
	// LanceDB is the version of LanceDB whose commits are replayed.
	LanceDB    string `json:"lancedb"`
	Checkpoint string `json:"checkpoint"`
	// CheckpointID is the id of the checkpoint created.
	CheckpointID string `json:"checkpoint_id,omitempty"`
	KeepLast     int    `json:"keep_last"`
	// Tables sums each table up: versions before and after cleanup.
	Tables []TableSummary `json:"tables"`
	Steps  Steps          `json:"steps"`
	// Next are commands to run on the directory.
	Next       []string `json:"next"`
	FailedStep string   `json:"failed_step,omitempty"`
	Error      string   `json:"error,omitempty"`
}

// Steps holds each step's result; a step not reached is null.
type Steps struct {
	// Replay: LanceDB's commits of versions 1..PinnedVersion.
	Replay *Replay `json:"replay"`
	// Checkpoint is checkpoint.Create's result (`retain checkpoint create`).
	Checkpoint *checkpoint.Created `json:"checkpoint"`
	// Writer: the commits after the checkpoint.
	Writer *Replay `json:"writer"`
	// Preview is retention.Preview's plan (`retain cleanup preview`).
	Preview *retention.StorePlan `json:"preview"`
	// Cleanup is retention.Run's report (`retain cleanup run`).
	Cleanup *retention.RunReport `json:"cleanup"`
	// Show is checkpoint.Show with deep (`retain checkpoint show --deep`).
	Show *checkpoint.Info `json:"show"`
	// Verify is quickstart's own check of the directory afterwards.
	Verify *Verify `json:"verify"`
}

// Replay is one replay of LanceDB commits.
type Replay struct {
	Commits []ReplayedCommit `json:"commits"`
	Objects int              `json:"objects"`
	Bytes   int64            `json:"bytes"`
	// Versions is every table's versions listed by retain afterwards.
	Versions map[string][]uint64 `json:"versions"`
}

// ReplayedCommit is one replayed commit.
type ReplayedCommit struct {
	Table   string `json:"table"`
	Version uint64 `json:"version"`
	Commit  string `json:"commit"`
	// Rows is LanceDB's row count at this version when it wrote it.
	Rows    int64 `json:"rows"`
	Objects int   `json:"objects"`
	Bytes   int64 `json:"bytes"`
}

// Verify is the check of the directory after cleanup.
type Verify struct {
	Tables []TableVerify `json:"tables"`
}

// TableVerify is one table after cleanup.
type TableVerify struct {
	Table    string   `json:"table"`
	Versions []uint64 `json:"versions"`
	// Present: objects the kept versions reference, all found with their
	// size; Gone: the fixture's other objects, all absent.
	Present int `json:"present"`
	Gone    int `json:"gone"`
	// ManifestsGone are the removed versions whose manifests are absent.
	ManifestsGone []uint64 `json:"manifests_gone"`
}

// TableSummary is one table before and after.
type TableSummary struct {
	Table          string   `json:"table"`
	VersionsBefore []uint64 `json:"versions_before"`
	VersionsAfter  []uint64 `json:"versions_after"`
	Pinned         uint64   `json:"pinned"`
	Head           uint64   `json:"head"`
	Removed        []uint64 `json:"removed"`
	// PinnedRows and HeadRows are LanceDB's row counts of those versions
	// when it wrote them.
	PinnedRows int64 `json:"pinned_rows"`
	HeadRows   int64 `json:"head_rows"`
}

// StepError is a step that failed or whose check failed.
type StepError struct {
	Step string
	Dir  string
	Err  error
}

func (e *StepError) Error() string {
	return fmt.Sprintf("quickstart step %q failed: %v (the store is left in %s for inspection)", e.Step, e.Err, e.Dir)
}

func (e *StepError) Unwrap() error { return e.Err }

// testHookAfterCleanup runs (in tests) between cleanup and show.
var testHookAfterCleanup func()

type runner struct {
	o   Options
	f   *Fixture
	rep *Report
	w   io.Writer
}

// Run runs quickstart in o.Dir. It returns the report also on failure
// (with FailedStep and Error set); the error is a *StepError.
func Run(ctx context.Context, o Options) (*Report, error) {
	if o.ReadOnly == nil {
		o.ReadOnly = o.Store
	}
	if o.Retain == "" {
		o.Retain = "retain"
	}
	r := &runner{o: o, w: o.Out,
		rep: &Report{Dir: o.Dir, Store: o.Store.Location().String(), Adapter: o.Store.Adapter(), Checkpoint: CheckpointName, KeepLast: KeepLast,
			Tables: []TableSummary{}, Next: NextCommands(o.Retain, o.Dir)}}
	if r.w == nil {
		r.w = io.Discard
	}
	err := r.run(ctx)
	if err != nil {
		var se *StepError
		if errors.As(err, &se) {
			r.rep.FailedStep = se.Step
		}
		r.rep.Error = err.Error()
		fmt.Fprintf(r.w, "\nFAILED: %v\n", err)
		return r.rep, err
	}
	r.rep.OK = true
	return r.rep, nil
}

func (r *runner) fail(step string, err error) error {
	return &StepError{Step: step, Dir: r.o.Dir, Err: err}
}

func (r *runner) failf(step, format string, args ...any) error {
	return r.fail(step, fmt.Errorf(format, args...))
}

func (r *runner) printf(format string, args ...any) { fmt.Fprintf(r.w, format, args...) }

func (r *runner) run(ctx context.Context) error {
	f, err := LoadFixture(ctx)
	if err != nil {
		return r.fail(StepPrepare, err)
	}
	r.f = f
	r.rep.LanceDB = f.Info.LanceDB
	for _, t := range f.Info.Tables {
		r.rep.Tables = append(r.rep.Tables, TableSummary{Table: t.Table, Pinned: PinnedVersion, Head: f.Head(t.Table), Removed: []uint64{}})
	}
	s := r.o.Store
	r.printf("retain quickstart: checkpoint-pinned retention of a LanceDB store, end to end\n")
	r.printf("store %s (adapter %s); tables %s\n", r.o.Dir, s.Adapter(), strings.Join(f.Tables(), ", "))
	r.printf("Go cannot write Lance data, so the writer here replays commits real LanceDB %s made (docs/quickstart.md).\n", f.Info.LanceDB)

	// 1. The writer commits versions 1..PinnedVersion.
	r.printf("\n1. A LanceDB writer commits versions 1-%d of each table\n", PinnedVersion)
	if r.rep.Steps.Replay, err = r.replay(ctx, 1, PinnedVersion); err != nil {
		return r.fail(StepReplay, err)
	}

	// 2. The checkpoint, exactly as `retain checkpoint create` takes it.
	r.printf("\n2. retain checkpoint create %s (pin every table's head)\n", CheckpointName)
	c, err := checkpoint.Options{Actor: r.o.Actor}.Create(ctx, s, CheckpointName, registry.MainBranch)
	if err != nil {
		return r.fail(StepCheckpoint, err)
	}
	r.rep.Steps.Checkpoint = c
	r.rep.CheckpointID = string(c.ID)
	if len(c.Tables) != len(f.Info.Tables) {
		return r.failf(StepCheckpoint, "the checkpoint pins %d tables, the store has %d", len(c.Tables), len(f.Info.Tables))
	}
	r.printf("   created checkpoint %q (id %s) at registry version %d\n", c.Name, c.ID, c.RegistryVersion)
	for _, t := range c.Tables {
		if t.Version != PinnedVersion || t.Branch != registry.MainBranch {
			return r.failf(StepCheckpoint, "the checkpoint pins %s %s v%d, want main v%d", t.Path, t.Branch, t.Version, PinnedVersion)
		}
		r.printf("   %-14s main v%d pinned by tag %s\n", t.Path, t.Version, shortTag(t.Tag))
	}

	// 3. The writer goes on committing.
	head := r.f.Head(f.Info.Tables[0].Table)
	r.printf("\n3. The writer commits versions %d-%d after the checkpoint, then stops\n", PinnedVersion+1, head)
	if r.rep.Steps.Writer, err = r.replay(ctx, PinnedVersion+1, 0); err != nil {
		return r.fail(StepWriter, err)
	}
	for i := range r.rep.Tables {
		r.rep.Tables[i].VersionsBefore = r.rep.Steps.Writer.Versions[r.rep.Tables[i].Table]
	}

	// 4. Preview, read-only, as `retain cleanup preview --keep-last 1`.
	r.printf("\n4. retain cleanup preview --keep-last %d (read-only: what a cleanup would keep and remove, and why)\n", KeepLast)
	plan, err := retention.Preview(ctx, r.o.ReadOnly, retention.Policy{KeepLast: KeepLast})
	if err != nil {
		return r.fail(StepPreview, err)
	}
	r.rep.Steps.Preview = plan
	if err := r.checkPreview(plan, c); err != nil {
		return r.fail(StepPreview, err)
	}
	r.printPreview(plan)

	// 5. Cleanup, as `retain cleanup run --confirm-write-outage`.
	r.printf("\n5. retain cleanup run --keep-last %d --confirm-write-outage\n", KeepLast)
	r.printf("   cleanup run needs a write outage: no writer may commit while it deletes. Here the writer is\n")
	r.printf("   quickstart's own replay and it has stopped, so the outage is real; on your store, stop the writers first.\n")
	run, err := retention.Run(ctx, s, retention.Policy{KeepLast: KeepLast}, retention.RunOptions{ConfirmWriteOutage: true, Actor: r.o.Actor})
	r.rep.Steps.Cleanup = run
	if err != nil {
		return r.fail(StepCleanup, err)
	}
	if err := r.checkRun(run); err != nil {
		return r.fail(StepCleanup, err)
	}
	r.printf("   run %s: gc boundaries published at registry version %d\n", run.OperationID, run.BoundaryVersion)
	for _, tr := range run.Tables {
		r.printf("   %-14s %d versions, %d files, %d bytes removed\n", tr.Table, tr.VersionsRemoved, tr.FilesDeleted, tr.BytesDeleted)
	}

	if testHookAfterCleanup != nil {
		testHookAfterCleanup()
	}

	// 6. The checkpoint afterwards, as `retain checkpoint show --deep`.
	r.printf("\n6. retain checkpoint show %s --deep (every pin and every file the pinned versions reference)\n", CheckpointName)
	in, err := checkpoint.Show(ctx, r.o.ReadOnly, CheckpointName, true)
	if err != nil {
		return r.fail(StepShow, err)
	}
	r.rep.Steps.Show = in
	if err := checkShow(in, len(f.Info.Tables)); err != nil {
		return r.fail(StepShow, err)
	}
	r.printf("   pins %s: ", in.Health)
	var pins []string
	for _, p := range in.Pins {
		pins = append(pins, fmt.Sprintf("%s v%d %s", p.Path, p.Version, p.Status))
	}
	r.printf("%s\n", strings.Join(pins, ", "))
	r.printf("   deep: %d files checked, %d missing\n", in.Deep.FilesChecked, len(in.Deep.Missing))

	// 7. Quickstart's own look at the directory.
	r.printf("\n7. Verify the directory\n")
	if r.rep.Steps.Verify, err = r.verify(ctx); err != nil {
		return r.fail(StepVerify, err)
	}
	for i, tv := range r.rep.Steps.Verify.Tables {
		ts := &r.rep.Tables[i]
		ts.VersionsAfter = tv.Versions
		ts.Removed = tv.ManifestsGone
		pc, _ := f.Commit(ts.Table, ts.Pinned)
		hc, _ := f.Commit(ts.Table, ts.Head)
		ts.PinnedRows, ts.HeadRows = pc.Version.Rows, hc.Version.Rows
		r.printf("   %-14s versions %s -> %s: v%d pinned and intact (%d rows), v%d head (%d rows); %s gone\n",
			ts.Table, versionList(ts.VersionsBefore), versionList(ts.VersionsAfter), ts.Pinned, ts.PinnedRows, ts.Head, ts.HeadRows, vList(ts.Removed))
		r.printf("   %-14s %d objects of the kept versions present, %d objects of removed versions gone\n", "", tv.Present, tv.Gone)
	}

	r.printf("\nOK: the checkpoint kept v%d of every table through cleanup; everything else unpinned is gone.\n", PinnedVersion)
	r.printf("\nBeside LanceDB: optimize() throws once a pinned version is older than its cleanup cut-off (7 days by default);\n"+
		"call %s and let retain remove old versions (docs/checkpoints.md; `retain status` warns per table).\n", retention.LanceOptimizeCall)
	r.printf("\nNext, on the same store (retain is `go run ./cmd/retain` in a checkout, or build it: go build -o bin/retain ./cmd/retain):\n")
	for _, n := range r.rep.Next {
		r.printf("  %s\n", n)
	}
	return nil
}

// replay writes the commits of versions from..to (to 0: the last) of every
// table through the store, as LanceDB wrote them: each commit's new files,
// then its manifest (the commit point), then the version hint.
func (r *runner) replay(ctx context.Context, from, to uint64) (*Replay, error) {
	s := r.o.Store
	rp := &Replay{Commits: []ReplayedCommit{}, Versions: map[string][]uint64{}}
	for _, c := range r.f.Commits {
		v := c.Version.Version
		if v < from || (to != 0 && v > to) {
			continue
		}
		rc := ReplayedCommit{Table: c.Table, Version: v, Commit: c.Version.Commit, Rows: c.Version.Rows}
		for _, o := range c.Files {
			if _, err := s.PutBytes(ctx, o.Key, o.Body, storage.PutOptions{Mode: storage.PutCreateIfAbsent}); err != nil {
				return rp, fmt.Errorf("replaying %s v%d: %w", c.Table, v, err)
			}
			rc.Objects++
			rc.Bytes += int64(len(o.Body))
		}
		if _, err := s.PutBytes(ctx, c.Table+"/"+hintName, HintBody(v), storage.PutOptions{Mode: storage.PutOverwrite}); err != nil {
			return rp, fmt.Errorf("replaying %s v%d: %w", c.Table, v, err)
		}
		rp.Commits = append(rp.Commits, rc)
		rp.Objects += rc.Objects
		rp.Bytes += rc.Bytes
	}
	tw := tabwriter.NewWriter(r.w, 2, 4, 2, ' ', 0)
	for _, t := range r.f.Info.Tables {
		for _, rc := range rp.Commits {
			if rc.Table == t.Table {
				fmt.Fprintf(tw, "   %s\tv%d\t%s\t%d rows\t%d objects\n", rc.Table, rc.Version, rc.Commit, rc.Rows, rc.Objects)
			}
		}
	}
	tw.Flush()
	// Check with retain's own reader that exactly the versions replayed so
	// far are there.
	last := to
	if last == 0 {
		last = r.f.Head(r.f.Info.Tables[0].Table)
	}
	for _, t := range r.f.Info.Tables {
		vs, err := versions(ctx, s, t.Table)
		if err != nil {
			return rp, err
		}
		rp.Versions[t.Table] = vs
		want := make([]uint64, 0, last)
		for v := uint64(1); v <= min(last, r.f.Head(t.Table)); v++ {
			want = append(want, v)
		}
		if !slices.Equal(vs, want) {
			return rp, fmt.Errorf("%s lists versions %v after the replay, want %v", t.Table, vs, want)
		}
	}
	r.printf("   %d objects, %d bytes written through the store; retain lists versions %s\n", rp.Objects, rp.Bytes, versionList(rp.Versions[r.f.Info.Tables[0].Table]))
	return rp, nil
}

// versions lists a table's versions with retain's Lance reader.
func versions(ctx context.Context, s *storage.Store, table string) ([]uint64, error) {
	ds, err := lance.Open(s, table)
	if err != nil {
		return nil, err
	}
	vs, err := ds.Versions(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]uint64, 0, len(vs))
	for _, v := range vs {
		out = append(out, v.N)
	}
	return out, nil
}

// checkPreview: per table, exactly the pinned version and the head are
// kept, the pinned one because of the checkpoint; the rest are removed.
func (r *runner) checkPreview(plan *retention.StorePlan, c *checkpoint.Created) error {
	if len(plan.Tables) != len(r.f.Info.Tables) {
		return fmt.Errorf("the plan covers %d tables, the store has %d", len(plan.Tables), len(r.f.Info.Tables))
	}
	found := false
	for _, cp := range plan.Checkpoints {
		found = found || cp.ID == string(c.ID)
	}
	if !found {
		return fmt.Errorf("the plan does not see checkpoint %s (%s) as a root", CheckpointName, c.ID)
	}
	byReason := fmt.Sprintf("checkpoint %s (%s)", CheckpointName, c.ID)
	for _, tp := range plan.Tables {
		head := r.f.Head(tp.Table)
		if len(tp.Versions) != int(head) {
			return fmt.Errorf("%s: the plan lists %d versions, want %d", tp.Table, len(tp.Versions), head)
		}
		for _, v := range tp.Versions {
			want := v.Version == PinnedVersion || v.Version == head
			if v.Branch != registry.MainBranch || v.Keep != want {
				return fmt.Errorf("%s %s v%d: keep=%v (%s), want keep=%v", tp.Table, v.Branch, v.Version, v.Keep, strings.Join(v.Reasons, "; "), want)
			}
			if v.Version == PinnedVersion && !slices.Contains(v.Reasons, byReason) {
				return fmt.Errorf("%s v%d is kept for %q, not by the checkpoint (%s)", tp.Table, v.Version, strings.Join(v.Reasons, "; "), byReason)
			}
		}
		if tp.Totals.VersionsRemoved != int(head)-2 || tp.Totals.FilesToDelete == 0 {
			return fmt.Errorf("%s: the plan removes %d versions and %d files, want %d versions and some files",
				tp.Table, tp.Totals.VersionsRemoved, tp.Totals.FilesToDelete, head-2)
		}
	}
	return nil
}

func (r *runner) printPreview(plan *retention.StorePlan) {
	for _, tp := range plan.Tables {
		r.printf("   table %s\n", tp.Table)
		tw := tabwriter.NewWriter(r.w, 2, 4, 2, ' ', 0)
		for _, v := range tp.Versions {
			dec := "KEEP"
			if !v.Keep {
				dec = "REMOVE"
			}
			reasons := make([]string, len(v.Reasons))
			for i, rs := range v.Reasons {
				reasons[i] = shortTags(rs)
			}
			fmt.Fprintf(tw, "     v%d\t%s\t%s\n", v.Version, dec, strings.Join(reasons, "; "))
		}
		tw.Flush()
	}
	t := plan.Totals
	r.printf("   total: %d versions kept, %d removed; %d files, %d bytes would be reclaimed\n", t.VersionsKept, t.VersionsRemoved, t.FilesToDelete, t.BytesToDelete)
}

func (r *runner) checkRun(run *retention.RunReport) error {
	if run.Failed > 0 {
		return fmt.Errorf("%d tables failed: %s", run.Failed, firstTableError(run))
	}
	if len(run.Tables) != len(r.f.Info.Tables) {
		return fmt.Errorf("cleaned %d tables, the store has %d", len(run.Tables), len(r.f.Info.Tables))
	}
	for _, tr := range run.Tables {
		want := int(r.f.Head(tr.Table)) - 2
		if tr.Skipped || tr.VersionsRemoved != want || len(tr.FailedDeletes) > 0 {
			return fmt.Errorf("%s: %d versions removed (skipped %v, %d failed deletes), want %d", tr.Table, tr.VersionsRemoved, tr.Skipped, len(tr.FailedDeletes), want)
		}
	}
	return nil
}

func firstTableError(run *retention.RunReport) string {
	for _, tr := range run.Tables {
		if tr.Error != "" {
			return tr.Table + ": " + tr.Error
		}
	}
	return "no detail"
}

func checkShow(in *checkpoint.Info, tables int) error {
	if in.Health != "ok" {
		return fmt.Errorf("checkpoint %s is %s: %s", CheckpointName, in.Health, pinProblems(in))
	}
	if len(in.Pins) != tables+1 {
		return fmt.Errorf("checkpoint %s has %d pins, want %d (the registry's and one per table)", CheckpointName, len(in.Pins), tables+1)
	}
	for _, p := range in.Pins {
		if p.Kind == "table" && p.Version != PinnedVersion {
			return fmt.Errorf("checkpoint %s pins %s v%d, want v%d", CheckpointName, p.Path, p.Version, PinnedVersion)
		}
	}
	d := in.Deep
	if d == nil || len(d.Missing) > 0 || len(d.Errors) > 0 {
		if d == nil {
			return fmt.Errorf("no deep check")
		}
		msg := fmt.Sprintf("the pinned versions are not intact: %d of %d files missing", len(d.Missing), d.FilesChecked)
		if len(d.Missing) > 0 {
			msg += " (" + strings.Join(d.Missing, ", ") + ")"
		}
		if len(d.Errors) > 0 {
			msg += "; errors: " + strings.Join(d.Errors, "; ")
		}
		return errors.New(msg)
	}
	return nil
}

func pinProblems(in *checkpoint.Info) string {
	var out []string
	for _, p := range in.Pins {
		if p.Status != checkpoint.PinOK {
			out = append(out, fmt.Sprintf("%s pin of %s is %s %s", p.Kind, p.Path, p.Status, p.Detail))
		}
	}
	return strings.Join(out, "; ")
}

// verify reads the directory through the store: each table lists exactly
// the pinned version and the head; every object they reference is present
// with the size LanceDB wrote; every other object of the fixture, the
// removed versions' manifests first, is gone.
func (r *runner) verify(ctx context.Context) (*Verify, error) {
	s := r.o.ReadOnly
	out := &Verify{}
	for _, t := range r.f.Info.Tables {
		head := r.f.Head(t.Table)
		tv := TableVerify{Table: t.Table, ManifestsGone: []uint64{}}
		vs, err := versions(ctx, s, t.Table)
		if err != nil {
			return out, err
		}
		tv.Versions = vs
		if want := []uint64{PinnedVersion, head}; !slices.Equal(vs, want) {
			return out, fmt.Errorf("%s lists versions %v after cleanup, want %v", t.Table, vs, want)
		}
		keep := map[string]bool{}
		for _, v := range []uint64{PinnedVersion, head} {
			c, _ := r.f.Commit(t.Table, v)
			for _, k := range c.Refs {
				keep[k] = true
			}
		}
		var keys []string
		for k := range r.f.Objects {
			if strings.HasPrefix(k, t.Table+"/") {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			info, err := s.Stat(ctx, k)
			switch {
			case keep[k] && err != nil:
				return out, fmt.Errorf("%s, referenced by a kept version, is not there: %w", k, err)
			case keep[k] && info.Size != int64(len(r.f.Objects[k])):
				return out, fmt.Errorf("%s, referenced by a kept version, has %d bytes, LanceDB wrote %d", k, info.Size, len(r.f.Objects[k]))
			case keep[k]:
				tv.Present++
			case err == nil:
				return out, fmt.Errorf("%s, referenced only by removed versions, is still there", k)
			case !errors.Is(err, storage.ErrNotFound):
				return out, err
			default:
				tv.Gone++
			}
		}
		for v := uint64(1); v <= head; v++ {
			if v == PinnedVersion || v == head {
				continue
			}
			c, _ := r.f.Commit(t.Table, v)
			if _, err := s.Stat(ctx, c.Manifest); !errors.Is(err, storage.ErrNotFound) {
				return out, fmt.Errorf("the manifest of removed version %s v%d is still there (%v)", t.Table, v, err)
			}
			tv.ManifestsGone = append(tv.ManifestsGone, v)
		}
		out.Tables = append(out.Tables, tv)
	}
	return out, nil
}

// NextCommands are what to try next on dir.
func NextCommands(retain, dir string) []string {
	d := storage.ShellWord(dir)
	return []string{
		fmt.Sprintf("%s checkpoint list %s", retain, d),
		fmt.Sprintf("%s checkpoint show %s %s --deep", retain, CheckpointName, d),
		fmt.Sprintf("%s inspect %s", retain, storage.ShellWord(filepath.Join(dir, "events.lance"))),
		fmt.Sprintf("%s cleanup preview %s --keep-last %d", retain, d, KeepLast),
		fmt.Sprintf("%s checkpoint delete %s %s", retain, CheckpointName, d),
		fmt.Sprintf("%s cleanup preview %s --keep-last %d   # with the checkpoint gone, v%d would go too", retain, d, KeepLast, PinnedVersion),
		fmt.Sprintf("rm -rf %s", d),
	}
}

// shortTag abbreviates a pin tag name for the narrative.
func shortTag(tag string) string {
	if len(tag) <= 40 {
		return tag
	}
	return tag[:36] + "…" + tag[len(tag)-4:]
}

// shortTags abbreviates every ogcp_ tag name in a reason.
func shortTags(s string) string {
	fields := strings.Fields(s)
	for i, f := range fields {
		if registry.IsReservedTag(f) {
			fields[i] = shortTag(f)
		}
	}
	return strings.Join(fields, " ")
}

func versionList(vs []uint64) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = fmt.Sprint(v)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func vList(vs []uint64) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = fmt.Sprintf("v%d", v)
	}
	return strings.Join(parts, ", ")
}
