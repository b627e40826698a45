package lance

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/retain-dev/retain/core/storage"
)

// refFixture is the part of testdata/fixtures.json (what real Lance
// reported when the committed fixtures were built) the ref tests compare
// with.
type refFixture struct {
	Table    string                    `json:"table"`
	Tags     map[string]refLanceTag    `json:"tags"`
	Branches map[string]refLanceBranch `json:"branches"`
	Versions map[string][]struct {
		Version uint64 `json:"version"`
	} `json:"versions"`
}

// refLoadFixture copies testdata/<table> into a memory store.
func refLoadFixture(t *testing.T, table string) *Dataset {
	t.Helper()
	s := refMemStore(t)
	src := filepath.Join("testdata", table)
	err := filepath.WalkDir(src, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel("testdata", p)
		_, err = s.PutBytes(refCtx, filepath.ToSlash(rel), b, storage.PutOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	d, err := Open(s, table)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// The committed fixtures' tags and branches, read by retain without Node,
// match what real Lance listed when it built them; each branch's head is
// Lance's latest version of it.
func TestRefsOfFixtures(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "fixtures.json"))
	if err != nil {
		t.Skipf("no fixtures: %v", err)
	}
	var fixtures map[string]refFixture
	if err := json.Unmarshal(b, &fixtures); err != nil {
		t.Fatal(err)
	}
	checked := 0
	for name, f := range fixtures {
		if f.Table == "" {
			continue
		}
		d := refLoadFixture(t, f.Table)
		tags, err := d.ListTags(refCtx)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(tags) != len(f.Tags) {
			t.Errorf("%s: retain lists tags %q, Lance %v", name, refTagNames(tags), f.Tags)
		}
		for _, tg := range tags {
			l, ok := f.Tags[tg.Name]
			if !ok || l.Version != tg.Version || l.ManifestSize != tg.ManifestSize {
				t.Errorf("%s: tag %s retain %+v, Lance %+v", name, tg.Name, tg, l)
			}
			src := d
			if tg.Branch != "" {
				src, _ = d.Branch(tg.Branch)
			}
			if v, err := src.VersionAt(refCtx, tg.Version); err != nil || uint64(v.Info.Size) != tg.ManifestSize {
				t.Errorf("%s: tag %s names %+v, %v", name, tg.Name, v, err)
			}
			checked++
		}
		bs, err := d.ListBranches(refCtx)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(bs) != len(f.Branches) {
			t.Errorf("%s: retain lists %d branches, Lance %v", name, len(bs), f.Branches)
		}
		for _, br := range bs {
			l, ok := f.Branches[br.Name]
			lp := ""
			if ok && l.ParentBranch != nil {
				lp = *l.ParentBranch
			}
			if !ok || lp != br.ParentBranch || l.ParentVersion != br.ParentVersion || l.ManifestSize != br.ManifestSize {
				t.Errorf("%s: branch %s retain %+v, Lance %+v", name, br.Name, br, l)
			}
			if vs := f.Versions[br.Name]; len(vs) > 0 {
				if h, err := d.BranchHead(refCtx, br.Name); err != nil || h.N != vs[len(vs)-1].Version {
					t.Errorf("%s: head of %s = %+v, %v; Lance's latest %d", name, br.Name, h, err, vs[len(vs)-1].Version)
				}
			}
			if !strings.Contains(br.Info.Key, "_refs/branches/") {
				t.Errorf("%s: branch key %s", name, br.Info.Key)
			}
			checked++
		}
	}
	if checked == 0 {
		t.Skip("the fixtures carry no tags or branches")
	}
	t.Logf("%d tags and branches of the committed fixtures checked", checked)
}
