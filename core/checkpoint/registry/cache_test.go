package registry

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/memstore"
	"github.com/retain-dev/retain/core/storage/storagetest"
)

// countedRegistry is a registry of n committed versions whose gets and
// listings of version objects are counted.
func countedRegistry(t *testing.T, n int) (*Registry, *storage.Store, *atomic.Int64, *atomic.Int64) {
	t.Helper()
	var gets, lists atomic.Int64
	h := storagetest.NewHook(memstore.New()).Before(func(c storagetest.Call) error {
		switch {
		case c.Op == storagetest.OpGet && strings.HasPrefix(c.Key, VersionsPrefix):
			gets.Add(1)
		case c.Op == storagetest.OpList && strings.HasPrefix(c.Key, VersionsPrefix):
			lists.Add(1)
		}
		return nil
	})
	s, err := storage.NewStore(bg, "memory", h)
	if err != nil {
		t.Fatal(err)
	}
	reg := Open(s, Options{})
	for i := range n {
		v, snap, err := reg.Head(bg)
		if err != nil {
			t.Fatal(err)
		}
		d := snap.Next()
		reserveT(t, d, fmt.Sprintf("cp-%d", i))
		if _, err := reg.Commit(bg, v, d); err != nil {
			t.Fatal(err)
		}
	}
	return reg, s, &gets, &lists
}

// TestReadRefsAnswersUnchangedVersionsFromTheListing: under a Cache a
// second ReadRefs of unchanged versions costs one listing and no get,
// and a version rewritten or deleted since is read again and judged as it
// is now: the cache never answers for bytes it did not read.
func TestReadRefsAnswersUnchangedVersionsFromTheListing(t *testing.T) {
	reg, s, gets, lists := countedRegistry(t, 6)
	vs := []Version{2, 4, 5, 6}
	want := make([]Ref, len(vs))
	for i, v := range vs {
		ref, err := reg.ReadRef(bg, v)
		if err != nil {
			t.Fatal(err)
		}
		want[i] = ref
	}
	read := func(label string) []Ref {
		t.Helper()
		gets.Store(0)
		lists.Store(0)
		got, err := reg.ReadRefs(ctxWith, vs)
		if err != nil {
			t.Fatalf("%s: %v", label, err)
		}
		return got
	}
	ctxWith = WithCache(bg, NewCache())
	if got := read("first"); fmt.Sprint(got) != fmt.Sprint(want) || gets.Load() != int64(len(vs)) {
		t.Fatalf("first read: %v with %d gets, want %v with %d", got, gets.Load(), want, len(vs))
	}
	if got := read("again"); fmt.Sprint(got) != fmt.Sprint(want) || gets.Load() != 0 || lists.Load() != 1 {
		t.Fatalf("unchanged versions: %v with %d gets and %d listings, want %v with 0 and 1", got, gets.Load(), lists.Load(), want)
	}

	// Version 4 rewritten with the same bytes: a new token, read again.
	b, _, err := s.ReadAll(bg, VersionKey(4))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutBytes(bg, VersionKey(4), b, storage.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := read("rewritten"); fmt.Sprint(got) != fmt.Sprint(want) || gets.Load() != 1 {
		t.Fatalf("after a rewrite: %v with %d gets, want %v with 1", got, gets.Load(), want)
	}

	// Version 5 deleted: missing (the zero Ref), not the remembered one.
	if err := s.Delete(bg, VersionKey(5), storage.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	got := read("deleted")
	if !got[2].IsZero() || got[0] != want[0] || got[1] != want[1] || got[3] != want[3] {
		t.Fatalf("after deleting version 5: %v", got)
	}

	// Version 2 rewritten with other bytes: refused, as ReadRef refuses it.
	if _, err := s.PutBytes(bg, VersionKey(2), []byte("{}"), storage.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.ReadRefs(ctxWith, vs); !errors.Is(err, ErrCorruptRegistry) {
		t.Fatalf("a rewritten version read from memory: %v, want ErrCorruptRegistry", err)
	}
}

// TestReadRefsWithoutACacheReadsEach: a one-shot caller reads every
// version, as ReadRef, and lists nothing.
func TestReadRefsWithoutACacheReadsEach(t *testing.T) {
	reg, _, gets, lists := countedRegistry(t, 3)
	for range 2 {
		gets.Store(0)
		lists.Store(0)
		got, err := reg.ReadRefs(bg, []Version{1, 3, 9})
		if err != nil || got[0].IsZero() || got[1].IsZero() || !got[2].IsZero() {
			t.Fatalf("refs %v, %v", got, err)
		}
		if gets.Load() != 3 || lists.Load() != 0 {
			t.Fatalf("%d gets and %d listings, want 3 and 0", gets.Load(), lists.Load())
		}
	}
}

// TestReadRefsListsNoMorePagesThanVersions: a long history between the
// oldest and the newest version wanted is listed at most one page per
// version wanted, then read.
func TestReadRefsListsNoMorePagesThanVersions(t *testing.T) {
	reg, _, gets, lists := countedRegistry(t, 40)
	// Pages of 3 keys: the 40 versions would take 14 pages.
	defer func(n int) { refsListPage = n }(refsListPage)
	refsListPage = 3
	ctx := WithCache(bg, NewCache())
	vs := []Version{1, 40}
	for range 2 {
		gets.Store(0)
		lists.Store(0)
		got, err := reg.ReadRefs(ctx, vs)
		if err != nil || got[0].IsZero() || got[1].IsZero() {
			t.Fatalf("refs %v, %v", got, err)
		}
		if lists.Load() > int64(len(vs)) {
			t.Fatalf("%d listing pages for %d versions", lists.Load(), len(vs))
		}
	}
	if gets.Load() != 1 {
		t.Fatalf("the second read took %d gets, want 1 (version 1, past the pages listed)", gets.Load())
	}
}

var ctxWith = bg

// TestCacheReadsOnlyNewSegments: under a Cache, a head read by a new
// Registry (each command opens its own) takes the segments an earlier one
// read while the store still lists them: one listing, and the segments a
// new commit added. A segment deleted since is not answered from memory:
// the head is refused as it is without the cache.
func TestCacheReadsOnlyNewSegments(t *testing.T) {
	t.Setenv(SpillEnv, "0")
	var segGets, segLists atomic.Int64
	counted := storagetest.NewHook(memstore.New()).Before(func(c storagetest.Call) error {
		switch {
		case c.Op == storagetest.OpGet && strings.HasPrefix(c.Key, SegmentsPrefix):
			segGets.Add(1)
		case c.Op == storagetest.OpList && strings.HasPrefix(c.Key, SegmentsPrefix):
			segLists.Add(1)
		}
		return nil
	})
	cs, err := storage.NewStore(bg, "memory", counted)
	if err != nil {
		t.Fatal(err)
	}
	commit := func(name string) {
		t.Helper()
		reg := Open(cs, Options{})
		v, snap, err := reg.Head(bg)
		if err != nil {
			t.Fatal(err)
		}
		d := snap.Next()
		reserveT(t, d, name)
		if _, err := reg.Commit(bg, v, d); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 5 {
		commit(fmt.Sprintf("cp-%d", i))
	}
	ctx := WithCache(bg, NewCache())
	head := func() (*Snapshot, int64, int64, error) {
		segGets.Store(0)
		segLists.Store(0)
		_, snap, err := Open(cs, Options{}).Head(ctx)
		return snap, segGets.Load(), segLists.Load(), err
	}
	first, gets, _, err := head()
	if err != nil || gets < 3 {
		t.Fatalf("first head: %d segment gets, %v (the test needs a segmented head)", gets, err)
	}
	again, gets, lists, err := head()
	if err != nil || gets != 0 || lists != 1 {
		t.Fatalf("a second head over unchanged segments: %d gets and %d listings, %v; want 0 and 1", gets, lists, err)
	}
	if fmt.Sprint(again.Live()) != fmt.Sprint(first.Live()) {
		t.Fatal("the head from memory differs from the head read")
	}
	commit("cp-new")
	if _, gets, _, err = head(); err != nil || gets == 0 || gets > 3 {
		t.Fatalf("after one commit: %d segment gets, %v; want what it added (at most a bucket and a rows object, and their predecessor's)", gets, err)
	}
	// Every segment rewritten in place with other bytes of its size:
	// refused, not answered from memory.
	objs, err := cs.List(bg, SegmentsPrefix, 0)
	if err != nil || len(objs) == 0 {
		t.Fatal(objs, err)
	}
	saved := map[string][]byte{}
	for _, o := range objs {
		b, _, err := cs.ReadAll(bg, o.Key)
		if err != nil {
			t.Fatal(err)
		}
		saved[o.Key] = b
		if _, err := cs.PutBytes(bg, o.Key, bytes.Repeat([]byte("x"), len(b)), storage.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, _, err := head(); !errors.Is(err, ErrCorruptRegistry) {
		t.Fatalf("a head whose segments were rewritten read from memory: %v, want ErrCorruptRegistry", err)
	}
	for k, b := range saved {
		if _, err := cs.PutBytes(bg, k, b, storage.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, _, err := head(); err != nil {
		t.Fatalf("the segments restored: %v", err)
	}
	// A segment the head references, deleted: refused, not remembered.
	for _, o := range objs {
		if err := cs.Delete(bg, o.Key, storage.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, _, err := head(); !errors.Is(err, ErrCorruptRegistry) {
		t.Fatalf("a head whose segments are gone read from memory: %v, want ErrCorruptRegistry", err)
	}
}

// TestCacheListingFailureReadsInstead: a listing that fails (a transient
// error, a credential that may get but not list) costs the cache, not the
// read: the versions and segments are read as without one.
func TestCacheListingFailureReadsInstead(t *testing.T) {
	t.Setenv(SpillEnv, "0")
	var failLists atomic.Bool
	h := storagetest.NewHook(memstore.New()).Before(func(c storagetest.Call) error {
		if failLists.Load() && c.Op == storagetest.OpList && (strings.HasPrefix(c.Key, SegmentsPrefix) || c.List.StartAfter != "") {
			return storage.Errorf("list", c.Key, storage.ErrUnavailable, "injected")
		}
		return nil
	})
	s, err := storage.NewStore(bg, "memory", h)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		reg := Open(s, Options{})
		v, snap, err := reg.Head(bg)
		if err != nil {
			t.Fatal(err)
		}
		d := snap.Next()
		reserveT(t, d, fmt.Sprintf("cp-%d", i))
		if _, err := reg.Commit(bg, v, d); err != nil {
			t.Fatal(err)
		}
	}
	ctx := WithCache(bg, NewCache())
	want, err := Open(s, Options{}).ReadRefs(ctx, []Version{1, 2, 3})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := Open(s, Options{}).Head(ctx); err != nil {
		t.Fatal(err)
	}
	failLists.Store(true)
	got, err := Open(s, Options{}).ReadRefs(ctx, []Version{1, 2, 3})
	if err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("refs with the listing failing: %v, %v; want %v", got, err, want)
	}
	if _, _, err := Open(s, Options{}).Head(ctx); err != nil {
		t.Fatalf("a head with the segments listing failing: %v", err)
	}
}
