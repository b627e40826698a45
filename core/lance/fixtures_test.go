package lance

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/retain-dev/retain/adapters/localfs"
	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/internal/lancetest"
)

var bg = context.Background()

// step is one step of internal/lancetest/build.cjs.
type step map[string]any

// fixtureSpec is a dataset the repo's Node script builds with real Lance.
type fixtureSpec struct {
	Name   string
	Naming string // "v1" or "v2"
	Steps  []step
}

// fixtureSpecs are the committed fixtures (see testdata/README.md).
var fixtureSpecs = []fixtureSpec{
	{Name: "v2-appends", Naming: "v2", Steps: []step{
		{"op": "create", "rows": 3}, {"op": "add", "rows": 2}, {"op": "add", "rows": 2}}},
	// The same steps built again: same version numbers, different commits.
	{Name: "v2-appends-again", Naming: "v2", Steps: []step{
		{"op": "create", "rows": 3}, {"op": "add", "rows": 2}, {"op": "add", "rows": 2}}},
	{Name: "v1-naming", Naming: "v1", Steps: []step{
		{"op": "create", "rows": 3}, {"op": "add", "rows": 2}, {"op": "delete", "where": "id = 1"}}},
	{Name: "deletes", Naming: "v2", Steps: []step{
		{"op": "create", "rows": 6}, {"op": "delete", "where": "id = 1"}, {"op": "delete", "where": "id = 2"},
		{"op": "add", "rows": 2}, {"op": "delete", "where": "id = 7"}}},
	{Name: "update", Naming: "v2", Steps: []step{
		{"op": "create", "rows": 4}, {"op": "update", "where": "id = 2", "values": map[string]string{"v": "'changed'"}}}},
	{Name: "index", Naming: "v2", Steps: []step{
		{"op": "create", "rows": 5}, {"op": "createIndex", "column": "id"}, {"op": "add", "rows": 2},
		{"op": "createIndex", "column": "id"}}},
	{Name: "branch-tag", Naming: "v2", Steps: []step{
		{"op": "create", "rows": 3}, {"op": "add", "rows": 2},
		{"op": "tagCreate", "name": "v2-tag", "version": 2},
		{"op": "branchCreate", "name": "exp", "from": "main", "version": 2},
		{"op": "add", "rows": 2, "on": "exp"}, {"op": "delete", "where": "id = 0", "on": "exp"},
		{"op": "tagCreate", "name": "exp-tag", "version": 3, "on": "exp"},
		{"op": "branchCreate", "name": "team/x", "from": "exp", "version": 4, "on": "exp"},
		{"op": "add", "rows": 1, "on": "team/x"},
		{"op": "add", "rows": 1}}},
	{Name: "optimized", Naming: "v2", Steps: []step{
		{"op": "create", "rows": 2}, {"op": "add", "rows": 1}, {"op": "add", "rows": 1}, {"op": "add", "rows": 1},
		{"op": "delete", "where": "id = 0"}, {"op": "createIndex", "column": "id"},
		{"op": "optimize", "cleanupOlderThanMs": 0, "deleteUnverified": true}, {"op": "add", "rows": 1}}},
}

// buildResult is build.cjs's output.
type buildResult struct {
	Table string `json:"table"`
	Steps []struct {
		Op      string  `json:"op"`
		On      string  `json:"on"`
		Version *uint64 `json:"version"`
	} `json:"steps"`
	Versions map[string][]struct {
		Version   uint64 `json:"version"`
		Rows      int64  `json:"rows"`
		Timestamp string `json:"timestamp"`
	} `json:"versions"`
	Tags map[string]struct {
		Version      uint64 `json:"version"`
		ManifestSize int64  `json:"manifestSize"`
	} `json:"tags"`
	Branches map[string]struct {
		ParentBranch  *string `json:"parentBranch"`
		ParentVersion uint64  `json:"parentVersion"`
		ManifestSize  int64   `json:"manifestSize"`
	} `json:"branches"`
	Files []string `json:"files"`
}

// build runs build.cjs for spec with the table under dir.
func build(t testing.TB, dir string, spec fixtureSpec) buildResult {
	t.Helper()
	var out buildResult
	lancetest.Node(t, "build.cjs", map[string]any{"dir": dir, "table": spec.Name, "naming": spec.Naming, "steps": spec.Steps}, &out)
	return out
}

// The benchmark manifest: a table of benchFragments single-row appends.
const (
	benchFragments = 300
	benchManifest  = "testdata/bench/300-fragments.manifest"
)

// fixtureBuildDir is where the generator builds, so the absolute base paths
// Lance writes into branch manifests are the same on every regeneration.
const fixtureBuildDir = "/tmp/retain-lance-fixtures"

// TestRegenerateFixtures rebuilds testdata/ with real Lance:
//
//	RETAIN_REGEN_FIXTURES=1 go test -run TestRegenerateFixtures ./core/lance/
func TestRegenerateFixtures(t *testing.T) {
	if os.Getenv("RETAIN_REGEN_FIXTURES") != "1" {
		t.Skip("set RETAIN_REGEN_FIXTURES=1 to rebuild testdata/ with real Lance")
	}
	if err := os.RemoveAll(fixtureBuildDir); err != nil {
		t.Fatal(err)
	}
	results := map[string]buildResult{}
	for _, spec := range fixtureSpecs {
		dir := filepath.Join(fixtureBuildDir, spec.Name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		res := build(t, dir, spec)
		dst := filepath.Join("testdata", spec.Name+".lance")
		if err := os.RemoveAll(dst); err != nil {
			t.Fatal(err)
		}
		if err := os.CopyFS(dst, os.DirFS(res.Table)); err != nil {
			t.Fatal(err)
		}
		res.Table = spec.Name + ".lance"
		results[spec.Name] = res
	}
	// The benchmark's manifest: the latest of 300 single-row appends.
	dir := filepath.Join(fixtureBuildDir, "bench")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var res buildResult
	lancetest.Node(t, "build.cjs", map[string]any{"dir": dir, "table": "m", "skipVersions": true,
		"steps": []step{{"op": "create", "rows": 1}, {"op": "addMany", "count": benchFragments - 1}}}, &res)
	mb, err := os.ReadFile(filepath.Join(res.Table, versionsDir, ManifestName(benchFragments, NamingV2)))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join("testdata", "bench"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(benchManifest, mb, 0o644); err != nil {
		t.Fatal(err)
	}

	b, err := json.MarshalIndent(results, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join("testdata", "fixtures.json"), append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}

// fixtureResults reads testdata/fixtures.json.
func fixtureResults(t testing.TB) map[string]buildResult {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "fixtures.json"))
	if err != nil {
		t.Fatalf("reading the fixtures' expectations: %v (regenerate with RETAIN_REGEN_FIXTURES=1)", err)
	}
	var out map[string]buildResult
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// openStore opens a localfs store at dir.
func openStore(t testing.TB, dir string) *storage.Store {
	t.Helper()
	d, err := localfs.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	s, err := storage.NewStore(bg, "localfs", d)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// openFixture copies a committed fixture into a fresh store (localfs keeps
// its own files in the store root, so fixtures are never opened in place)
// and opens the dataset.
func openFixture(t testing.TB, name string) (*Dataset, string) {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(filepath.Join(dir, name+".lance"), os.DirFS(filepath.Join("testdata", name+".lance"))); err != nil {
		t.Fatal(err)
	}
	return mustOpen(t, openStore(t, dir), name+".lance"), dir
}

func mustOpen(t testing.TB, s *storage.Store, root string) *Dataset {
	t.Helper()
	d, err := Open(s, root)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// branchRoots lists the dataset roots of a family: the main root and every
// tree/<branch> folder that holds _versions/.
func branchRoots(t testing.TB, s *storage.Store, root string) map[string]string {
	t.Helper()
	objs, err := s.List(bg, root+"/tree/", 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{"main": root}
	for _, o := range objs {
		rel := strings.TrimPrefix(o.Key, root+"/tree/")
		if i := strings.Index(rel, "/_versions/"); i > 0 {
			out[rel[:i]] = root + "/tree/" + rel[:i]
		}
	}
	return out
}

// checkComplete is the completeness check against real Lance: every file a
// version of any branch references exists, and every object in the dataset
// folder is referenced by some version, or is Lance metadata retain reads
// elsewhere (_refs/, version hints). It returns the union of references.
func checkComplete(t *testing.T, s *storage.Store, root string) *RefSet {
	t.Helper()
	all := NewRefSet()
	for branch, broot := range branchRoots(t, s, root) {
		d := mustOpen(t, s, broot)
		vs, err := d.Versions(bg)
		if err != nil {
			t.Fatalf("%s: %v", branch, err)
		}
		for _, v := range vs {
			m, err := d.ReadManifest(bg, v)
			if err != nil {
				t.Fatalf("%s v%d: %v", branch, v.N, err)
			}
			for _, f := range m.Files() {
				if f.Outside {
					t.Errorf("%s v%d: %s is outside the dataset family", branch, v.N, f.Key)
					continue
				}
				if f.Prefix {
					objs, err := s.List(bg, f.Key, 0)
					if err != nil || len(objs) == 0 {
						t.Errorf("%s v%d: referenced folder %s is empty or unreadable (%v)", branch, v.N, f.Key, err)
					}
					continue
				}
				info, err := s.Stat(bg, f.Key)
				if err != nil && f.Kind == KindTransaction && storage.KindOf(err) == storage.ErrNotFound && v.N != vs[len(vs)-1].N {
					// Lance's cleanup keeps a child branch's fork-point
					// manifest but deletes its transaction file (not
					// needed to read the version).
					t.Logf("%s v%d: transaction file %s is gone (Lance's cleanup kept the manifest for a branch)", branch, v.N, f.Key)
					continue
				}
				if err != nil {
					t.Errorf("%s v%d: referenced %s %s does not exist: %v", branch, v.N, f.Kind, f.Key, err)
					continue
				}
				if f.Size >= 0 && info.Size != f.Size {
					t.Errorf("%s v%d: %s is %d bytes, the manifest says %d", branch, v.N, f.Key, info.Size, f.Size)
				}
			}
			all.Add(m.Files()...)
		}
	}
	objs, err := s.List(bg, root+"/", 0)
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, o := range objs {
		rel := strings.TrimPrefix(o.Key, root+"/")
		if all.Contains(o.Key) || strings.HasPrefix(rel, "_refs/") || isVersionHint(rel) {
			continue
		}
		left = append(left, rel)
	}
	if len(left) > 0 {
		t.Errorf("%s: %d object(s) no version references:\n  %s", root, len(left), strings.Join(left, "\n  "))
	}
	return all
}

// isVersionHint matches _versions/latest_version_hint.json of the main
// dataset or of a branch.
func isVersionHint(rel string) bool {
	return rel == versionsDir+"/"+latestHintName || strings.HasPrefix(rel, "tree/") && strings.HasSuffix(rel, "/"+versionsDir+"/"+latestHintName)
}

// TestFixturesComplete runs the completeness check on every committed
// fixture (pure Go).
func TestFixturesComplete(t *testing.T) {
	for _, spec := range fixtureSpecs {
		t.Run(spec.Name, func(t *testing.T) {
			d, _ := openFixture(t, spec.Name)
			checkComplete(t, d.Store, d.Root)
		})
	}
}

// TestFixturesMatchLance compares retain's versions of every branch of every
// fixture with what real Lance listed when it built them.
func TestFixturesMatchLance(t *testing.T) {
	results := fixtureResults(t)
	for _, spec := range fixtureSpecs {
		t.Run(spec.Name, func(t *testing.T) {
			res, ok := results[spec.Name]
			if !ok {
				t.Fatalf("no expectations for %s: regenerate the fixtures", spec.Name)
			}
			d, _ := openFixture(t, spec.Name)
			compareWithLance(t, d, res, spec.Naming)
		})
	}
}

// compareWithLance checks versions, timestamps, tags' manifest sizes and
// the file list against build.cjs's report.
func compareWithLance(t *testing.T, d *Dataset, res buildResult, naming string) {
	t.Helper()
	roots := branchRoots(t, d.Store, d.Root)
	if len(roots) != len(res.Versions) {
		t.Errorf("retain sees branches %v, Lance listed %d", keys(roots), len(res.Versions))
	}
	for branch, want := range res.Versions {
		broot, ok := roots[branch]
		if !ok {
			t.Errorf("branch %s: no dataset under tree/", branch)
			continue
		}
		bd := mustOpen(t, d.Store, broot)
		vs, err := bd.Versions(bg)
		if err != nil {
			t.Fatalf("%s: %v", branch, err)
		}
		if len(vs) != len(want) {
			t.Errorf("%s: retain lists %d versions, Lance %d", branch, len(vs), len(want))
			continue
		}
		for i, v := range vs {
			if v.N != want[i].Version {
				t.Errorf("%s: version %d is %d, Lance says %d", branch, i, v.N, want[i].Version)
			}
			// Lance 12 names a branch's manifests V2 even when main is V1.
			if (naming == "v1" && branch == "main") != (v.Naming == NamingV1) {
				t.Errorf("%s v%d: naming %s, built with %s", branch, v.N, v.Naming, naming)
			}
			m, err := bd.ReadManifest(bg, v)
			if err != nil {
				t.Fatalf("%s v%d: %v", branch, v.N, err)
			}
			// Lance's listVersions reports milliseconds.
			if got := m.Timestamp.UTC().Format("2006-01-02T15:04:05.000Z"); got != want[i].Timestamp {
				t.Errorf("%s v%d: timestamp %s, Lance says %s", branch, v.N, got, want[i].Timestamp)
			}
			wantBranch := branch
			if branch == "main" {
				wantBranch = ""
			}
			if m.Branch != wantBranch {
				t.Errorf("%s v%d: manifest branch %q", branch, v.N, m.Branch)
			}
		}
	}
	// Lance 12 records a tag's manifest size: it must be the exact size of
	// that version's manifest on some branch (Node does not say which).
	for name, tag := range res.Tags {
		found := false
		for _, broot := range roots {
			if v, err := mustOpen(t, d.Store, broot).VersionAt(bg, tag.Version); err == nil && v.Info.Size == tag.ManifestSize {
				found = true
			}
		}
		if !found {
			t.Errorf("tag %s: no manifest of version %d is %d bytes", name, tag.Version, tag.ManifestSize)
		}
	}
	for name, br := range res.Branches {
		// A branch file records the size of the manifest it forked from:
		// the parent branch's at parentVersion.
		parent := "main"
		if br.ParentBranch != nil {
			parent = *br.ParentBranch
		}
		v, err := mustOpen(t, d.Store, roots[parent]).VersionAt(bg, br.ParentVersion)
		if err != nil || v.Info.Size != br.ManifestSize {
			t.Errorf("branch %s: %s v%d: %+v, %v; Lance says %d bytes", name, parent, br.ParentVersion, v.Info, err, br.ManifestSize)
		}
	}
	if res.Files != nil {
		objs, err := d.Store.List(bg, d.Root+"/", 0)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, o := range objs {
			got = append(got, strings.TrimPrefix(o.Key, d.Root+"/"))
		}
		sort.Strings(got)
		if strings.Join(got, "\n") != strings.Join(res.Files, "\n") {
			t.Errorf("the store lists\n%s\nLance's folder holds\n%s", strings.Join(got, "\n"), strings.Join(res.Files, "\n"))
		}
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestFreshDatasetsComplete builds every fixture spec anew with real Lance
// and runs the same checks, so the fixtures cannot drift from Lance.
func TestFreshDatasetsComplete(t *testing.T) {
	if testing.Short() {
		t.Skip("builds datasets with real Lance")
	}
	for _, spec := range fixtureSpecs {
		if spec.Name == "v2-appends-again" {
			continue
		}
		t.Run(spec.Name, func(t *testing.T) {
			dir := t.TempDir()
			res := build(t, filepath.Join(dir, "db"), spec)
			s := openStore(t, dir)
			d := mustOpen(t, s, "db/"+spec.Name+".lance")
			checkComplete(t, s, d.Root)
			compareWithLance(t, d, res, spec.Naming)
		})
	}
}

// fixtureManifests returns the bytes of every fixture manifest in
// testdata/ (not the benchmark's large one: a 25 KB seed makes the fuzzer
// spend its time minimizing).
func fixtureManifests(t testing.TB) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir("testdata", func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() && e.Name() == "bench" {
			return filepath.SkipDir
		}
		if !e.IsDir() && strings.HasSuffix(p, manifestSuffix) {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[p] = b
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatal("no fixture manifests under testdata/")
	}
	return out
}

// randomSpec is a seeded random workload of appends, deletes, updates,
// index builds, a branch with its own writes, and Lance's optimize (which
// runs Lance's own cleanup).
func randomSpec(seed int64, naming string) fixtureSpec {
	r := rand.New(rand.NewSource(seed))
	spec := fixtureSpec{Name: fmt.Sprintf("w%d", seed), Naming: naming}
	add := func(s step) { spec.Steps = append(spec.Steps, s) }
	rows := 3 + r.Intn(3)
	add(step{"op": "create", "rows": rows})
	branched := false
	for i := 0; i < 10; i++ {
		switch k := r.Intn(10); {
		case k < 3:
			n := 1 + r.Intn(3)
			add(step{"op": "add", "rows": n})
			rows += n
		case k < 5:
			add(step{"op": "delete", "where": fmt.Sprintf("id = %d", r.Intn(rows))})
		case k < 6:
			add(step{"op": "update", "where": fmt.Sprintf("id = %d", r.Intn(rows)), "values": map[string]string{"v": "'u'"}})
		case k < 7:
			add(step{"op": "createIndex", "column": "id"})
		case k < 8 && !branched:
			branched = true
			add(step{"op": "branchCreate", "name": "b", "from": "main"})
			add(step{"op": "add", "rows": 1, "on": "b"})
			add(step{"op": "delete", "where": "id = 0", "on": "b"})
		default:
			add(step{"op": "optimize", "cleanupOlderThanMs": 0, "deleteUnverified": true})
		}
	}
	return spec
}

// TestRandomWorkloadsComplete runs the completeness check on seeded random
// workloads built by real Lance.
func TestRandomWorkloadsComplete(t *testing.T) {
	if testing.Short() {
		t.Skip("builds datasets with real Lance")
	}
	for seed := int64(1); seed <= 4; seed++ {
		naming := "v2"
		if seed == 3 {
			naming = "v1"
		}
		spec := randomSpec(seed, naming)
		t.Run(spec.Name, func(t *testing.T) {
			dir := t.TempDir()
			res := build(t, filepath.Join(dir, "db"), spec)
			s := openStore(t, dir)
			d := mustOpen(t, s, "db/"+spec.Name+".lance")
			checkComplete(t, s, d.Root)
			compareWithLance(t, d, res, spec.Naming)
		})
	}
}
