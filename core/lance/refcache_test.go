package lance

import (
	"reflect"
	"testing"
	"time"

	"github.com/retain-dev/retain/adapters/localfs"
	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/storagetest"
)

// TestRefCacheReadsOnlyWhatChanged: under a RefCache, reading the refs
// again reads no ref file whose listing shows the token it was read at,
// gives what a fresh read gives, and reads again the one tag rewritten.
func TestRefCacheReadsOnlyWhatChanged(t *testing.T) {
	dir := copyFixture(t, "branch-tag")
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
	d := mustOpen(t, s, "branch-tag.lance")
	ctx := WithRefCache(bg, NewRefCache())

	first, err := d.ReadRefs(ctx)
	if err != nil || len(first.Tags) != 2 {
		t.Fatalf("%v %+v", err, first)
	}
	firstBranches, err := first.Branches(ctx, d)
	if err != nil || len(firstBranches) != 2 {
		t.Fatalf("%v %+v", err, firstBranches)
	}
	before := cnt.Counts()
	again, err := d.ReadRefs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	againBranches, err := again.Branches(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	if got := cnt.Counts().Get - before.Get; got != 0 {
		t.Errorf("the second read read %d ref files, want 0", got)
	}
	fresh, err := d.ReadRefs(bg)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(again.Tags, fresh.Tags) || !reflect.DeepEqual(againBranches, firstBranches) {
		t.Fatalf("cached refs differ from a fresh read:\n%+v\n%+v", again.Tags, fresh.Tags)
	}

	// One tag rewritten: only it is read again, and its new metadata shows.
	if _, err := d.UpdateTagFile(bg, fresh.Tags[0], map[string]string{"k": "v"}, UpdateTagOptions{}); err != nil {
		t.Fatal(err)
	}
	before = cnt.Counts()
	third, err := d.ReadRefs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := cnt.Counts().Get - before.Get; got != 1 {
		t.Errorf("after one tag changed, %d ref files were read, want 1", got)
	}
	if third.Tags[0].Metadata["k"] != "v" {
		t.Fatalf("the rewritten tag reads as %+v", third.Tags[0])
	}
}

// TestRefCacheMatchesTheWholeListing: the same token with another size or
// modification time in the listing is read again, never answered from
// memory (a token built from inode, times and size is matched whole).
func TestRefCacheMatchesTheWholeListing(t *testing.T) {
	c := NewRefCache()
	at := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)
	c.remember("s", "k", []byte("abc"), storage.Info{Key: "k", Version: "v1", Size: 3, ModTime: at})
	for _, tc := range []struct {
		l    storage.Info
		want bool
	}{
		{storage.Info{Key: "k", Version: "v1", Size: 3, ModTime: at}, true},
		{storage.Info{Key: "k", Version: "v1", Size: 3}, true},
		{storage.Info{Key: "k", Version: "v1", Size: 4, ModTime: at}, false},
		{storage.Info{Key: "k", Version: "v1", Size: 3, ModTime: at.Add(time.Nanosecond)}, false},
		{storage.Info{Key: "k", Version: "v2", Size: 3, ModTime: at}, false},
		{storage.Info{Key: "k", Version: "", Size: 3, ModTime: at}, false},
	} {
		if _, _, ok := c.lookup("s", tc.l); ok != tc.want {
			t.Errorf("%+v: hit %v, want %v", tc.l, ok, tc.want)
		}
	}
	if _, _, ok := c.lookup("other store", storage.Info{Key: "k", Version: "v1", Size: 3, ModTime: at}); ok {
		t.Error("another store's object answered from memory")
	}
}
