package lance

import (
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/retain-dev/retain/adapters/localfs"
	"github.com/retain-dev/retain/core/storage"
)

// inspectFixture copies a committed fixture into a temp dir and opens it
// read-only as the store's root dataset, the way `retain inspect` does.
func inspectFixture(t *testing.T, name string) (*Dataset, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), name+".lance")
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("testdata", name+".lance"))); err != nil {
		t.Fatal(err)
	}
	d, err := localfs.OpenReadOnly(dir)
	if err != nil {
		t.Fatal(err)
	}
	s, err := storage.NewStore(bg, "localfs", d)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return mustOpen(t, s, ""), dir
}

func mustInspect(t *testing.T, ds *Dataset, o InspectOptions) *Inspection {
	t.Helper()
	ins, err := Inspect(bg, ds, o)
	if err != nil {
		t.Fatal(err)
	}
	return ins
}

func inspectedVersion(g *InspectedBranch, n uint64) *InspectedVersion {
	if g == nil {
		return nil
	}
	for _, v := range g.Versions {
		if v.Version == n {
			return v
		}
	}
	return nil
}

func hasString(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// Every committed fixture: the versions, times, tags, branches and fork
// points Inspect reports are the ones real Lance reported building it.
func TestInspectMatchesLance(t *testing.T) {
	fixtures := fixtureResults(t)
	for _, name := range keys(fixtures) {
		fx := fixtures[name]
		t.Run(name, func(t *testing.T) {
			ds, dir := inspectFixture(t, name)
			ins := mustInspect(t, ds, InspectOptions{})
			if len(ins.Problems) != 0 || len(ins.Warnings) != 0 || ins.Files != nil {
				t.Errorf("problems %+v, warnings %+v, files %v", ins.Problems, ins.Warnings, ins.Files)
			}
			byName := map[string]*InspectedBranch{}
			var names []string
			for _, g := range ins.Branches {
				byName[g.Name] = g
				names = append(names, g.Name)
			}
			var want []string
			for b := range fx.Versions {
				if b != "main" {
					want = append(want, b)
				}
			}
			sort.Strings(want)
			if got, want := strings.Join(names, ","), strings.Join(append([]string{"main"}, want...), ","); got != want {
				t.Fatalf("branches %s, Lance says %s", got, want)
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
			}
			for bn, fb := range fx.Branches {
				g, parent := byName[bn], "main"
				if fb.ParentBranch != nil {
					parent = *fb.ParentBranch
				}
				if g.Parent == nil || *g.Parent != (VersionRef{parent, fb.ParentVersion}) {
					t.Errorf("branch %s: parent %+v, Lance says %s v%d", bn, g.Parent, parent, fb.ParentVersion)
					continue
				}
				if v := inspectedVersion(byName[parent], fb.ParentVersion); v == nil || !hasString(v.ForkedBy, bn) {
					t.Errorf("%s v%d does not show branch %s forked from it", parent, fb.ParentVersion, bn)
				}
				if first := g.Versions[0]; first.ForkOf == nil || *first.ForkOf != *g.Parent {
					t.Errorf("branch %s: first version %+v is not marked as the fork", bn, first)
				}
			}
			if len(ins.Tags) != len(fx.Tags) {
				t.Errorf("tags %+v, Lance says %+v", ins.Tags, fx.Tags)
			}
			for _, tg := range ins.Tags {
				ft, ok := fx.Tags[tg.Name]
				if !ok || tg.Version != ft.Version || int64(tg.ManifestSize) != ft.ManifestSize || tg.Dangling {
					t.Errorf("tag %+v, Lance says %+v", tg, ft)
				}
				if v := inspectedVersion(byName[tg.Branch], tg.Version); v == nil || !hasString(v.Tags, tg.Name) {
					t.Errorf("tag %s is not shown on %s v%d", tg.Name, tg.Branch, tg.Version)
				}
			}
			s := ins.Summary
			if s == nil || s.Versions != total || s.Tags != len(fx.Tags) || s.Branches != len(fx.Branches) ||
				s.Latest == nil || s.Latest.Branch != "main" || s.Folder == nil || s.Folder.Objects != len(fx.Files) ||
				s.ReferencedBytes > s.Folder.Bytes || s.ReferencedUnknownSizes != 0 {
				t.Fatalf("summary %+v", s)
			}

			// HasVersion on main's head: its files, summing to the listing's totals.
			one := mustInspect(t, ds, InspectOptions{Version: s.Latest.Version, HasVersion: true})
			if len(one.Branches) != 1 || len(one.Branches[0].Versions) != 1 || one.Summary != nil || len(one.Files) != s.Latest.Files {
				t.Fatalf("HasVersion %d: %+v", s.Latest.Version, one)
			}
			for _, f := range one.Files {
				if f.Size == nil || f.Outside || f.Inherited || f.Missing || f.Owner != "main" {
					t.Errorf("file %+v", f)
					continue
				}
				st, err := os.Stat(filepath.Join(dir, filepath.FromSlash(f.Key)))
				if err != nil || f.Folder != st.IsDir() || (!f.Folder && st.Size() != *f.Size) {
					t.Errorf("file %+v, on disk %v %v", f, st, err)
				}
			}
			if v := one.Branches[0].Versions[0]; v.Bytes != s.Latest.Bytes || v.Files != s.Latest.Files {
				t.Errorf("HasVersion: %+v, the listing said %+v", v, s.Latest)
			}
		})
	}
}

// Unreadable metadata is reported as problems, never an error: the rest
// is still inspected.
func TestInspectReportsUnreadable(t *testing.T) {
	ds, dir := inspectFixture(t, "branch-tag")
	manifest := "tree/exp/_versions/" + ManifestName(3, NamingV2)
	if err := os.Truncate(filepath.Join(dir, manifest), 100); err != nil {
		t.Fatal(err)
	}
	badTag, badBranch := "_refs/tags/broken.json", "_refs/branches/broken.json"
	for k, body := range map[string]string{badTag: `{"version": "x"}`, badBranch: `{}`} {
		if err := os.WriteFile(filepath.Join(dir, k), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ins := mustInspect(t, ds, InspectOptions{})
	what := map[string]string{}
	for _, p := range ins.Problems {
		what[p.Key] = p.What
		if p.Reason == "" || strings.HasPrefix(p.Reason, p.Key) {
			t.Errorf("problem's reason %+v", p)
		}
	}
	if what[manifest] != "manifest" || what[badTag] != "tag" || what[badBranch] != "branch" || len(ins.Problems) != 3 {
		t.Errorf("problems %+v", ins.Problems)
	}
	if v := inspectedVersion(ins.Branches[1], 3); ins.Branches[1].Name != "exp" || v == nil || v.Error == "" || v.Time != nil || !hasString(v.Tags, "exp-tag") {
		t.Errorf("unreadable version %+v", v)
	}
	if ins.Summary.UnreadableVersions != 1 || len(ins.Warnings) != 1 || ins.Warnings[0].Key != "_refs/tags/exp-tag.json" {
		t.Errorf("summary %+v, warnings %+v", ins.Summary, ins.Warnings)
	}
	one := mustInspect(t, ds, InspectOptions{Branch: "exp", HasBranch: true, Version: 3, HasVersion: true})
	if v := one.Branches[0].Versions[0]; v.Error == "" || len(one.Problems) != 3 || one.Problems[2].Key != manifest || len(one.Files) != 0 {
		t.Errorf("HasVersion of the corrupt manifest: %+v", one)
	}
}

// Dangling tags, missing files and orphan branch folders are warnings.
func TestInspectWarnsOfInconsistencies(t *testing.T) {
	ds, dir := inspectFixture(t, "v2-appends")
	os.MkdirAll(filepath.Join(dir, "_refs", "tags"), 0o755)
	if err := os.WriteFile(filepath.Join(dir, "_refs", "tags", "gone.json"), []byte(`{"branch": null, "version": 7, "manifestSize": 10}`), 0o644); err != nil {
		t.Fatal(err)
	}
	var data string
	for _, f := range mustInspect(t, ds, InspectOptions{Version: 3, HasVersion: true}).Files {
		if f.Kind == "data" {
			data = f.Key
		}
	}
	if err := os.Remove(filepath.Join(dir, filepath.FromSlash(data))); err != nil {
		t.Fatal(err)
	}
	orphan := filepath.Join(dir, "tree", "debris", "_versions")
	os.MkdirAll(orphan, 0o755)
	os.WriteFile(filepath.Join(orphan, ManifestName(1, NamingV2)), []byte("x"), 0o644)

	ins := mustInspect(t, ds, InspectOptions{})
	got := map[string]bool{}
	for _, w := range ins.Warnings {
		got[w.Key] = true
	}
	if len(ins.Problems) != 0 || !got["_refs/tags/gone.json"] || !got["tree/debris/"] || len(ins.Warnings) != 3 || !ins.Tags[0].Dangling {
		t.Errorf("problems %+v warnings %+v tags %+v", ins.Problems, ins.Warnings, ins.Tags)
	}
	if v := ins.Branches[0].Versions[2]; v.Missing != 1 {
		t.Errorf("v3 %+v", v)
	}
}

// What Inspect refuses, by error kind: a folder that is not a dataset, an
// absent version or branch, a dataset not at its store's root.
func TestInspectRefusals(t *testing.T) {
	ds, dir := inspectFixture(t, "v2-appends")
	if _, err := Inspect(bg, ds, InspectOptions{Version: 9, HasVersion: true}); !errors.Is(err, storage.ErrNotFound) || !strings.Contains(err.Error(), "no version 9 (versions: 1, 2, 3)") {
		t.Errorf("absent version: %v", err)
	}
	if _, err := Inspect(bg, ds, InspectOptions{Branch: "nope", HasBranch: true}); !errors.Is(err, storage.ErrNotFound) || !strings.Contains(err.Error(), `no branch "nope"`) {
		t.Errorf("absent branch: %v", err)
	}
	if _, err := Inspect(bg, ds, InspectOptions{Branch: "../x", HasBranch: true}); !errors.Is(err, ErrInvalidName) {
		t.Errorf("invalid branch: %v", err)
	}
	nested, err := Open(ds.Store, "sub.lance")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Inspect(bg, nested, InspectOptions{}); !errors.Is(err, storage.ErrInvalidArgument) {
		t.Errorf("dataset below the store's root: %v", err)
	}
	empty := filepath.Join(filepath.Dir(dir), "empty.lance")
	os.MkdirAll(filepath.Join(empty, "_versions"), 0o755)
	d, err := localfs.OpenReadOnly(empty)
	if err != nil {
		t.Fatal(err)
	}
	s, err := storage.NewStore(bg, "localfs", d)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := Inspect(bg, mustOpen(t, s, ""), InspectOptions{}); !errors.Is(err, ErrNotDataset) {
		t.Errorf("empty _versions/: %v", err)
	}
}
