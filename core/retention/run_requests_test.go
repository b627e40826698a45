package retention

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/retain-dev/retain/core/checkpoint"
	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/memstore"
	"github.com/retain-dev/retain/core/storage/storagetest"
)

// countedStore is a memstore holding n copies of the v2-appends fixture
// (three versions each), and the counter of its requests.
func countedStore(t *testing.T, n int) (*storage.Store, *storagetest.Counting) {
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

// TestRunRequestsPerTable: what cleanup run --keep-last 1 costs per table
// (the store-wide steps aside: the difference between 2 and 6 tables) on
// tables one checkpoint pins at their heads. Against a serial reading of
// the protocol, three requests per table are not made: reconcile judges
// the pin's tag from its listing of the table's tags instead of reading
// the tag again; root planning takes the pinned manifest reconcile just
// read under the same claim as read; each table's plan is carried out as
// this run journaled it, not read back from the journal; planning lists
// _versions/ once, for the versions and the sweep; planning takes the
// tags reconcile read under the same claim instead of listing and reading
// them again; the recheck before deleting compares one listing of _refs/
// with the plan instead of reading every tag again; and a table that fits
// one listing page is planned and rechecked from one page of its root
// rather than a listing of each folder.
func TestRunRequestsPerTable(t *testing.T) {
	const perTable = 14 // 29 before; 26 before planning listed _versions/ once; 25 before the recheck compared listings; 24 before planning took the refs reconcile read and the recheck listed _refs/ once; 20 before a table of one page was listed whole; 15 before the plans were journaled together
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

// depthDriver adds delay to every request and records when each started
// and ended, so that a test can read the longest chain of requests one
// after another (the round trips a command costs at object-store latency).
type depthDriver struct {
	storage.Driver
	delay time.Duration
	mu    sync.Mutex
	spans [][2]time.Time
}

func (d *depthDriver) span() func() {
	start := time.Now()
	time.Sleep(d.delay)
	return func() {
		d.mu.Lock()
		d.spans = append(d.spans, [2]time.Time{start, time.Now()})
		d.mu.Unlock()
	}
}

func (d *depthDriver) Get(ctx context.Context, key string) (*storage.Reader, error) {
	defer d.span()()
	return d.Driver.Get(ctx, key)
}

func (d *depthDriver) Stat(ctx context.Context, key string) (storage.Info, error) {
	defer d.span()()
	return d.Driver.Stat(ctx, key)
}

func (d *depthDriver) Put(ctx context.Context, key string, body io.Reader, opts storage.PutOptions) (storage.Info, error) {
	defer d.span()()
	return d.Driver.Put(ctx, key, body, opts)
}

func (d *depthDriver) Delete(ctx context.Context, key string, opts storage.DeleteOptions) error {
	defer d.span()()
	return d.Driver.Delete(ctx, key, opts)
}

func (d *depthDriver) DeleteMany(ctx context.Context, keys []string) ([]storage.DeleteResult, error) {
	defer d.span()()
	return d.Driver.DeleteMany(ctx, keys)
}

func (d *depthDriver) List(ctx context.Context, opts storage.ListOptions) (storage.ListPage, error) {
	defer d.span()()
	return d.Driver.List(ctx, opts)
}

// reset forgets the requests so far.
func (d *depthDriver) reset() {
	d.mu.Lock()
	d.spans = nil
	d.mu.Unlock()
}

// depth is the longest chain of recorded requests each started after the
// one before it ended.
func (d *depthDriver) depth() int {
	d.mu.Lock()
	spans := append([][2]time.Time(nil), d.spans...)
	d.mu.Unlock()
	sort.Slice(spans, func(i, j int) bool { return spans[i][0].Before(spans[j][0]) })
	depth := make([]int, len(spans))
	best := 0
	for i, s := range spans {
		depth[i] = 1
		for j := range i {
			if !spans[j][1].After(s[0]) && depth[j]+1 > depth[i] {
				depth[i] = depth[j] + 1
			}
		}
		best = max(best, depth[i])
	}
	return best
}

// TestRunSerialDepth: the requests of cleanup run one after another, on
// one table at 5 ms a request. The plan's own registry head (read under
// the claim) is the one the boundaries are drafted on, not read again; the
// registry's own cleanup is read while the table is planned, its three
// reads side by side; the preflight's two listings go side by side;
// reconcile lists the sidecars and discovers the tables while it reads the
// registry head, and root planning takes the head and the tables reconcile
// read rather than read them again; a table's outcome is audited while the
// journal is saved.
func TestRunSerialDepth(t *testing.T) {
	const maxDepth = 33 // 53 before; 39 before planning listed _versions/ once; 38 before the recheck compared listings
	s, cnt := countedStore(t, 1)
	_ = cnt
	if _, err := checkpoint.Create(bg, s, "nightly", ""); err != nil {
		t.Fatal(err)
	}
	dd := &depthDriver{Driver: cnt, delay: 5 * time.Millisecond}
	ds, err := storage.NewStore(bg, "memstore", dd)
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	ds = ds.At(s.Location())
	dd.reset()
	if _, err := Run(bg, ds, Policy{KeepLast: 1}, RunOptions{ConfirmWriteOutage: true}); err != nil {
		t.Fatal(err)
	}
	got := dd.depth()
	t.Logf("cleanup run of 1 table: %d requests in series (%d in all)", got, len(dd.spans))
	if got > maxDepth {
		t.Errorf("cleanup run of 1 table: %d requests in series, want at most %d", got, maxDepth)
	}
}
