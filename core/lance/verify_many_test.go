package lance

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/retain-dev/retain/adapters/localfs"
	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/storagetest"
)

// TestVerifyPhysRefsReadsOnlyWhatChanged: under a RefCache, verifying the
// same pinned commits again reads no manifest whose listing shows the
// token it verified at; a manifest rewritten is read again, one deleted is
// missing, not remembered, and one that no longer matches is refused.
func TestVerifyPhysRefsReadsOnlyWhatChanged(t *testing.T) {
	dir := copyFixture(t, "v2-appends")
	drv, err := localfs.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	cnt := storagetest.NewCounting(drv)
	s, err := storage.NewStore(bg, "localfs", cnt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	d := mustOpen(t, s, "v2-appends.lance")
	var refs []PhysRef
	for v := uint64(1); v <= 3; v++ {
		_, ref, err := d.ReadPinned(bg, PhysRef{Version: v})
		if err != nil {
			t.Fatal(err)
		}
		refs = append(refs, ref)
	}
	ctx := WithRefCache(bg, NewRefCache())
	verify := func(label string) ([]PhysRef, []error, int64, int64) {
		t.Helper()
		before := cnt.Counts()
		gots, errs := d.VerifyPhysRefs(ctx, refs)
		after := cnt.Counts()
		return gots, errs, after.Get - before.Get, after.List - before.List
	}
	ok := func(label string, gots []PhysRef, errs []error, skip int) {
		t.Helper()
		for i := range refs {
			if i != skip && (errs[i] != nil || !refs[i].Matches(gots[i])) {
				t.Fatalf("%s: ref %d: %v %v", label, i, gots[i], errs[i])
			}
		}
	}
	gots, errs, gets, _ := verify("first")
	ok("first", gots, errs, -1)
	if gets != 3 {
		t.Fatalf("the first verify read %d manifests, want 3", gets)
	}
	gots, errs, gets, lists := verify("again")
	ok("again", gots, errs, -1)
	if gets != 0 || lists != 1 {
		t.Fatalf("verifying unchanged commits again: %d reads and %d listings, want 0 and 1", gets, lists)
	}

	// Another commit pinned at v2 (the table recreated since it was
	// pinned): the manifest verified for v2's pin does not verify it.
	other := refs[1]
	other.SHA256 = refs[0].SHA256
	if _, errs := d.VerifyPhysRefs(ctx, []PhysRef{other, refs[2]}); !errors.Is(errs[0], ErrPhysRefMismatch) || errs[1] != nil {
		t.Fatalf("another commit at a remembered manifest: %v", errs)
	}

	// v2's manifest rewritten with its own bytes: a new token, read again.
	m2 := filepath.Join(dir, "v2-appends.lance", "_versions", ManifestName(2, NamingV2))
	b, err := os.ReadFile(m2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutBytes(bg, "v2-appends.lance/_versions/"+ManifestName(2, NamingV2), b, storage.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	gots, errs, gets, _ = verify("rewritten")
	ok("rewritten", gots, errs, -1)
	if gets != 1 {
		t.Fatalf("after a rewrite: %d reads, want 1", gets)
	}

	// v2's manifest replaced by v3's bytes: refused, not remembered.
	b3, err := os.ReadFile(filepath.Join(dir, "v2-appends.lance", "_versions", ManifestName(3, NamingV2)))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(m2, b3, 0o644); err != nil {
		t.Fatal(err)
	}
	_, errs, _, _ = verify("replaced")
	if errs[1] == nil {
		t.Fatal("a manifest replaced by another commit's bytes verified from memory")
	}
	// v1's manifest deleted: missing, not remembered.
	if err := os.Remove(filepath.Join(dir, "v2-appends.lance", "_versions", ManifestName(1, NamingV2))); err != nil {
		t.Fatal(err)
	}
	gots, errs, _, _ = verify("deleted")
	if !errors.Is(errs[0], storage.ErrNotFound) {
		t.Fatalf("a deleted manifest: %v, want ErrNotFound", errs[0])
	}
	if errs[2] != nil || !refs[2].Matches(gots[2]) {
		t.Fatalf("an unchanged commit beside them: %v %v", gots[2], errs[2])
	}
}

// TestVerifyPhysRefsWithoutACacheReadsEach: a one-shot caller verifies
// every commit by reading it, and lists nothing.
func TestVerifyPhysRefsWithoutACacheReadsEach(t *testing.T) {
	dir := copyFixture(t, "v2-appends")
	drv, err := localfs.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	cnt := storagetest.NewCounting(drv)
	s, err := storage.NewStore(bg, "localfs", cnt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	d := mustOpen(t, s, "v2-appends.lance")
	var refs []PhysRef
	for v := uint64(1); v <= 3; v++ {
		_, ref, err := d.ReadPinned(bg, PhysRef{Version: v})
		if err != nil {
			t.Fatal(err)
		}
		refs = append(refs, ref)
	}
	for range 2 {
		before := cnt.Counts()
		_, errs := d.VerifyPhysRefs(bg, refs)
		after := cnt.Counts()
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		if after.Get-before.Get != 3 || after.List != before.List {
			t.Fatalf("%d reads and %d listings, want 3 and 0", after.Get-before.Get, after.List-before.List)
		}
	}
}
