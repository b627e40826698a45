package retention

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/retain-dev/retain/checkpoint"
	"github.com/retain-dev/retain/sdk/core"
	"github.com/retain-dev/retain/sdk/memstore"
	"github.com/retain-dev/retain/sdk/testkit"
)

// countedStore is a memstore holding n copies of the v2-appends fixture
// (three versions each), and the counter of its requests.
func countedStore(t *testing.T, n int) (*core.Store, *testkit.Counting) {
	t.Helper()
	cnt := testkit.NewCounting(memstore.New())
	s, err := core.NewStore(bg, "memstore", cnt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	s = s.At(core.Location{Scheme: "mem", Bucket: "cost"})
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
			_, err = s.PutBytes(bg, fmt.Sprintf("t%02d.lance/%s", i, filepath.ToSlash(rel)), b, core.PutOptions{})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return s, cnt
}

// TestRunRequestsPerTable: what cleanup run --keep-last 1 costs per table
// (the store-wide steps aside: the difference between 2 and 6 tables) on
// tables one checkpoint pins at their heads. Against a serial reading of
// the protocol, three requests per table are not made: reconcile judges
// the pin's tag from its listing of the table's tags instead of reading
// the tag again; root planning takes the pinned manifest reconcile just
// read under the same claim as read; and each table's plan is carried out
// as this run journaled it, not read back from the journal.
func TestRunRequestsPerTable(t *testing.T) {
	const perTable = 26 // 29 before
	cost := func(n int) int64 {
		s, cnt := countedStore(t, n)
		if _, err := checkpoint.Create(bg, s, "nightly", ""); err != nil {
			t.Fatal(err)
		}
		before := cnt.Counts().Total()
		rep, err := Run(bg, s, Policy{KeepLast: 1}, RunOptions{ConfirmWriteOutage: true})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Totals.VersionsRemoved != 2*n {
			t.Fatalf("removed %d versions, want %d", rep.Totals.VersionsRemoved, 2*n)
		}
		return cnt.Counts().Total() - before
	}
	r2, r6 := cost(2), cost(6)
	t.Logf("cleanup run: %d / %d requests (2 / 6 tables)", r2, r6)
	if got := float64(r6-r2) / 4; got > perTable {
		t.Errorf("cleanup run: %.2f requests per table (%d at 2 tables, %d at 6), want at most %d", got, r2, r6, perTable)
	}
}
