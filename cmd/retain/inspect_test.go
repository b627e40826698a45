package main

import (
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/retain-dev/retain/adapters/s3"
	"github.com/retain-dev/retain/core/lance"
	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/internal/emulator"
)

const fixturesDir = "../../core/lance/testdata"

// lanceFixture is one entry of lance/testdata/fixtures.json: what real
// Lance reported while building the fixture.
type lanceFixture struct {
	Table    string `json:"table"`
	Versions map[string][]struct {
		Version   uint64 `json:"version"`
		Timestamp string `json:"timestamp"`
	} `json:"versions"`
	Tags map[string]struct {
		Version      uint64 `json:"version"`
		ManifestSize int64  `json:"manifestSize"`
	} `json:"tags"`
	Branches map[string]struct {
		ParentBranch  *string `json:"parentBranch"`
		ParentVersion uint64  `json:"parentVersion"`
	} `json:"branches"`
	Files []string `json:"files"`
}

func loadFixtures(t *testing.T) map[string]lanceFixture {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(fixturesDir, "fixtures.json"))
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]lanceFixture
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// copyFixture copies a committed fixture into a temp dir (never open one
// in place: localfs keeps its own folder in the store root) and returns the
// copy's path.
func copyFixture(t *testing.T, table string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), table)
	if err := os.CopyFS(dst, os.DirFS(filepath.Join(fixturesDir, table))); err != nil {
		t.Fatal(err)
	}
	return dst
}

// filesUnder lists a dataset folder as Lance sees it: relative paths, the
// localfs adapter's own folder left out.
func filesUnder(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() && rel == ".retain-localfs" {
			return filepath.SkipDir
		}
		if !d.IsDir() {
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

func inspectJSON(t *testing.T, args ...string) (inspectReport, string, int) {
	t.Helper()
	out, errs, code := retain(t, append([]string{"inspect", "--json"}, args...)...)
	var rep inspectReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("inspect %v: exit %d, output is not JSON (%v): %s %s", args, code, err, out, errs)
	}
	return rep, errs, code
}

// checkAgainstFixture compares an inspect report with what real Lance said
// about the fixture.
func checkAgainstFixture(t *testing.T, rep inspectReport, fx lanceFixture) {
	t.Helper()
	if len(rep.Problems) != 0 || len(rep.Warnings) != 0 {
		t.Errorf("problems %+v, warnings %+v", rep.Problems, rep.Warnings)
	}
	var names []string
	byName := map[string]*lance.InspectedBranch{}
	for _, g := range rep.Branches {
		names = append(names, g.Name)
		byName[g.Name] = g
	}
	var want []string
	for b := range fx.Versions {
		want = append(want, b)
	}
	sort.Strings(want)
	wantOrder := []string{"main"}
	for _, b := range want {
		if b != "main" {
			wantOrder = append(wantOrder, b)
		}
	}
	if strings.Join(names, ",") != strings.Join(wantOrder, ",") {
		t.Fatalf("branches %v, Lance says %v", names, wantOrder)
	}
	total := 0
	for b, vs := range fx.Versions {
		g := byName[b]
		if len(g.Versions) != len(vs) {
			t.Errorf("%s: %d versions, Lance says %d", b, len(g.Versions), len(vs))
			continue
		}
		total += len(vs)
		for i, v := range vs {
			got := g.Versions[i]
			if got.Version != v.Version || got.Time == nil || got.Error != "" {
				t.Errorf("%s: version %+v, Lance says %d", b, got, v.Version)
				continue
			}
			if ts := got.Time.UTC().Truncate(time.Millisecond).Format("2006-01-02T15:04:05.000Z"); ts != v.Timestamp {
				t.Errorf("%s v%d: time %s, Lance says %s", b, v.Version, ts, v.Timestamp)
			}
			if got.Head != (i == len(vs)-1) || got.Files == 0 || got.Bytes <= got.ManifestSize || got.UnknownSizes != 0 || got.Missing != 0 {
				t.Errorf("%s v%d: %+v", b, v.Version, got)
			}
		}
		if g.Head == nil || *g.Head != vs[len(vs)-1].Version {
			t.Errorf("%s: head %v", b, g.Head)
		}
	}
	for name, fb := range fx.Branches {
		g := byName[name]
		parent := "main"
		if fb.ParentBranch != nil {
			parent = *fb.ParentBranch
		}
		if g.Parent == nil || g.Parent.Branch != parent || g.Parent.Version != fb.ParentVersion {
			t.Errorf("branch %s: parent %+v, Lance says %s v%d", name, g.Parent, parent, fb.ParentVersion)
			continue
		}
		if !hasVersionWith(byName[parent], fb.ParentVersion, func(v *lance.InspectedVersion) bool { return contains(v.ForkedBy, name) }) {
			t.Errorf("%s v%d does not show branch %s forked from it", parent, fb.ParentVersion, name)
		}
		if first := g.Versions[0]; first.ForkOf == nil || *first.ForkOf != *g.Parent {
			t.Errorf("branch %s: first version %+v is not marked as the fork", name, first)
		}
	}
	if len(rep.Tags) != len(fx.Tags) {
		t.Errorf("tags %+v, Lance says %+v", rep.Tags, fx.Tags)
	}
	for _, tg := range rep.Tags {
		ft, ok := fx.Tags[tg.Name]
		if !ok || tg.Version != ft.Version || int64(tg.ManifestSize) != ft.ManifestSize || tg.Dangling {
			t.Errorf("tag %+v, Lance says %+v", tg, ft)
			continue
		}
		if !hasVersionWith(byName[tg.Branch], tg.Version, func(v *lance.InspectedVersion) bool { return contains(v.Tags, tg.Name) }) {
			t.Errorf("tag %s is not shown on %s v%d", tg.Name, tg.Branch, tg.Version)
		}
	}
	s := rep.Summary
	if s == nil || s.Versions != total || s.UnreadableVersions != 0 || s.Tags != len(fx.Tags) || s.Branches != len(fx.Branches) ||
		s.Latest == nil || s.Latest.Branch != "main" || s.Folder == nil || s.Folder.Objects != len(fx.Files) ||
		s.ReferencedBytes > s.Folder.Bytes || s.ReferencedUnknownSizes != 0 {
		t.Errorf("summary %+v (latest %+v, folder %+v)", s, s.Latest, s.Folder)
	}
}

func hasVersionWith(g *lance.InspectedBranch, n uint64, ok func(*lance.InspectedVersion) bool) bool {
	if g == nil {
		return false
	}
	for _, v := range g.Versions {
		if v.Version == n {
			return ok(v)
		}
	}
	return false
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// Every committed fixture: the versions, tags and branches inspect shows
// are those real Lance reported; the latest version's files are the ones
// on disk with their sizes; and inspect leaves the dataset as it was.
func TestInspectFixtures(t *testing.T) {
	t.Parallel() // a process-bound test: it waits on retain, Lance and emulators, not the CPU
	fixtures := loadFixtures(t)
	names := make([]string, 0, len(fixtures))
	for n := range fixtures {
		names = append(names, n)
	}
	sort.Strings(names)
	for i, name := range names {
		fx := fixtures[name]
		t.Run(name, func(t *testing.T) {
			dir := copyFixture(t, fx.Table)
			pristine := folderState(t, dir)
			uri := dir
			if i%2 == 0 {
				uri = "file://" + dir
			}
			rep, errs, code := inspectJSON(t, uri)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errs)
			}
			if rep.URI != uri || rep.Adapter != "localfs" || rep.Files != nil {
				t.Errorf("uri %q adapter %q files %v", rep.URI, rep.Adapter, rep.Files)
			}
			checkAgainstFixture(t, rep, fx)

			// --version on main's head lists its files with their sizes.
			head := rep.Summary.Latest
			vrep, errs, code := inspectJSON(t, uri, "--version", strconv.FormatUint(head.Version, 10))
			if code != 0 || len(vrep.Branches) != 1 || len(vrep.Branches[0].Versions) != 1 || vrep.Summary != nil {
				t.Fatalf("--version %d: exit %d %s %+v", head.Version, code, errs, vrep)
			}
			if v := vrep.Branches[0].Versions[0]; v.Bytes != head.Bytes || v.Files != head.Files || len(vrep.Files) != head.Files {
				t.Errorf("--version: %+v with %d files, the listing said %+v", v, len(vrep.Files), head)
			}
			kinds := map[string]bool{}
			for _, f := range vrep.Files {
				kinds[f.Kind] = true
				if f.Outside || f.Inherited || f.Missing || f.Size == nil || f.Owner != "main" {
					t.Errorf("file %+v", f)
					continue
				}
				st, err := os.Stat(filepath.Join(dir, filepath.FromSlash(f.Key)))
				switch {
				case err != nil:
					t.Errorf("%s: %v", f.Key, err)
				case f.Folder != st.IsDir():
					t.Errorf("%s: folder %v", f.Key, f.Folder)
				case !f.Folder && st.Size() != *f.Size:
					t.Errorf("%s: size %d, on disk %d", f.Key, *f.Size, st.Size())
				}
			}
			if !kinds["manifest"] || !kinds["data"] {
				t.Errorf("kinds %v", kinds)
			}
			if got := filesUnder(t, dir); strings.Join(got, "\n") != strings.Join(fx.Files, "\n") {
				t.Errorf("inspect changed the dataset: %v, was %v", got, fx.Files)
			}
			// Read-only open: the folder is byte-identical, with no
			// .retain-localfs or any other new entry.
			wantUnchanged(t, "inspect", pristine, folderState(t, dir))
		})
	}
}

// The text listing of the fixture with tags and nested branches, and the
// files of a version of a branch of a branch: inherited from main and from
// exp through base paths.
func TestInspectTextBranchTag(t *testing.T) {
	dir := copyFixture(t, "branch-tag.lance")
	out, errs, code := retain(t, "inspect", dir)
	if code != 0 || errs != "" {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{
		"main: 3 versions, head v3",
		"branch exp: forked from main v2, 3 versions, head v4 (_refs/branches/exp.json)",
		"branch team/x: forked from exp v4, 2 versions, head v5 (_refs/branches/team%2Fx.json)",
		"tag v2-tag; fork point of branch exp",
		"tag exp-tag",
		"head of exp; fork point of branch team/x",
		"fork of exp v4",
		"8 versions (main 3, exp 3, team/x 2), 2 tags, 2 branches",
		"dataset folder: 29 objects",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}

	rep, errs, code := inspectJSON(t, dir, "--branch", "team/x", "--version", "5")
	if code != 0 || len(rep.Branches) != 1 || rep.Branches[0].Name != "team/x" || rep.Branches[0].Root != "tree/team/x" {
		t.Fatalf("exit %d %s: %+v", code, errs, rep.Branches)
	}
	from := map[string]int{}
	for _, f := range rep.Files {
		switch {
		case f.Owner == "team/x" && !f.Inherited:
			if !strings.HasPrefix(f.Key, "tree/team/x/") {
				t.Errorf("own file %+v", f)
			}
		case f.Owner == "exp" && f.Inherited:
			if !strings.HasPrefix(f.Key, "tree/exp/") {
				t.Errorf("from exp %+v", f)
			}
		case f.Owner == "main" && f.Inherited:
			if strings.HasPrefix(f.Key, "tree/") {
				t.Errorf("from main %+v", f)
			}
		default:
			t.Errorf("file %+v", f)
		}
		from[f.Owner]++
		if f.Size == nil || f.Missing {
			t.Errorf("file %+v", f)
		}
	}
	if from["team/x"] == 0 || from["exp"] == 0 || from["main"] == 0 {
		t.Errorf("owners %v", from)
	}
	out, _, code = retain(t, "inspect", dir, "--branch", "team/x", "--version", "5")
	if code != 0 || !strings.Contains(out, "inherited from exp") || !strings.Contains(out, "inherited from main") ||
		!strings.Contains(out, "tree/team/x/_versions/18446744073709551610.manifest") {
		t.Errorf("text --version: %d\n%s", code, out)
	}

	// --branch alone: only that branch.
	rep, _, code = inspectJSON(t, dir, "--branch", "exp")
	if code != 0 || len(rep.Branches) != 1 || rep.Summary.Versions != 3 || rep.Summary.Latest.Branch != "exp" || rep.Summary.Latest.Version != 4 {
		t.Errorf("--branch exp: %d %+v %+v", code, rep.Branches, rep.Summary)
	}
}

// A corrupt manifest and malformed tag and branch files are reported with
// their keys; everything else is still listed; exit 1.
func TestInspectUnreadable(t *testing.T) {
	dir := copyFixture(t, "branch-tag.lance")
	manifest := "tree/exp/_versions/" + lance.ManifestName(3, lance.NamingV2)
	if err := os.Truncate(filepath.Join(dir, manifest), 100); err != nil {
		t.Fatal(err)
	}
	badTag, badBranch := "_refs/tags/broken.json", "_refs/branches/broken.json"
	for k, body := range map[string]string{badTag: `{"version": "x"}`, badBranch: `{}`} {
		if err := os.WriteFile(filepath.Join(dir, k), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	out, errs, code := retain(t, "inspect", dir)
	if code != 1 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, k := range []string{manifest, badTag, badBranch} {
		if !strings.Contains(out, k) || !strings.Contains(errs, k) {
			t.Errorf("%s not reported:\n%s\n%s", k, out, errs)
		}
	}
	for _, want := range []string{"UNREADABLE MANIFEST; tag exp-tag", "head of team/x", "corrupt Lance manifest", "malformed tag file", "malformed branch file"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}

	rep, _, code := inspectJSON(t, dir)
	if code != 1 {
		t.Fatalf("exit %d", code)
	}
	what := map[string]string{}
	for _, p := range rep.Problems {
		what[p.Key] = p.What
		if p.Reason == "" {
			t.Errorf("problem without a reason: %+v", p)
		}
	}
	if what[manifest] != "manifest" || what[badTag] != "tag" || what[badBranch] != "branch" || len(rep.Problems) != 3 {
		t.Errorf("problems %+v", rep.Problems)
	}
	readable := 0
	for _, g := range rep.Branches {
		for _, v := range g.Versions {
			if g.Name == "exp" && v.Version == 3 {
				if v.Error == "" || v.Time != nil || v.ManifestSize != 100 || !contains(v.Tags, "exp-tag") {
					t.Errorf("unreadable version %+v", v)
				}
				continue
			}
			if v.Error != "" || v.Time == nil {
				t.Errorf("%s v%d: %+v", g.Name, v.Version, v)
			}
			readable++
		}
	}
	if readable != 7 || len(rep.Tags) != 2 || rep.Summary.UnreadableVersions != 1 || rep.Summary.Branches != 2 {
		t.Errorf("readable %d, tags %+v, summary %+v", readable, rep.Tags, rep.Summary)
	}
	// The tag's recorded manifest size no longer matches: a warning.
	if len(rep.Warnings) != 1 || rep.Warnings[0].Key != "_refs/tags/exp-tag.json" {
		t.Errorf("warnings %+v", rep.Warnings)
	}

	// The files of the unreadable version: the reason, exit 1.
	out, errs, code = retain(t, "inspect", dir, "--branch", "exp", "--version", "3")
	if code != 1 || !strings.Contains(out, manifest) || !strings.Contains(errs, manifest) {
		t.Errorf("--version of the corrupt manifest: %d\n%s\n%s", code, out, errs)
	}
}

// Dangling tags, missing files and orphan branch folders are warnings: the
// exit status stays 0.
func TestInspectWarnings(t *testing.T) {
	dir := copyFixture(t, "v2-appends.lance")
	tag := `{"branch": null, "version": 7, "manifestSize": 10}`
	os.MkdirAll(filepath.Join(dir, "_refs", "tags"), 0o755)
	if err := os.WriteFile(filepath.Join(dir, "_refs", "tags", "gone.json"), []byte(tag), 0o644); err != nil {
		t.Fatal(err)
	}
	rep, _, _ := inspectJSON(t, dir, "--version", "3")
	var data string
	for _, f := range rep.Files {
		if f.Kind == "data" {
			data = f.Key
		}
	}
	if err := os.Remove(filepath.Join(dir, filepath.FromSlash(data))); err != nil {
		t.Fatal(err)
	}
	orphan := filepath.Join(dir, "tree", "debris", "_versions")
	os.MkdirAll(orphan, 0o755)
	os.WriteFile(filepath.Join(orphan, lance.ManifestName(1, lance.NamingV2)), []byte("x"), 0o644)

	rep, errs, code := inspectJSON(t, dir)
	if code != 0 || len(rep.Problems) != 0 {
		t.Fatalf("exit %d %s %+v", code, errs, rep.Problems)
	}
	keys := map[string]bool{}
	for _, w := range rep.Warnings {
		keys[w.Key] = true
	}
	if !keys["_refs/tags/gone.json"] || !keys["tree/debris/"] || len(rep.Warnings) != 3 || len(rep.Tags) != 1 || !rep.Tags[0].Dangling {
		t.Errorf("warnings %+v tags %+v", rep.Warnings, rep.Tags)
	}
	if v := rep.Branches[0].Versions[2]; v.Missing != 1 {
		t.Errorf("v3 %+v", v)
	}
	rep, _, _ = inspectJSON(t, dir, "--version", "3")
	missing := 0
	for _, f := range rep.Files {
		if f.Missing {
			missing++
			if f.Key != data {
				t.Errorf("missing %+v", f)
			}
		}
	}
	if missing != 1 {
		t.Errorf("files %+v", rep.Files)
	}
}

func TestInspectNotADataset(t *testing.T) {
	db := t.TempDir()
	if err := os.CopyFS(filepath.Join(db, "t.lance"), os.DirFS(filepath.Join(fixturesDir, "v2-appends.lance"))); err != nil {
		t.Fatal(err)
	}
	// The database folder, not the table: the tables are suggested.
	_, errs, code := retain(t, "inspect", db)
	if code != 1 || !strings.Contains(errs, db+" is not a Lance dataset") || !strings.Contains(errs, "_versions/") ||
		!strings.Contains(errs, filepath.Join(db, "t.lance")) {
		t.Errorf("db folder: %d %s", code, errs)
	}
	if _, err := os.Stat(filepath.Join(db, ".retain-localfs")); err == nil {
		t.Error("inspect of a non-dataset created the adapter's folder in it")
	}
	// A path that does not exist is not created.
	gone := filepath.Join(db, "nope.lance")
	_, errs, code = retain(t, "inspect", "file://"+gone)
	if code != 1 || !strings.Contains(errs, "does not exist") || !strings.Contains(errs, gone) {
		t.Errorf("missing path: %d %s", code, errs)
	}
	if _, err := os.Stat(gone); err == nil {
		t.Error("inspect created the missing path")
	}
	// _versions/ without manifests: found through the store.
	empty := filepath.Join(db, "empty.lance")
	os.MkdirAll(filepath.Join(empty, "_versions"), 0o755)
	_, errs, code = retain(t, "inspect", empty, "--json")
	if code != 1 || !strings.Contains(errs, empty+" is not a Lance dataset") || !strings.Contains(errs, "no manifests under _versions/") {
		t.Errorf("empty _versions: %d %s", code, errs)
	}
	// Malformed URIs and flags are usage errors; an absent version is not.
	for _, args := range [][]string{
		{"file://host/x"},
		{"ftp://bucket/t.lance"},
		{filepath.Join(db, "t.lance"), "--branch", "../x"},
		{filepath.Join(db, "t.lance"), "--version", "x"},
		{},
	} {
		if _, errs, code := retain(t, append([]string{"inspect"}, args...)...); code != 2 {
			t.Errorf("%v: exit %d %s", args, code, errs)
		}
	}
	_, errs, code = retain(t, "inspect", filepath.Join(db, "t.lance"), "--version", "9")
	if code != 1 || !strings.Contains(errs, "no version 9 (versions: 1, 2, 3)") {
		t.Errorf("absent version: %d %s", code, errs)
	}
	_, errs, code = retain(t, "inspect", filepath.Join(db, "t.lance"), "--branch", "nope")
	if code != 1 || !strings.Contains(errs, `no branch "nope"`) {
		t.Errorf("absent branch: %d %s", code, errs)
	}
}

// The fixture with branches and tags copied into gofakes3 and inspected
// through the bundled s3 adapter, as a plugin of the binary.
func TestInspectS3(t *testing.T) {
	e := emulator.GoFakeS3(t)
	emulator.IsolateAWS(t, e.Env())
	ctx := context.Background()
	loc, err := storage.ParseLocation("s3://retain-inspect/db/t.lance")
	if err != nil {
		t.Fatal(err)
	}
	d, err := s3.Open(ctx, loc)
	if err != nil {
		t.Fatal(err)
	}
	st, err := storage.NewStore(ctx, "s3", d)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	fx := loadFixtures(t)["branch-tag"]
	src := filepath.Join(fixturesDir, fx.Table)
	for _, f := range fx.Files {
		b, err := os.ReadFile(filepath.Join(src, filepath.FromSlash(f)))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.PutBytes(ctx, f, b, storage.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	uri := "s3://retain-inspect/db/t.lance"
	rep, errs, code := inspectJSON(t, uri)
	if code != 0 || rep.Adapter != "s3" {
		t.Fatalf("exit %d (%s): %s", code, rep.Adapter, errs)
	}
	checkAgainstFixture(t, rep, fx)
	if strings.Contains(errs, e.SecretKey) {
		t.Error("the secret key appeared in the output")
	}
	// The database prefix is not a dataset; its table is suggested.
	_, errs, code = retain(t, "inspect", "s3://retain-inspect/db")
	if code != 1 || !strings.Contains(errs, "s3://retain-inspect/db is not a Lance dataset") || !strings.Contains(errs, "s3://retain-inspect/db/t.lance") {
		t.Errorf("db prefix: %d %s", code, errs)
	}
}
