package lance

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/retain-dev/retain/internal/lancetest"
)

// Real Lance judges retain's cleanup: datasets built by Lance, cleaned by
// retain through localfs, then read, checked out and appended to by Lance.

// oracleRun runs jobs of internal/lancetest/oracle.cjs in one Node process
// and returns one raw result per job; a job that failed fails the test.
func oracleRun(t testing.TB, jobs ...map[string]any) []json.RawMessage {
	t.Helper()
	var out struct {
		Results []json.RawMessage `json:"results"`
	}
	lancetest.Node(t, "oracle.cjs", map[string]any{"jobs": jobs}, &out)
	if len(out.Results) != len(jobs) {
		t.Fatalf("oracle.cjs returned %d results for %d jobs", len(out.Results), len(jobs))
	}
	for i, r := range out.Results {
		var e struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(r, &e) == nil && e.Error != "" {
			t.Fatalf("oracle job %d (%v): %s", i, jobs[i]["kind"], e.Error)
		}
	}
	return out.Results
}

func buildJob(dir, table, naming string, steps []step) map[string]any {
	return map[string]any{"kind": "build", "dir": dir, "table": table, "naming": naming, "steps": steps}
}

// verifyResult is oracle.cjs's verify output.
type verifyResult struct {
	Listed   map[string][]uint64               `json:"listed"`
	Rows     map[string]map[string]versionRows `json:"rows"`
	TagRows  map[string]versionRows            `json:"tagRows"`
	Errors   []string                          `json:"errors"`
	Appended map[string]appended               `json:"appended"`
}

// versionRows is what Lance read of one version: countRows (manifest
// metadata), and from reading every row the count, the sum of ids, and the
// count through a filter (served by the scalar index when there is one).
type versionRows struct {
	Rows     int64   `json:"rows"`
	Scanned  int64   `json:"scanned"`
	IDSum    float64 `json:"idSum"`
	Filtered *int64  `json:"filtered"`
}

type appended struct {
	Version uint64  `json:"version"`
	Rows    int64   `json:"rows"`
	Before  int64   `json:"before"`
	Scanned int64   `json:"scanned"`
	IDSum   float64 `json:"idSum"`
}

// lanceBuild is build.cjs's report, with what Lance read of each version.
type lanceBuild struct {
	Table    string `json:"table"`
	Versions map[string][]struct {
		Version uint64 `json:"version"`
		versionRows
		Timestamp string `json:"timestamp"`
	} `json:"versions"`
	Files []string `json:"files"`
}

// verifyJob asks Lance to list every branch's versions, read every kept
// version of the plan and every tag in full, and append to each branch of
// appendTo.
func verifyJob(dir, table string, plan *Plan, tags []string, appendTo ...string) map[string]any {
	versions := map[string][]uint64{}
	for _, v := range plan.Versions {
		b := branchName(v.Branch)
		if _, ok := versions[b]; !ok {
			versions[b] = []uint64{}
		}
		if v.Keep {
			versions[b] = append(versions[b], v.Version)
		}
	}
	return map[string]any{"kind": "verify", "dir": dir, "table": table, "versions": versions, "tags": tags, "append": appendTo}
}

// checkLanceReads checks a verify result against the plan: Lance lists
// exactly the kept versions, reads every row of each as before the cleanup
// (rows[branch][version], when known), reads every tag, and appended to
// appendTo and read the new version back.
func checkLanceReads(t *testing.T, res json.RawMessage, plan *Plan, rows map[string]map[uint64]versionRows, tagRows map[string]versionRows, appendTo ...string) {
	t.Helper()
	var vr verifyResult
	if err := json.Unmarshal(res, &vr); err != nil {
		t.Fatal(err)
	}
	for _, e := range vr.Errors {
		t.Errorf("Lance: %s", e)
	}
	same := func(got, want versionRows) bool {
		return got.Rows == want.Rows && got.Scanned == want.Scanned && got.IDSum == want.IDSum
	}
	kept := map[string][]uint64{}
	for _, v := range plan.Versions {
		b := branchName(v.Branch)
		if !v.Keep {
			continue
		}
		kept[b] = append(kept[b], v.Version)
		id := VersionID{v.Branch, v.Version}
		want, known := rows[b][v.Version]
		got, read := vr.Rows[b][strconv.FormatUint(v.Version, 10)]
		switch {
		case !read:
			t.Errorf("Lance could not read kept %s", id)
		case got.Scanned != got.Rows || got.Filtered == nil || *got.Filtered != got.Scanned:
			t.Errorf("kept %s: countRows %d, a full scan %d rows, a filtered scan %v", id, got.Rows, got.Scanned, got.Filtered)
		case known && !same(got, want):
			t.Errorf("kept %s: Lance reads %+v, before the cleanup %+v", id, got, want)
		}
	}
	for b, want := range kept {
		got := vr.Listed[b]
		sort.Slice(got, func(i, j int) bool { return got[i] < got[j] })
		if !equalU64(got, want) {
			t.Errorf("%s: Lance lists versions %v, retain kept %v (removed versions must be gone)", b, got, want)
		}
	}
	for tag, want := range tagRows {
		if got, ok := vr.TagRows[tag]; !ok || !same(got, want) {
			t.Errorf("tag %s: Lance reads %+v (read: %v), want %+v", tag, got, ok, want)
		}
	}
	for _, b := range appendTo {
		a, ok := vr.Appended[b]
		if !ok || a.Rows != a.Before+1 || a.Scanned != a.Rows {
			t.Errorf("%s: Lance's append after the cleanup: %+v (done: %v)", b, a, ok)
		}
	}
}

// rowsOf turns build.cjs's per-version reads into a lookup.
func rowsOf(res lanceBuild) map[string]map[uint64]versionRows {
	out := map[string]map[uint64]versionRows{}
	for b, vs := range res.Versions {
		out[b] = map[uint64]versionRows{}
		for _, v := range vs {
			out[b][v.Version] = v.versionRows
		}
	}
	return out
}

func decodeBuild(t testing.TB, raw json.RawMessage) lanceBuild {
	t.Helper()
	var r lanceBuild
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Versions["main"]) == 0 || r.Versions["main"][0].Scanned != r.Versions["main"][0].Rows {
		t.Fatalf("build report without full reads: %+v", r.Versions["main"])
	}
	return r
}

func wantReasons(t *testing.T, plan *Plan, branch string, n uint64, keep bool, contains ...string) {
	t.Helper()
	v := versionOf(t, plan, branch, n)
	all := strings.Join(v.Reasons, "; ")
	if v.Keep != keep {
		t.Errorf("%s: keep=%v (%s), want %v", VersionID{branch, n}, v.Keep, all, keep)
	}
	for _, c := range contains {
		if !strings.Contains(all, c) {
			t.Errorf("%s: reasons %q lack %q", VersionID{branch, n}, all, c)
		}
	}
}

// gapCutoff returns a cut-off inside the largest gap between consecutive
// commit timestamps of the family (a sleep step), and the gap.
func gapCutoff(t testing.TB, d *Dataset) (time.Time, time.Duration) {
	t.Helper()
	var ts []time.Time
	bs, err := d.ListBranches(bg)
	if err != nil {
		t.Fatal(err)
	}
	dss := []*Dataset{d}
	for _, b := range bs {
		bd, _ := d.Branch(b.Name)
		dss = append(dss, bd)
	}
	for _, ds := range dss {
		vs, err := ds.Versions(bg)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range vs {
			m, err := ds.ReadManifest(bg, v)
			if err != nil {
				t.Fatal(err)
			}
			ts = append(ts, m.Timestamp)
		}
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i].Before(ts[j]) })
	var at time.Time
	var gap time.Duration
	for i := 1; i < len(ts); i++ {
		if g := ts[i].Sub(ts[i-1]); g > gap {
			gap, at = g, ts[i-1]
		}
	}
	// Lance's optimize turns its cut-off into an age and back at a later
	// moment: leave room after the earlier commit.
	return at.Add(gap / 3).Truncate(time.Millisecond), gap
}

// TestCleanupLanceReadsKeptVersions: after retain's cleanup with tags on
// main and on a branch, a fork point, a time window and keep-last, Lance
// lists exactly the kept versions, reads each with its rows from before,
// reads the tags, and appends to main and to the branch. V2 and V1 names.
func TestCleanupLanceReadsKeptVersions(t *testing.T) {
	if testing.Short() {
		t.Skip("builds datasets with real Lance")
	}
	for _, naming := range []string{"v2", "v1"} {
		t.Run(naming, func(t *testing.T) {
			dir := t.TempDir()
			db := filepath.Join(dir, "db")
			steps := []step{
				{"op": "create", "rows": 4},         // v1
				{"op": "add", "rows": 2},            // v2
				{"op": "delete", "where": "id = 1"}, // v3
				{"op": "tagCreate", "name": "old-tag", "version": 2},
				{"op": "createIndex", "column": "id"},                                        // v4
				{"op": "update", "where": "id = 2", "values": map[string]string{"v": "'u'"}}, // v5
				{"op": "branchCreate", "name": "b", "from": "main", "version": 3},            // b v3
				{"op": "add", "rows": 1, "on": "b"},                                          // b v4
				{"op": "delete", "where": "id = 0", "on": "b"},                               // b v5
				{"op": "tagCreate", "name": "b-tag", "version": 4, "on": "b"},
				{"op": "sleep", "ms": 400},
				{"op": "add", "rows": 1},              // v6
				{"op": "delete", "where": "id = 3"},   // v7
				{"op": "add", "rows": 2, "on": "b"},   // b v6
				{"op": "createIndex", "column": "id"}, // v8
				{"op": "add", "rows": 1},              // v9
			}
			res := decodeBuild(t, oracleRun(t, buildJob(db, "t", naming, steps))[0])
			s := openStore(t, dir)
			d := mustOpen(t, s, "db/t.lance")
			cut, gap := gapCutoff(t, d)
			if gap < 300*time.Millisecond {
				t.Fatalf("largest commit gap %v: the sleep step did not separate the window", gap)
			}
			plan, err := d.PlanCleanup(bg, Policy{OlderThan: cut, KeepLast: 2})
			if err != nil {
				t.Fatal(err)
			}
			wantReasons(t, plan, "", 1, false, "removed: committed")
			wantReasons(t, plan, "", 2, true, "tag old-tag")
			wantReasons(t, plan, "", 3, true, "fork point of branch b")
			wantReasons(t, plan, "", 4, false)
			wantReasons(t, plan, "", 5, false)
			wantReasons(t, plan, "", 6, true, "not older than the cut-off")
			wantReasons(t, plan, "", 8, true, "keep-last 2", "not older than the cut-off")
			wantReasons(t, plan, "", 9, true, "latest", "keep-last 2")
			wantReasons(t, plan, "b", 3, false)
			wantReasons(t, plan, "b", 4, true, "tag b-tag")
			wantReasons(t, plan, "b", 5, true, "keep-last 2")
			wantReasons(t, plan, "b", 6, true, "latest")
			if len(plan.Files) == 0 {
				t.Fatal("nothing to delete")
			}
			if _, err := d.ExecuteCleanup(bg, plan); err != nil {
				t.Fatal(err)
			}
			checkComplete(t, s, d.Root)
			rows := rowsOf(res)
			out := oracleRun(t, verifyJob(db, "t", plan, []string{"old-tag", "b-tag"}, "main", "b"))
			checkLanceReads(t, out[0], plan, rows, map[string]versionRows{"old-tag": rows["main"][2], "b-tag": rows["b"][4]}, "main", "b")
		})
	}
}

// TestCleanupBranchKeepsForkPoint: cleaning main keeps the version a
// branch forked from and every parent file the branch still reads — also
// when main itself no longer uses them, and also when the fork point's
// manifest is gone (removed by an older cleanup): the branch's own
// manifests keep them. Lance reads the branch afterwards.
func TestCleanupBranchKeepsForkPoint(t *testing.T) {
	if testing.Short() {
		t.Skip("builds datasets with real Lance")
	}
	dir := t.TempDir()
	db := filepath.Join(dir, "db")
	steps := []step{
		{"op": "create", "rows": 3}, // v1: fragment 0, ids 0-2
		{"op": "add", "rows": 2},    // v2: fragment 1
		{"op": "branchCreate", "name": "b", "from": "main", "version": 2},            // b v2
		{"op": "add", "rows": 1, "on": "b"},                                          // b v3
		{"op": "delete", "where": "id < 3"},                                          // v3: fragment 0 leaves main
		{"op": "add", "rows": 1},                                                     // v4
		{"op": "update", "where": "id = 3", "values": map[string]string{"v": "'u'"}}, // v5
	}
	res := decodeBuild(t, oracleRun(t, buildJob(db, "t", "v2", steps))[0])
	s := openStore(t, dir)
	d := mustOpen(t, s, "db/t.lance")
	// The data file of fragment 0: main's latest no longer references it,
	// the branch does (through a base path to main).
	v1, _ := d.VersionAt(bg, 1)
	m1, err := d.ReadManifest(bg, v1)
	if err != nil {
		t.Fatal(err)
	}
	frag0 := filesOf(m1, KindData)[0].Key
	latest, _ := d.Latest(bg)
	ml, err := d.ReadManifest(bg, latest)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range ml.Files() {
		if f.Key == frag0 {
			t.Fatalf("main's latest still references %s: the workload does not exercise inheritance", frag0)
		}
	}

	plan, err := d.PlanCleanup(bg, Policy{KeepLast: 1})
	if err != nil {
		t.Fatal(err)
	}
	wantReasons(t, plan, "", 2, true, "fork point of branch b")
	for _, n := range []uint64{1, 3, 4} {
		wantReasons(t, plan, "", n, false)
	}
	wantReasons(t, plan, "b", 2, false)
	wantReasons(t, plan, "b", 3, true, "latest")
	for _, f := range plan.Files {
		if f.Key == frag0 {
			t.Fatalf("the plan deletes %s, which the branch and the fork point use", frag0)
		}
	}
	if _, err := d.ExecuteCleanup(bg, plan); err != nil {
		t.Fatal(err)
	}
	checkComplete(t, s, d.Root)
	rows := rowsOf(res)
	checkLanceReads(t, oracleRun(t, verifyJob(db, "t", plan, nil))[0], plan, rows, nil)

	// Now without the fork point: an older cleanup (or a hand) removed
	// main v2's manifest. The branch's manifests still keep fragment 0.
	v2, _ := d.VersionAt(bg, 2)
	if err := os.Remove(filepath.Join(dir, v2.Key)); err != nil {
		t.Fatal(err)
	}
	plan2, err := d.PlanCleanup(bg, Policy{KeepLast: 1, SafetyWindow: -1})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(plan2.Notes, "\n"), "fork point main v2 of branch \"b\" no longer exists") {
		t.Errorf("notes %q", plan2.Notes)
	}
	for _, f := range plan2.Files {
		if f.Key == frag0 {
			t.Fatalf("without the fork point the plan deletes %s, which the branch reads", frag0)
		}
	}
	if _, err := d.ExecuteCleanup(bg, plan2); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Stat(bg, frag0); err != nil {
		t.Fatalf("%s: %v", frag0, err)
	}
	checkLanceReads(t, oracleRun(t, verifyJob(db, "t", plan2, nil, "b", "main"))[0], plan2, rows, nil, "b", "main")
}

// TestCleanupCrashAfterManifests stops an execution after the manifests
// are deleted (the next DeleteMany fails): Lance still reads every kept
// version and the removed ones are gone; what is left is unreferenced,
// kept while young, and collected by a later plan past the safety window.
func TestCleanupCrashAfterManifests(t *testing.T) {
	if testing.Short() {
		t.Skip("builds datasets with real Lance")
	}
	dir := t.TempDir()
	db := filepath.Join(dir, "db")
	steps := []step{
		{"op": "create", "rows": 3},
		{"op": "add", "rows": 2},
		{"op": "delete", "where": "id < 3"}, // fragment 0 leaves
		{"op": "createIndex", "column": "id"},
		{"op": "add", "rows": 1},
		{"op": "delete", "where": "id = 3"},
		{"op": "createIndex", "column": "id"}, // a new index folder
		{"op": "update", "where": "id = 4", "values": map[string]string{"v": "'u'"}},
	}
	res := decodeBuild(t, oracleRun(t, buildJob(db, "t", "v2", steps))[0])
	g := &guardDriver{okBatches: 1}
	s := guardedStore(t, dir, g)
	d := mustOpen(t, s, "db/t.lance")
	plan, err := d.PlanCleanup(bg, Policy{KeepLast: 1})
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[FileKind]int{}
	for _, f := range plan.Files {
		kinds[f.Kind]++
	}
	if kinds[KindData] == 0 || kinds[KindIndex] == 0 || kinds[KindDeletion] == 0 || kinds[KindTransaction] == 0 {
		t.Fatalf("the plan deletes %v: the workload should leave data, index, deletion and transaction files to removed versions", kinds)
	}
	before := dirFiles(t, dir)
	out, err := d.ExecuteCleanup(bg, plan)
	if err == nil || out.ManifestsDeleted != plan.Totals.ManifestsToDelete || out.FilesDeleted != out.ManifestsDeleted {
		t.Fatalf("execution with a crash after the manifests: %+v, %v", out, err)
	}
	t.Logf("stopped: %v", err)
	after := dirFiles(t, dir)
	if n := len(gone(before, after)); n != plan.Totals.ManifestsToDelete {
		t.Fatalf("%d objects gone, want the %d manifests", n, plan.Totals.ManifestsToDelete)
	}
	rows := rowsOf(res)
	checkLanceReads(t, oracleRun(t, verifyJob(db, "t", plan, nil))[0], plan, rows, nil)

	// The leftovers lost their proof with the manifests: young, they stay.
	g.okBatches = -1
	young, err := d.PlanCleanup(bg, Policy{KeepLast: 1})
	if err != nil {
		t.Fatal(err)
	}
	left := plan.Totals.FilesToDelete - plan.Totals.ManifestsToDelete
	if len(young.Files) != 0 || young.Totals.YoungFiles != left {
		t.Errorf("right after the crash: %d files planned, %d young; want 0 and %d", len(young.Files), young.Totals.YoungFiles, left)
	}
	// Past the safety window the next plan collects exactly them.
	later, err := d.PlanCleanup(bg, Policy{KeepLast: 1, Now: func() time.Time { return time.Now().Add(DefaultSafetyWindow + time.Hour) }})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, f := range plan.Files[plan.Totals.ManifestsToDelete:] {
		want = append(want, f.Key)
	}
	sort.Strings(want)
	if got := planKeys(later); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("the later plan collects\n  %s\nwant the leftovers\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	if _, err := d.ExecuteCleanup(bg, later); err != nil {
		t.Fatal(err)
	}
	checkComplete(t, s, d.Root)
	checkLanceReads(t, oracleRun(t, verifyJob(db, "t", later, nil, "main"))[0], later, rows, nil, "main")
}

// TestCleanupNestedBranchNames: Lance stores branch "exp/data" at
// tree/exp/data/ — inside branch exp's own data/ folder. exp's cleanup
// must leave that branch's objects to that branch's cleanup (Lance's own
// cleanup of exp would take its .lance files for exp's data files). With
// no safety window, so that anything mistaken for garbage would go, Lance
// still reads every kept version of all three branches afterwards.
func TestCleanupNestedBranchNames(t *testing.T) {
	if testing.Short() {
		t.Skip("builds datasets with real Lance")
	}
	dir := t.TempDir()
	db := filepath.Join(dir, "db")
	steps := []step{
		{"op": "create", "rows": 3},
		{"op": "add", "rows": 2},
		{"op": "branchCreate", "name": "exp", "from": "main", "version": 2},
		{"op": "add", "rows": 1, "on": "exp"},
		{"op": "branchCreate", "name": "exp/data", "from": "exp", "version": 3, "on": "exp"},
		{"op": "add", "rows": 1, "on": "exp/data"},
		{"op": "delete", "where": "id = 0", "on": "exp/data"},
		{"op": "createIndex", "column": "id", "on": "exp/data"},
		{"op": "add", "rows": 1, "on": "exp/data"},
		{"op": "createIndex", "column": "id", "on": "exp/data"},
		{"op": "add", "rows": 1, "on": "exp"},            // id 8, in its own fragment
		{"op": "delete", "where": "id = 8", "on": "exp"}, // the fragment leaves exp
		{"op": "add", "rows": 1, "on": "exp"},
	}
	res := decodeBuild(t, oracleRun(t, buildJob(db, "t", "v2", steps))[0])
	s := openStore(t, dir)
	d := mustOpen(t, s, "db/t.lance")
	// exp/data's own data files lie in exp's data/ folder.
	nested := filesOfLatest(t, d, "exp/data", KindData)
	if !strings.HasPrefix(nested, d.Key("tree/exp/data/data/")) {
		t.Fatalf("branch exp/data's data file %s does not lie inside exp's data/ folder", nested)
	}
	plan, err := d.PlanCleanup(bg, Policy{KeepLast: 1, SafetyWindow: -1})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, f := range plan.Files {
		if seen[f.Key] {
			t.Errorf("%s is planned twice", f.Key)
		}
		seen[f.Key] = true
	}
	if plan.Totals.VersionsRemoved == 0 || len(plan.Files) == 0 {
		t.Fatalf("nothing to clean: %+v", plan.Totals)
	}
	// exp's own garbage, in the folder it shares with exp/data, still goes.
	own := 0
	for _, f := range plan.Files {
		if rest, ok := strings.CutPrefix(f.Key, d.Key("tree/exp/data/")); ok && !strings.Contains(rest, "/") {
			if f.Kind != KindData || !f.Verified {
				t.Errorf("%+v", f)
			}
			own++
		}
	}
	if own != 1 {
		t.Errorf("%d of exp's own data files planned, want the one of the fragment it deleted", own)
	}
	if _, err := d.ExecuteCleanup(bg, plan); err != nil {
		t.Fatal(err)
	}
	checkComplete(t, s, d.Root)
	checkLanceReads(t, oracleRun(t, verifyJob(db, "t", plan, nil, "main", "exp", "exp/data"))[0], plan, rowsOf(res), nil, "main", "exp", "exp/data")
}

// filesOfLatest returns the key of a file of kind in branch's latest
// version (one that lives in the branch's own folder).
func filesOfLatest(t testing.TB, d *Dataset, branch string, kind FileKind) string {
	t.Helper()
	bd, err := d.Branch(branch)
	if err != nil {
		t.Fatal(err)
	}
	v, err := bd.Latest(bg)
	if err != nil {
		t.Fatal(err)
	}
	m, err := bd.ReadManifest(bg, v)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range filesOf(m, kind) {
		if strings.HasPrefix(f.Key, bd.Root+"/data/") {
			return f.Key
		}
	}
	t.Fatalf("%s: no %s file of its own", branch, kind)
	return ""
}
