package lance

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/retain-dev/retain/adapters/localfs"
	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/storagetest"
)

// pagedDriver cuts listing pages to max objects (0: as the store pages),
// and can hide one key from listings of a whole table root (a page read
// before that key was written).
type pagedDriver struct {
	storage.Driver
	max       atomic.Int64
	hide      atomic.Value // string: the key hidden from whole-root pages
	wholeRoot string
}

func (p *pagedDriver) List(ctx context.Context, opts storage.ListOptions) (storage.ListPage, error) {
	page, err := p.Driver.List(ctx, opts)
	if err != nil {
		return page, err
	}
	if h, _ := p.hide.Load().(string); h != "" && opts.Prefix == p.wholeRoot {
		kept := page.Objects[:0:0]
		for _, o := range page.Objects {
			if o.Key != h {
				kept = append(kept, o)
			}
		}
		page.Objects = kept
	}
	if m := int(p.max.Load()); m > 0 && len(page.Objects) > m {
		page.Objects, page.More = page.Objects[:m], true
	}
	return page, nil
}

func pagedStore(t *testing.T, dir, root string) (*storage.Store, *pagedDriver, *storagetest.Counting) {
	t.Helper()
	drv, err := localfs.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	p := &pagedDriver{Driver: drv, wholeRoot: root + "/"}
	cnt := storagetest.NewCounting(p)
	s, err := storage.NewStore(bg, "localfs", cnt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, p, cnt
}

// TestWholeListingPlansAsFolderByFolder: a table that fits one listing page
// is planned from that page (one listing request in all) into the plan
// listing folder by folder makes, on every fixture: branches (nested
// ones too), indexes, deletions, compaction, V1 names.
func TestWholeListingPlansAsFolderByFolder(t *testing.T) {
	for _, fx := range []string{"branch-tag", "deletes", "index", "optimized", "update", "v1-naming", "v2-appends"} {
		t.Run(fx, func(t *testing.T) {
			dir := copyFixture(t, fx)
			s, pd, cnt := pagedStore(t, dir, fx+".lance")
			d := mustOpen(t, s, fx+".lance")
			before := cnt.Counts()
			whole, err := d.PlanCleanup(bg, Policy{KeepLast: 1})
			if err != nil {
				t.Fatal(err)
			}
			if got := cnt.Counts().List - before.List; got != 1 || !whole.Snapshot.Whole {
				t.Errorf("planned with %d listings (whole %v), want 1", got, whole.Snapshot.Whole)
			}
			pd.max.Store(3) // no table fits: folder by folder
			before = cnt.Counts()
			folders, err := d.PlanCleanup(bg, Policy{KeepLast: 1})
			if err != nil {
				t.Fatal(err)
			}
			if folders.Snapshot.Whole || cnt.Counts().List-before.List < 6 {
				t.Fatalf("a table over one page: whole %v, %d listings", folders.Snapshot.Whole, cnt.Counts().List-before.List)
			}
			folders.Snapshot.Whole = true
			if !reflect.DeepEqual(whole.Files, folders.Files) || !reflect.DeepEqual(whole.Versions, folders.Versions) ||
				!reflect.DeepEqual(whole.Snapshot, folders.Snapshot) || !reflect.DeepEqual(whole.Totals, folders.Totals) {
				t.Errorf("the plans differ:\nwhole   %+v\nfolders %+v", whole.Files, folders.Files)
			}
			// Executed through the whole recheck, after the table outgrew one
			// page (the recheck lists folder by folder), and it deletes.
			pd.max.Store(0)
			plan, err := d.PlanCleanup(bg, Policy{KeepLast: 1})
			if err != nil {
				t.Fatal(err)
			}
			pd.max.Store(3)
			res, err := d.ExecuteCleanup(bg, plan)
			if err != nil || res.FilesDeleted != len(plan.Files) {
				t.Fatalf("%v: deleted %d of %d", err, res.FilesDeleted, len(plan.Files))
			}
		})
	}
}

// TestWholeListingMissingKeptFileRetries: one page is not a snapshot — a
// deletion or index file written just before the version that names it
// sorts before _versions/ and can be missing from the page. A plan whose
// kept version then looks broken is made again folder by folder, and
// succeeds; a version that is really broken is still refused.
func TestWholeListingMissingKeptFileRetries(t *testing.T) {
	dir := copyFixture(t, "deletes")
	s, pd, _ := pagedStore(t, dir, "deletes.lance")
	d := mustOpen(t, s, "deletes.lance")
	want, err := d.PlanCleanup(bg, Policy{KeepLast: 1})
	if err != nil {
		t.Fatal(err)
	}
	objs, err := s.List(bg, "deletes.lance/_deletions/", 0)
	if err != nil || len(objs) == 0 {
		t.Fatalf("%v: the fixture has %d deletion files", err, len(objs))
	}
	var needed string
	for _, o := range objs {
		if want.kept(o.Key) {
			needed = o.Key
		}
	}
	if needed == "" {
		t.Fatal("no deletion file the kept version references")
	}
	pd.hide.Store(needed)
	got, err := d.PlanCleanup(bg, Policy{KeepLast: 1})
	if err != nil {
		t.Fatalf("a kept file missing from the whole page only: %v", err)
	}
	if got.Snapshot.Whole || !reflect.DeepEqual(got.Files, want.Files) {
		t.Errorf("the retry: whole %v, files %+v, want %+v", got.Snapshot.Whole, got.Files, want.Files)
	}
	pd.hide.Store("")
	// Really gone: refused however it is listed.
	if err := s.Delete(bg, needed, storage.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.PlanCleanup(bg, Policy{KeepLast: 1}); !errors.Is(err, ErrKeptVersionBroken) {
		t.Fatalf("a kept version whose deletion file is gone: %v, want ErrKeptVersionBroken", err)
	}
}

// kept reports whether key is a file the plan keeps and checked (a kept
// version references it).
func (p *Plan) kept(key string) bool {
	for _, f := range p.Files {
		if f.Key == key {
			return false
		}
	}
	return strings.Contains(key, "/_deletions/")
}
