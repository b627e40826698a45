package checkpoint

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/memstore"
	"github.com/retain-dev/retain/core/storage/storagetest"
)

// countedTables is a memstore holding n copies of the v2-appends fixture
// (t00.lance, t01.lance, ...), and the counter of its requests.
func countedTables(t *testing.T, n int) (*storage.Store, *storagetest.Counting) {
	t.Helper()
	cnt := storagetest.NewCounting(memstore.New())
	s, err := storage.NewStore(bg, "memstore", cnt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	s = s.At(storage.Location{Scheme: "mem", Bucket: "cost"})
	root := filepath.Join(fixtures, "v2-appends.lance")
	for i := range n {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			_, err = s.PutBytes(bg, fmt.Sprintf("t%02d.lance/%s", i, filepath.ToSlash(rel)), b, storage.PutOptions{})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return s, cnt
}

// TestCreateRequestsPerTable: what checkpoint create costs per table, the
// store-wide steps aside (measured as the difference between 2 and 6
// tables). Capture reads each head (a listing and the manifest); the tag
// is one conditional write (no listing to find the manifest's size: the
// physical ref has it); after the tags each head is listed again, which
// both revalidates the capture (the same heads twice) and verifies the
// tagged version, reading nothing more of a head that is the same object.
// The second create, on tables whose heads the first pinned, costs the
// same: the incarnation check compares against the head capture just read
// instead of reading the pinned manifest again.
func TestCreateRequestsPerTable(t *testing.T) {
	const perTable = 4 // list + manifest, tag write, list
	cost := func(n int) (first, second int64) {
		s, cnt := countedTables(t, n)
		before := cnt.Counts().Total()
		if _, err := Create(bg, s, "first", ""); err != nil {
			t.Fatal(err)
		}
		mid := cnt.Counts().Total()
		if _, err := Create(bg, s, "second", ""); err != nil {
			t.Fatal(err)
		}
		return mid - before, cnt.Counts().Total() - mid
	}
	f2, s2 := cost(2)
	f6, s6 := cost(6)
	t.Logf("first create %d / %d requests, second %d / %d (2 / 6 tables)", f2, f6, s2, s6)
	if got := float64(f6-f2) / 4; got > perTable {
		t.Errorf("first create: %.2f requests per table (%d at 2 tables, %d at 6), want at most %d", got, f2, f6, perTable)
	}
	if got := float64(s6-s2) / 4; got > perTable {
		t.Errorf("second create: %.2f requests per table (%d at 2 tables, %d at 6), want at most %d", got, s2, s6, perTable)
	}
}

// TestReconcileRequestsPerTable: reconcile of a store whose one checkpoint
// pins every table costs per table the listing of its tags (each tag file
// read with it) and one read of the pinned manifest; the pin's tag is
// judged from that listing, not read a second time.
func TestReconcileRequestsPerTable(t *testing.T) {
	const perTable = 3 // tag listing + the tag, the pinned manifest
	cost := func(n int) int64 {
		s, cnt := countedTables(t, n)
		if _, err := Create(bg, s, "nightly", ""); err != nil {
			t.Fatal(err)
		}
		before := cnt.Counts().Total()
		if _, err := Reconcile(bg, s); err != nil {
			t.Fatal(err)
		}
		return cnt.Counts().Total() - before
	}
	r2, r6 := cost(2), cost(6)
	t.Logf("reconcile %d / %d requests (2 / 6 tables)", r2, r6)
	if got := float64(r6-r2) / 4; got > perTable {
		t.Errorf("reconcile: %.2f requests per table (%d at 2 tables, %d at 6), want at most %d", got, r2, r6, perTable)
	}
}
