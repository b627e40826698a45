package lance

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retain-dev/retain/adapters/localfs"
	"github.com/retain-dev/retain/core/storage"
)

// guardDriver wraps a store's driver for cleanup tests: it can fail the
// test on any delete (the fail-closed cases), fail DeleteMany calls after
// the first n (a crash part-way), fail single keys, or fail reads.
type guardDriver struct {
	storage.Driver
	t             testing.TB
	forbidDeletes bool
	// okBatches >= 0: DeleteMany calls after that many fail whole.
	okBatches int
	failKey   map[string]bool
	failGet   map[string]error

	mu      sync.Mutex
	batches int
	deleted []string
}

func (g *guardDriver) Delete(ctx context.Context, key string, opts storage.DeleteOptions) error {
	if g.forbidDeletes {
		g.t.Errorf("cleanup deleted %s: it must refuse with nothing deleted", key)
		return storage.Errorf("delete", key, storage.ErrPermissionDenied, "the test forbids deletes")
	}
	return g.Driver.Delete(ctx, key, opts)
}

func (g *guardDriver) DeleteMany(ctx context.Context, keys []string) ([]storage.DeleteResult, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.forbidDeletes {
		g.t.Errorf("cleanup deleted %d objects (%s, ...): it must refuse with nothing deleted", len(keys), keys[0])
		return nil, storage.Errorf("delete-many", "", storage.ErrPermissionDenied, "the test forbids deletes")
	}
	g.batches++
	if g.okBatches >= 0 && g.batches > g.okBatches {
		return nil, storage.Errorf("delete-many", "", storage.ErrUnavailable, "simulated crash after %d batch(es)", g.okBatches)
	}
	var send []string
	for _, k := range keys {
		if !g.failKey[k] {
			send = append(send, k)
		}
	}
	res, err := g.Driver.DeleteMany(ctx, send)
	if err != nil {
		return nil, err
	}
	out := make([]storage.DeleteResult, 0, len(keys))
	for _, k := range keys {
		if g.failKey[k] {
			out = append(out, storage.DeleteResult{Key: k, Err: storage.Errorf("delete", k, storage.ErrPermissionDenied, "simulated")})
			continue
		}
		out = append(out, res[0])
		res = res[1:]
		g.deleted = append(g.deleted, k)
	}
	return out, nil
}

func (g *guardDriver) Get(ctx context.Context, key string) (*storage.Reader, error) {
	if err := g.failGet[key]; err != nil {
		return nil, err
	}
	return g.Driver.Get(ctx, key)
}

// guardedStore opens a localfs store over dir through a guardDriver.
func guardedStore(t testing.TB, dir string, g *guardDriver) *storage.Store {
	t.Helper()
	d, err := localfs.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	g.t, g.Driver = t, d
	s, err := storage.NewStore(bg, "localfs", g)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// copyFixture copies a committed fixture into a fresh directory.
func copyFixture(t testing.TB, name string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(filepath.Join(dir, name+".lance"), os.DirFS(filepath.Join("testdata", name+".lance"))); err != nil {
		t.Fatal(err)
	}
	return dir
}

// dirFiles lists every regular file under dir (relative, with sizes),
// without the localfs adapter's own folder.
func dirFiles(t testing.TB, dir string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() && strings.HasPrefix(e.Name(), ".retain") {
			return filepath.SkipDir
		}
		if e.Type().IsRegular() {
			info, err := e.Info()
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(dir, p)
			out[filepath.ToSlash(rel)] = info.Size()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sortedKeys(m map[string]int64) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// gone returns the files of before that are not in after.
func gone(before, after map[string]int64) []string {
	var out []string
	for k := range before {
		if _, ok := after[k]; !ok {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

func planKeys(p *Plan) []string {
	var out []string
	for _, f := range p.Files {
		out = append(out, f.Key)
	}
	sort.Strings(out)
	return out
}

func versionOf(t testing.TB, p *Plan, branch string, n uint64) PlannedVersion {
	t.Helper()
	for _, v := range p.Versions {
		if v.Branch == branch && v.Version == n {
			return v
		}
	}
	t.Fatalf("the plan does not list %s", VersionID{branch, n})
	return PlannedVersion{}
}

// keptFilesExist checks that every file a kept version of the plan
// references still exists with its recorded size.
func keptFilesExist(t *testing.T, d *Dataset, p *Plan) {
	t.Helper()
	for _, pv := range p.Versions {
		if !pv.Keep {
			continue
		}
		bd := d
		if pv.Branch != "" {
			bd, _ = d.Branch(pv.Branch)
		}
		v, err := bd.VersionAt(bg, pv.Version)
		if err != nil {
			t.Errorf("kept %s: %v", VersionID{pv.Branch, pv.Version}, err)
			continue
		}
		m, err := bd.ReadManifest(bg, v)
		if err != nil {
			t.Errorf("kept %s: %v", VersionID{pv.Branch, pv.Version}, err)
			continue
		}
		for _, f := range m.Files() {
			if f.Outside {
				continue
			}
			if f.Prefix {
				if objs, err := d.Store.List(bg, f.Key, 0); err != nil || len(objs) == 0 {
					t.Errorf("kept %s: index folder %s is gone", VersionID{pv.Branch, pv.Version}, f.Key)
				}
				continue
			}
			info, err := d.Store.Stat(bg, f.Key)
			if err != nil {
				t.Errorf("kept %s: %s %s: %v", VersionID{pv.Branch, pv.Version}, f.Kind, f.Key, err)
			} else if f.Size >= 0 && info.Size != f.Size {
				t.Errorf("kept %s: %s is %d bytes, want %d", VersionID{pv.Branch, pv.Version}, f.Key, info.Size, f.Size)
			}
		}
	}
}

// TestPlanCleanupBranchTagFixture plans the fixture with tags and two
// levels of branches keeping only what is pinned, checks every decision
// and reason and every file to delete, executes, and checks that every
// kept version is complete and a second plan finds nothing.
func TestPlanCleanupBranchTagFixture(t *testing.T) {
	dir := copyFixture(t, "branch-tag")
	s := guardedStore(t, dir, &guardDriver{okBatches: -1})
	d := mustOpen(t, s, "branch-tag.lance")
	before := dirFiles(t, dir)

	plan, err := d.PlanCleanup(bg, Policy{KeepLast: 1})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		branch  string
		n       uint64
		keep    bool
		reasons string
	}{
		{"", 1, false, "removed: not among the last 1; not the latest, tagged, a fork point or an extra root"},
		{"", 2, true, "tag v2-tag; fork point of branch exp"},
		{"", 3, true, "latest; keep-last 1"},
		{"exp", 2, false, "removed: not among the last 1; not the latest, tagged, a fork point or an extra root"},
		{"exp", 3, true, "tag exp-tag"},
		{"exp", 4, true, "latest; keep-last 1; fork point of branch team/x"},
		{"team/x", 4, false, "removed: not among the last 1; not the latest, tagged, a fork point or an extra root"},
		{"team/x", 5, true, "latest; keep-last 1"},
	}
	if len(plan.Versions) != len(want) {
		t.Fatalf("the plan lists %d versions, want %d: %+v", len(plan.Versions), len(want), plan.Versions)
	}
	for i, w := range want {
		v := plan.Versions[i]
		if v.Branch != w.branch || v.Version != w.n || v.Keep != w.keep || strings.Join(v.Reasons, "; ") != w.reasons {
			t.Errorf("version %d: %s keep=%v %q; want %s keep=%v %q", i, VersionID{v.Branch, v.Version}, v.Keep,
				strings.Join(v.Reasons, "; "), VersionID{w.branch, w.n}, w.keep, w.reasons)
		}
	}
	// What goes: the three removed manifests and their transaction files.
	// Every data and deletion file is still used: main v1's data by main
	// v2 and both branches (through base paths), exp's deletion file by
	// exp v4 and team/x.
	var wantKeys []string
	for _, id := range []VersionID{{"", 1}, {"exp", 2}, {"team/x", 4}} {
		bd := d
		if id.Branch != "" {
			bd, _ = d.Branch(id.Branch)
		}
		v, err := bd.VersionAt(bg, id.Version)
		if err != nil {
			t.Fatal(err)
		}
		m, err := bd.ReadManifest(bg, v)
		if err != nil {
			t.Fatal(err)
		}
		wantKeys = append(wantKeys, v.Key, bd.Key("_transactions/"+m.TransactionFile))
	}
	sort.Strings(wantKeys)
	if got := planKeys(plan); strings.Join(got, "\n") != strings.Join(wantKeys, "\n") {
		t.Errorf("files to delete:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(wantKeys, "\n  "))
	}
	for i, f := range plan.Files {
		if i < 3 && (f.Kind != KindManifest || !strings.HasPrefix(f.Reason, "manifest of removed version")) {
			t.Errorf("file %d: %+v; the removed manifests come first", i, f)
		}
		if !f.Verified || f.RemovedBy == nil || f.Size <= 0 {
			t.Errorf("%s: %+v: every file goes because a removed version references it, with its size", f.Key, f)
		}
		if f.Kind == KindTransaction && !strings.HasPrefix(f.Reason, "referenced only by removed version ") {
			t.Errorf("%s: reason %q", f.Key, f.Reason)
		}
	}
	tot := plan.Totals
	if tot.VersionsKept != 5 || tot.VersionsRemoved != 3 || tot.ManifestsToDelete != 3 || tot.FilesToDelete != 6 || tot.YoungFiles != 0 {
		t.Errorf("totals %+v", tot)
	}
	var bytes int64
	for _, k := range wantKeys {
		bytes += before[k]
	}
	if tot.BytesToDelete != bytes {
		t.Errorf("bytes to delete %d, want %d", tot.BytesToDelete, bytes)
	}
	if len(plan.Snapshot.Heads) != 3 || len(plan.Snapshot.Tags) != 2 || len(plan.Snapshot.Branches) != 2 {
		t.Errorf("snapshot %+v", plan.Snapshot)
	}

	// The JSON form round-trips, and the decoded plan is what runs.
	js, err := json.Marshal(plan)
	if err != nil {
		t.Fatal(err)
	}
	var back Plan
	if err := json.Unmarshal(js, &back); err != nil {
		t.Fatal(err)
	}
	if js2, _ := json.Marshal(&back); string(js2) != string(js) {
		t.Errorf("JSON does not round-trip:\n%s\n%s", js, js2)
	}
	for _, s := range []string{`"kind":"manifest"`, `"reasons":["tag v2-tag","fork point of branch exp"]`, `"branch":"team/x"`, `"safetyWindow":"168h0m0s"`} {
		if !strings.Contains(string(js), s) {
			t.Errorf("JSON lacks %s", s)
		}
	}

	res, err := d.ExecuteCleanup(bg, &back)
	if err != nil {
		t.Fatal(err)
	}
	if res.ManifestsDeleted != 3 || res.FilesDeleted != 6 || res.BytesDeleted != bytes || len(res.Failed) != 0 {
		t.Errorf("result %+v", res)
	}
	after := dirFiles(t, dir)
	if g := gone(before, after); strings.Join(g, "\n") != strings.Join(wantKeys, "\n") {
		t.Errorf("deleted:\n  %s\nwant:\n  %s", strings.Join(g, "\n  "), strings.Join(wantKeys, "\n  "))
	}
	keptFilesExist(t, d, plan)
	again, err := d.PlanCleanup(bg, Policy{KeepLast: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(again.Files) != 0 || again.Totals.VersionsRemoved != 0 {
		t.Errorf("a second plan still deletes %v", planKeys(again))
	}
}

// TestPlanCleanupWindows checks the time window and keep-last against an
// independent computation over the deletes fixture's manifests.
func TestPlanCleanupWindows(t *testing.T) {
	dir := copyFixture(t, "deletes")
	d := mustOpen(t, openStore(t, dir), "deletes.lance")
	vs, err := d.Versions(bg)
	if err != nil {
		t.Fatal(err)
	}
	mans := map[uint64]*Manifest{}
	for _, v := range vs {
		if mans[v.N], err = d.ReadManifest(bg, v); err != nil {
			t.Fatal(err)
		}
	}
	ts := func(n uint64) time.Time { return mans[n].Timestamp }
	cases := []struct {
		name string
		p    Policy
		keep []uint64
	}{
		{"cut-off at v3", Policy{OlderThan: ts(3)}, []uint64{3, 4, 5}},
		{"cut-off 1ns after v3", Policy{OlderThan: ts(3).Add(time.Nanosecond)}, []uint64{4, 5}},
		{"keep last 2", Policy{KeepLast: 2}, []uint64{4, 5}},
		{"keep last 9", Policy{KeepLast: 9}, []uint64{1, 2, 3, 4, 5}},
		{"either", Policy{OlderThan: ts(4), KeepLast: 3}, []uint64{3, 4, 5}},
		{"cut-off in the future", Policy{OlderThan: time.Now().Add(time.Hour)}, []uint64{5}},
		{"extra root", Policy{KeepLast: 1, ExtraRoots: []Root{{Branch: "main", Version: 2, Reason: "checkpoint c1"}}}, []uint64{2, 5}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			plan, err := d.PlanCleanup(bg, c.p)
			if err != nil {
				t.Fatal(err)
			}
			var keep []uint64
			kept, removed := NewRefSet(), NewRefSet()
			for _, v := range plan.Versions {
				if v.Keep {
					keep = append(keep, v.Version)
					kept.Add(mans[v.Version].Files()...)
				} else {
					removed.Add(mans[v.Version].Files()...)
				}
			}
			if !equalU64(keep, c.keep) {
				t.Errorf("kept %v, want %v", keep, c.keep)
			}
			// Expected: every existing file a removed version references
			// that no kept version does.
			var want []string
			for rel := range dirFiles(t, dir) {
				k := d.Root + "/" + strings.TrimPrefix(rel, "deletes.lance/")
				if removed.Contains(k) && !kept.Contains(k) {
					want = append(want, k)
				}
			}
			sort.Strings(want)
			if got := planKeys(plan); strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("files:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
			}
			if c.name == "extra root" && strings.Join(versionOf(t, plan, "", 2).Reasons, ";") != "extra root: checkpoint c1" {
				t.Errorf("v2 reasons %q", versionOf(t, plan, "", 2).Reasons)
			}
			if c.name == "cut-off at v3" && !strings.HasPrefix(versionOf(t, plan, "", 3).Reasons[0], "not older than the cut-off") {
				t.Errorf("v3 reasons %q", versionOf(t, plan, "", 3).Reasons)
			}
		})
	}
}

// TestPlanCleanupPolicyInvalid: a policy must say what it keeps.
func TestPlanCleanupPolicyInvalid(t *testing.T) {
	d, _ := openFixture(t, "v2-appends")
	for _, p := range []Policy{{}, {KeepLast: -1}, {SafetyWindow: time.Hour}} {
		if _, err := d.PlanCleanup(bg, p); storage.KindOf(err) != storage.ErrInvalidArgument {
			t.Errorf("%+v: %v", p, err)
		}
	}
}

// TestPlanCleanupSafetyWindow: files no version references are deleted
// only once older than the safety window (or with none), and objects
// outside Lance's managed folders and kinds are never touched.
func TestPlanCleanupSafetyWindow(t *testing.T) {
	debris := []string{ // unreferenced, Lance's kinds in Lance's folders
		"data/debris.lance",
		"data/0000deadbeef/00000001.blob",
		"_transactions/9-debris.txn",
		"_deletions/9-9-9.arrow",
		"_deletions/9-9-10.bin",
		"_indices/0badc0de-0000-0000-0000-000000000000/page_data.lance",
		"_versions/.tmp_18446744073709551610.manifest_abc",
	}
	never := []string{ // never cleanup's to delete
		"_mem_wal/shard/0.lance",
		"data/notes.txt",
		"data/x/y/z.blob",
		"_indices/loose.lance",
		"_transactions/x.json",
		"_refs/tags/readme.txt",
		"tree/ghost/data/a.lance",
		"tree/ghost/_versions/18446744073709551614.manifest",
		"extra/unknown.lance",
		"notes.lance",
		"_versions/d5.manifest",
		"_versions/sub/1.manifest",
	}
	setup := func(t *testing.T) (string, *Dataset) {
		dir := copyFixture(t, "v2-appends")
		for _, rel := range append(append([]string(nil), debris...), never...) {
			p := filepath.Join(dir, "v2-appends.lance", rel)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return dir, mustOpen(t, openStore(t, dir), "v2-appends.lance")
	}
	later := func() time.Time { return time.Now().Add(DefaultSafetyWindow + time.Hour) }
	cases := []struct {
		name    string
		p       Policy
		deleted bool
	}{
		{"young", Policy{KeepLast: 9}, false},
		{"just inside a 1h window", Policy{KeepLast: 9, SafetyWindow: time.Hour, Now: func() time.Time { return time.Now().Add(59 * time.Minute) }}, false},
		{"old", Policy{KeepLast: 9, Now: later}, true},
		{"no window", Policy{KeepLast: 9, SafetyWindow: -1}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir, d := setup(t)
			plan, err := d.PlanCleanup(bg, c.p)
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			if c.deleted {
				for _, rel := range debris {
					want = append(want, d.Key(rel))
				}
				sort.Strings(want)
			}
			if got := planKeys(plan); strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("files:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
			}
			if !c.deleted && (plan.Totals.YoungFiles != len(debris) || plan.Totals.YoungBytes != int64(len(debris))) {
				t.Errorf("young %d/%d, want %d", plan.Totals.YoungFiles, plan.Totals.YoungBytes, len(debris))
			}
			for _, f := range plan.Files {
				if f.Verified || f.RemovedBy != nil || !strings.Contains(f.Reason, "referenced by no version") && !strings.Contains(f.Reason, ".tmp") {
					t.Errorf("%s: %+v", f.Key, f)
				}
			}
			if plan.Totals.ReferencedFiles != 3+3+3 { // 3 manifests, 3 data files, 3 transactions
				t.Errorf("referenced files %d", plan.Totals.ReferencedFiles)
			}
			if _, err := d.ExecuteCleanup(bg, plan); err != nil {
				t.Fatal(err)
			}
			files := dirFiles(t, dir)
			for _, rel := range never {
				if _, ok := files["v2-appends.lance/"+rel]; !ok {
					t.Errorf("%s was deleted", rel)
				}
			}
			keptFilesExist(t, d, plan)
		})
	}
}

// withFeatureFlags returns manifest b with reader flags set to flags (an
// appended field wins in proto3).
func withFeatureFlags(t testing.TB, b []byte, flags uint64) []byte {
	t.Helper()
	pos := int(binary.LittleEndian.Uint64(b[len(b)-16:]))
	mlen := int(binary.LittleEndian.Uint32(b[pos:]))
	extra := pb{}.varint(9, flags)
	out := append([]byte(nil), b[:pos]...)
	out = binary.LittleEndian.AppendUint32(out, uint32(mlen+len(extra)))
	out = append(out, b[pos+4:pos+4+mlen]...)
	out = append(out, extra...)
	return append(out, b[len(b)-16:]...)
}

// TestCleanupFailsClosed: whatever cleanup cannot read or understand
// refuses the whole family, typed and naming the object, with nothing
// deleted (the store fails the test on any delete).
func TestCleanupFailsClosed(t *testing.T) {
	const root = "branch-tag.lance"
	manifestPath := func(dir, sub string, n uint64) string {
		return filepath.Join(dir, root, sub, versionsDir, ManifestName(n, NamingV2))
	}
	cases := []struct {
		name    string
		mutate  func(t *testing.T, dir string, g *guardDriver)
		root    string
		p       Policy
		want    []error
		wantKey string
	}{
		{name: "truncated old manifest", mutate: func(t *testing.T, dir string, g *guardDriver) {
			p := manifestPath(dir, "", 1)
			b, _ := os.ReadFile(p)
			refWriteFile(t, p, string(b[:len(b)-5]))
		}, want: []error{ErrCorruptManifest}, wantKey: "_versions/" + ManifestName(1, NamingV2)},
		{name: "corrupt manifest of a branch", mutate: func(t *testing.T, dir string, g *guardDriver) {
			refWriteFile(t, manifestPath(dir, "tree/team/x", 4), "garbage")
		}, want: []error{ErrCorruptManifest}, wantKey: "tree/team/x/_versions/" + ManifestName(4, NamingV2)},
		{name: "unknown feature flag", mutate: func(t *testing.T, dir string, g *guardDriver) {
			p := manifestPath(dir, "tree/exp", 3)
			b, _ := os.ReadFile(p)
			refWriteFile(t, p, string(withFeatureFlags(t, b, 1<<12)))
		}, want: []error{ErrUnknownFeature}, wantKey: "tree/exp/_versions/" + ManifestName(3, NamingV2)},
		{name: "unreadable manifest", mutate: func(t *testing.T, dir string, g *guardDriver) {
			g.failGet = map[string]error{root + "/_versions/" + ManifestName(2, NamingV2): storage.Errorf("get", "", storage.ErrTransient, "simulated timeout")}
		}, want: []error{storage.ErrTransient}, wantKey: "_versions/" + ManifestName(2, NamingV2)},
		{name: "malformed tag", mutate: func(t *testing.T, dir string, g *guardDriver) {
			refWriteFile(t, filepath.Join(dir, root, "_refs/tags/broken.json"), `{"version": 1`)
		}, want: []error{ErrMalformedTag}, wantKey: "_refs/tags/broken.json"},
		{name: "tag with an empty branch", mutate: func(t *testing.T, dir string, g *guardDriver) {
			refWriteFile(t, filepath.Join(dir, root, "_refs/tags/empty.json"), `{"branch": "", "version": 1, "manifestSize": 1}`)
		}, want: []error{ErrMalformedTag}, wantKey: "_refs/tags/empty.json"},
		{name: "malformed branch", mutate: func(t *testing.T, dir string, g *guardDriver) {
			refWriteFile(t, filepath.Join(dir, root, "_refs/branches/exp.json"), `{"parentVersion": 2}`)
		}, want: []error{ErrMalformedBranch}, wantKey: "_refs/branches/exp.json"},
		{name: "mixed naming", mutate: func(t *testing.T, dir string, g *guardDriver) {
			b, _ := os.ReadFile(manifestPath(dir, "", 1))
			refWriteFile(t, filepath.Join(dir, root, versionsDir, "1.manifest"), string(b))
		}, want: []error{ErrMixedNaming}, wantKey: "_versions/"},
		{name: "mixed naming in a branch", mutate: func(t *testing.T, dir string, g *guardDriver) {
			b, _ := os.ReadFile(manifestPath(dir, "tree/exp", 2))
			refWriteFile(t, filepath.Join(dir, root, "tree/exp", versionsDir, "2.manifest"), string(b))
		}, want: []error{ErrMixedNaming}, wantKey: "tree/exp/_versions/"},
		{name: "branch without versions", mutate: func(t *testing.T, dir string, g *guardDriver) {
			refRemove(t, filepath.Join(dir, root, "tree/team/x", versionsDir))
		}, want: []error{ErrNotDataset}, wantKey: "tree/team/x/_versions/"},
		{name: "branch whose parent has no ref", mutate: func(t *testing.T, dir string, g *guardDriver) {
			refWriteFile(t, filepath.Join(dir, root, "_refs/branches/exp.json"),
				`{"parentBranch": "gone", "parentVersion": 2, "createAt": 1, "manifestSize": 461, "metadata": {}}`)
		}, want: nil, wantKey: "_refs/branches/exp.json"},
		{name: "run on a branch's root", root: root + "/tree/exp", want: nil, wantKey: "tree/exp/_versions/"},
		{name: "extra root that does not exist", p: Policy{KeepLast: 1, ExtraRoots: []Root{{Branch: "exp", Version: 9}}}, want: nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := copyFixture(t, "branch-tag")
			g := &guardDriver{forbidDeletes: true, okBatches: -1}
			s := guardedStore(t, dir, g)
			if c.mutate != nil {
				c.mutate(t, dir, g)
			}
			before := dirFiles(t, dir)
			r := c.root
			if r == "" {
				r = root
			}
			d := mustOpen(t, s, r)
			p := c.p
			if p.KeepLast == 0 && p.OlderThan.IsZero() {
				p = Policy{OlderThan: time.Now().Add(time.Hour), SafetyWindow: -1}
			}
			plan, err := d.PlanCleanup(bg, p)
			if err == nil {
				t.Fatalf("planned %d deletions; want a refusal", len(plan.Files))
			}
			var ce *CleanupError
			if !errors.Is(err, ErrCleanupRefused) || !errors.As(err, &ce) {
				t.Fatalf("%v: not ErrCleanupRefused", err)
			}
			for _, w := range c.want {
				if !errors.Is(err, w) {
					t.Errorf("%v: does not match %v", err, w)
				}
			}
			if c.wantKey != "" && !strings.Contains(ce.Key, c.wantKey) {
				t.Errorf("refusal names %q, want %q: %v", ce.Key, c.wantKey, err)
			}
			if !strings.Contains(err.Error(), "nothing was deleted") {
				t.Errorf("message: %v", err)
			}
			t.Logf("%v", err)
			if after := dirFiles(t, dir); len(gone(before, after)) != 0 {
				t.Errorf("deleted %v", gone(before, after))
			}
		})
	}
}
