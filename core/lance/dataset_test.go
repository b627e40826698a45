package lance

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/retain-dev/retain/adapters/localfs"
	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/memstore"
	"github.com/retain-dev/retain/core/storage/storagetest"
)

func versionNumbers(vs []Version) []uint64 {
	out := make([]uint64, len(vs))
	for i, v := range vs {
		out[i] = v.N
	}
	return out
}

func TestManifestNames(t *testing.T) {
	for _, c := range []struct {
		n      uint64
		naming Naming
		name   string
	}{
		{1, NamingV1, "1.manifest"},
		{42, NamingV1, "42.manifest"},
		{1, NamingV2, "18446744073709551614.manifest"},
		{7, NamingV2, "18446744073709551608.manifest"},
	} {
		if got := ManifestName(c.n, c.naming); got != c.name {
			t.Errorf("ManifestName(%d, %s) = %s, want %s", c.n, c.naming, got, c.name)
		}
		n, nm, ok := parseManifestName(c.name)
		if !ok || n != c.n || nm != c.naming {
			t.Errorf("parseManifestName(%s) = %d %s %v", c.name, n, nm, ok)
		}
	}
	for _, name := range []string{"d9223372036854775809.manifest", ".tmp_3.manifest_0b1c", "3.manifest.tmp",
		"latest_version_hint.json", "03.manifest", ".manifest", "x.manifest", "1844674407370955161x.manifest"} {
		if _, _, ok := parseManifestName(name); ok {
			t.Errorf("parseManifestName(%q) accepted a name that is not a committed manifest", name)
		}
	}
}

// Both naming schemes, on datasets real Lance wrote.
func TestVersionsBothNamings(t *testing.T) {
	for _, c := range []struct {
		fixture string
		naming  Naming
		want    []uint64
	}{
		{"v2-appends", NamingV2, []uint64{1, 2, 3}},
		{"v1-naming", NamingV1, []uint64{1, 2, 3}},
		{"optimized", NamingV2, []uint64{7, 8, 9}}, // gaps after Lance's cleanup
	} {
		d, _ := openFixture(t, c.fixture)
		vs, err := d.Versions(bg)
		if err != nil {
			t.Fatalf("%s: %v", c.fixture, err)
		}
		if got := versionNumbers(vs); !equalU64(got, c.want) {
			t.Errorf("%s: versions %v, want %v", c.fixture, got, c.want)
		}
		for _, v := range vs {
			if v.Naming != c.naming || v.Key != d.Key(versionsDir+"/"+ManifestName(v.N, c.naming)) || v.Info.Size <= 0 {
				t.Errorf("%s: %+v", c.fixture, v)
			}
		}
		latest, err := d.Latest(bg)
		if err != nil || latest.N != c.want[len(c.want)-1] {
			t.Errorf("%s: Latest = %+v, %v", c.fixture, latest, err)
		}
		v, err := d.VersionAt(bg, c.want[0])
		if err != nil || v.N != c.want[0] {
			t.Errorf("%s: VersionAt(%d) = %+v, %v", c.fixture, c.want[0], v, err)
		}
		if _, err := d.VersionAt(bg, 5000); storage.KindOf(err) != storage.ErrNotFound {
			t.Errorf("%s: VersionAt(5000): %v, want not found", c.fixture, err)
		}
	}
}

func equalU64(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func writeFile(t *testing.T, p, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Detached manifests, in-flight .tmp files, the hint and subfolders are
// not versions, for either naming and for Latest's fast path too.
func TestVersionsSkipNonCommitted(t *testing.T) {
	for _, fixture := range []string{"v2-appends", "v1-naming"} {
		d, dir := openFixture(t, fixture)
		vd := filepath.Join(dir, d.Root, versionsDir)
		for _, name := range []string{"d9223372036854775812.manifest", ".tmp_4.manifest_5f2a", "4.manifest.tmp",
			"sub/18446744073709551000.manifest", "d18446744073709551000.manifest", "notes.txt"} {
			writeFile(t, filepath.Join(vd, name), "junk")
		}
		vs, err := d.Versions(bg)
		if err != nil {
			t.Fatalf("%s: %v", fixture, err)
		}
		if got := versionNumbers(vs); !equalU64(got, []uint64{1, 2, 3}) {
			t.Errorf("%s: versions %v", fixture, got)
		}
		if l, err := d.Latest(bg); err != nil || l.N != 3 {
			t.Errorf("%s: Latest = %d, %v", fixture, l.N, err)
		}
	}
}

func TestMixedNamingRefused(t *testing.T) {
	d, dir := openFixture(t, "v2-appends")
	b, err := os.ReadFile(filepath.Join(dir, d.Root, versionsDir, ManifestName(1, NamingV2)))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, d.Root, versionsDir, "1.manifest"), string(b))
	_, err = d.Versions(bg)
	if !errors.Is(err, ErrMixedNaming) || !strings.Contains(err.Error(), d.Root+"/_versions") {
		t.Fatalf("Versions of a mixed folder: %v", err)
	}
	// "1.manifest" sorts before the V2 names, so Latest's one page sees it
	// and falls back to the full listing, which refuses.
	if _, err := d.Latest(bg); !errors.Is(err, ErrMixedNaming) {
		t.Fatalf("Latest of a mixed folder: %v", err)
	}
	if _, err := d.VersionAt(bg, 1); !errors.Is(err, ErrMixedNaming) {
		t.Fatalf("VersionAt of a mixed folder: %v", err)
	}
	// The way out the error names: where both names exist (same bytes),
	// remove the V1 one; then the folder reads again.
	if !strings.Contains(err.Error(), "remove the V1 one") {
		t.Fatalf("the refusal names no way out: %v", err)
	}
	if err := os.Remove(filepath.Join(dir, d.Root, versionsDir, "1.manifest")); err != nil {
		t.Fatal(err)
	}
	if vs, err := d.Versions(bg); err != nil || len(vs) != 3 {
		t.Fatalf("after the way out: %v %v", vs, err)
	}
}

func TestNotADataset(t *testing.T) {
	s := openStore(t, t.TempDir())
	d := mustOpen(t, s, "db/missing.lance")
	if _, err := d.Versions(bg); !errors.Is(err, ErrNotDataset) {
		t.Fatalf("Versions: %v", err)
	}
	if _, err := d.Latest(bg); !errors.Is(err, ErrNotDataset) {
		t.Fatalf("Latest: %v", err)
	}
	if _, err := Open(s, "a/../b"); storage.KindOf(err) != storage.ErrInvalidArgument {
		t.Fatalf("Open of a bad root: %v", err)
	}
}

// Latest costs one listing request with V2 names, counted at the driver.
func TestLatestOneRequest(t *testing.T) {
	// A fixture grown with many versions, so a full listing would need
	// more than one page: extra copies of manifests under V2 names.
	dir := t.TempDir()
	if err := os.CopyFS(filepath.Join(dir, "t.lance"), os.DirFS(filepath.Join("testdata", "v2-appends.lance"))); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "t.lance", versionsDir, ManifestName(3, NamingV2)))
	if err != nil {
		t.Fatal(err)
	}
	for n := uint64(4); n <= 1500; n++ {
		writeFile(t, filepath.Join(dir, "t.lance", versionsDir, ManifestName(n, NamingV2)), string(b))
	}
	writeFile(t, filepath.Join(dir, "t.lance", versionsDir, ".tmp_1501.manifest_x"), "in flight")

	fs, err := localfs.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	mem := memstore.New()
	for name, drv := range map[string]storage.Driver{"localfs": fs, "memstore": mem} {
		c := storagetest.NewCounting(drv)
		s, err := storage.NewStore(bg, name, c)
		if err != nil {
			t.Fatal(err)
		}
		d := mustOpen(t, s, "t.lance")
		if name == "memstore" {
			fillFrom(t, s, filepath.Join(dir, "t.lance"), "t.lance")
		}
		before := c.Counts()
		v, err := d.Latest(bg)
		if err != nil {
			t.Fatal(err)
		}
		got := c.Counts()
		if v.N != 1500 || v.Naming != NamingV2 {
			t.Errorf("%s: Latest = %+v", name, v)
		}
		if got.Total()-before.Total() != 1 || got.List-before.List != 1 {
			t.Errorf("%s: Latest made %+v requests, want one listing", name, got)
		}
		// The full listing of the same folder takes several pages.
		before = c.Counts()
		if _, err := d.Versions(bg); err != nil {
			t.Fatal(err)
		}
		if n := c.Counts().List - before.List; n < 2 {
			t.Errorf("%s: the full listing took %d requests; the test needs more than one page", name, n)
		}
		s.Close()
	}
}

// fillFrom copies the files under dir into the store under prefix.
func fillFrom(t *testing.T, s *storage.Store, dir, prefix string) {
	t.Helper()
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		_, err = s.PutBytes(bg, prefix+"/"+filepath.ToSlash(rel), b, storage.PutOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}
