package registry

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/memstore"
)

// putMeter counts what reaches the store's Put: requests, bytes and keys.
type putMeter struct {
	storage.Driver
	mu    sync.Mutex
	bytes int64
	keys  []string
	gets  int
}

func (m *putMeter) Get(ctx context.Context, key string) (*storage.Reader, error) {
	m.mu.Lock()
	m.gets++
	m.mu.Unlock()
	return m.Driver.Get(ctx, key)
}

func (m *putMeter) getCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.gets
}

func (m *putMeter) Put(ctx context.Context, key string, body io.Reader, opts storage.PutOptions) (storage.Info, error) {
	b, err := io.ReadAll(body)
	if err != nil {
		return storage.Info{}, err
	}
	m.mu.Lock()
	m.bytes += int64(len(b))
	m.keys = append(m.keys, key)
	m.mu.Unlock()
	return m.Driver.Put(ctx, key, bytes.NewReader(b), opts)
}

func (m *putMeter) reset() (int64, []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, k := m.bytes, m.keys
	m.bytes, m.keys = 0, nil
	return b, k
}

func meteredStore(t testing.TB) (*storage.Store, *putMeter, *memstore.Driver) {
	t.Helper()
	d := memstore.New()
	m := &putMeter{Driver: d}
	s, err := storage.NewStore(bg, "memory", m)
	if err != nil {
		t.Fatal(err)
	}
	return s, m, d
}

// withSpill sets the spill threshold for one test.
func withSpill(t *testing.T, n int) {
	old := spillBytes
	spillBytes = n
	t.Cleanup(func() { spillBytes = old })
}

// fleetDraft is version 1 with tables catalogued tables and live live
// checkpoints pinning all of them.
func fleetDraft(t testing.TB, tables, live int) *Snapshot {
	t.Helper()
	d := Empty().Next()
	for i := 0; i < tables; i++ {
		if _, err := d.AddTable(testID(20000+i), fmt.Sprintf("db/table-%04d.lance", i), t0); err != nil {
			t.Fatal(err)
		}
	}
	// Built directly and sorted once: Reserve re-sorts every call, which
	// at 30,000 rows is seconds of test time for nothing.
	for i := 0; i < live; i++ {
		id := testID(30000 + i)
		name := fmt.Sprintf("hourly/2026-11-%02dT%02d", 1+i/24%30, i%24) + fmt.Sprintf("-%04d", i)
		d.Names = append(d.Names, Reservation{Name: name, State: Live, Generation: 1, CheckpointID: id})
		d.Checkpoints = append(d.Checkpoints, Header{ID: id, Name: name, Generation: 1, State: Live, SourceBranch: MainBranch,
			RegistryVersion: 1, CreatedAt: t0.Add(time.Duration(i) * time.Hour), Actor: "cron@host"})
		for _, p := range pinsOf(d, uint64(100+i)) {
			d.Rows = append(d.Rows, Row{CheckpointID: id, Pin: p, State: Live})
		}
	}
	d.sortAll()
	if err := d.Validate(); err != nil {
		t.Fatal(err)
	}
	return d
}

// createBytes commits a registry of live checkpoints over 30 tables and
// returns the bytes that creating one more, then deleting one, writes.
func createBytes(t testing.TB, live int) (create, del int64, createKeys []string) {
	t.Helper()
	s, m, _ := meteredStore(t)
	reg := Open(s, Options{Scope: storage.ScopeHost})
	if _, err := reg.Commit(bg, 0, fleetDraft(t, 30, live)); err != nil {
		t.Fatal(err)
	}
	m.reset()
	v, snap, err := Open(s, Options{Scope: storage.ScopeHost}).Head(bg)
	if err != nil {
		t.Fatal(err)
	}
	draft := snap.Next()
	c := NewCheckpoint{ID: testID(29999), Name: "adhoc/before-migration", SourceBranch: MainBranch, CreatedAt: t0, Actor: "alice@host", Pins: pinsOf(draft, 9)}
	if _, err := draft.Reserve(c); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Commit(bg, v, draft); err != nil {
		t.Fatal(err)
	}
	create, createKeys = m.reset()
	next := draft.Next()
	if _, err := next.Tombstone(c.ID, Deletion{OperationID: "op-del-1", At: t0.Add(time.Hour), Actor: "alice@host"}); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Commit(bg, v+1, next); err != nil {
		t.Fatal(err)
	}
	del, _ = m.reset()
	return create, del, createKeys
}

// The gate: a checkpoint create at 1,000 live checkpoints writes at
// most twice the registry bytes of one at 1 (30 tables). A delete writes
// less than a create at 1. Whole snapshots (format 2) grow ~11 KB a live
// checkpoint here: the same run with spilling off fails by ~700x.
func TestCommitBytesFlatInLiveCheckpoints(t *testing.T) {
	c1, d1, _ := createBytes(t, 1)
	c1000, d1000, keys := createBytes(t, 1000)
	t.Logf("create: %d bytes at 1 live, %d at 1,000 (%.2fx); delete: %d and %d", c1, c1000, float64(c1000)/float64(c1), d1, d1000)
	if c1000 > 2*c1 {
		t.Errorf("a create at 1,000 live checkpoints wrote %d bytes, more than twice the %d at 1", c1000, c1)
	}
	if d1000 > c1 {
		t.Errorf("a delete at 1,000 live checkpoints wrote %d bytes, more than a create at 1 (%d)", d1000, c1)
	}
	// Exactly: the new checkpoint's rows, its name's bucket, the version
	// object, the head record.
	var segs int
	for _, k := range keys {
		if strings.HasPrefix(k, SegmentsPrefix) {
			segs++
		}
	}
	if len(keys) != 4 || segs != 2 {
		t.Errorf("a create at 1,000 live wrote %d objects (%d segments), want 4 (2): %v", len(keys), segs, keys)
	}
}

// A small registry is written whole, in format 2, as before: builds that
// read format 2 still read it, and its requests do not change.
func TestSmallRegistryIsWrittenWhole(t *testing.T) {
	s, m, d := meteredStore(t)
	reg := Open(s, Options{Scope: storage.ScopeHost})
	if _, err := reg.Commit(bg, 0, fleetDraft(t, 4, 2)); err != nil {
		t.Fatal(err)
	}
	_, keys := m.reset()
	for _, k := range keys {
		if strings.HasPrefix(k, SegmentsPrefix) {
			t.Fatalf("a small registry wrote a segment: %v", keys)
		}
	}
	b := readRaw(t, d, VersionKey(1))
	if peekFormat(b) != Format {
		t.Fatalf("format %d, want %d", peekFormat(b), Format)
	}
}

func readRaw(t testing.TB, d storage.Driver, key string) []byte {
	t.Helper()
	rd, err := d.Get(bg, key)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	b, err := io.ReadAll(rd)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func putRaw(t testing.TB, d storage.Driver, key string, b []byte) {
	t.Helper()
	if _, err := d.Put(bg, key, bytes.NewReader(b), storage.PutOptions{Mode: storage.PutOverwrite}); err != nil {
		t.Fatal(err)
	}
}

// A segmented version reads back as exactly the snapshot committed (names,
// headers, rows with their states, tombstones, catalog), and a commit on
// top writes only what changed.
func TestSegmentedVersionRoundTrips(t *testing.T) {
	withSpill(t, 0)
	s, m, d := meteredStore(t)
	reg := Open(s, Options{Scope: storage.ScopeHost})
	draft := newDraft(t)
	a := reserveT(t, draft, "team/a")
	reserveT(t, draft, "team/b")
	reserveT(t, draft, "nightly/c")
	if _, err := draft.Tombstone(a.ID, Deletion{OperationID: "op-del-a", At: t0, Actor: "bob"}); err != nil {
		t.Fatal(err)
	}
	if _, err := draft.Revive(1, newCheckpoint(draft, "team/a")); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Commit(bg, 0, draft); err != nil {
		t.Fatal(err)
	}
	if f := peekFormat(readRaw(t, d, VersionKey(1))); f != formatSegmented {
		t.Fatalf("version 1 has format %d, want %d", f, formatSegmented)
	}
	_, got, err := Open(s, Options{}).Head(bg)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []struct {
		what      string
		got, want any
	}{
		{"names", got.Names, draft.Names}, {"checkpoints", got.Checkpoints, draft.Checkpoints},
		{"rows", got.Rows, draft.Rows}, {"tombstones", got.Tombstones, draft.Tombstones},
		{"tables", got.Tables, draft.Tables}, {"live", got.Live(), draft.Live()},
	} {
		if !reflect.DeepEqual(f.got, f.want) {
			t.Errorf("%s read back differ:\n got %+v\nwant %+v", f.what, f.got, f.want)
		}
	}
	if got.Ref() != draft.Ref() {
		t.Errorf("ref read back %v, committed %v", got.Ref(), draft.Ref())
	}

	// Tombstoning one checkpoint rewrites its name's bucket only: no rows
	// object (a row's state is its header's).
	m.reset()
	next := got.Next()
	b, _ := got.ByName("team/b")
	if _, err := next.Tombstone(b.ID, Deletion{OperationID: "op-del-b", At: t0, Actor: "bob"}); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Commit(bg, 1, next); err != nil {
		t.Fatal(err)
	}
	_, keys := m.reset()
	if len(keys) != 3 || !strings.HasPrefix(keys[0], SegmentsPrefix) || keys[1] != VersionKey(2) || keys[2] != HintKey {
		t.Errorf("the tombstone commit wrote %v, want one bucket, the version, the head record", keys)
	}
	_, got2, err := Open(s, Options{}).Head(bg)
	if err != nil {
		t.Fatal(err)
	}
	if c, _ := got2.ByID(b.ID); c.State != Tombstoned || len(c.Rows) != 2 || c.Rows[0].State != Tombstoned {
		t.Errorf("tombstoned checkpoint read back as %+v", c)
	}

	// The chain runs through segmented versions: a head record left at
	// version 1 is followed to the head.
	ref1 := draft.Ref()
	if err := reg.RecordCommit(bg, ref1); err != nil {
		t.Fatal(err)
	}
	if hc, err := Open(s, Options{}).CheckHead(bg, 2, got2); err != nil || hc != HeadRecordBehind {
		t.Errorf("CheckHead with the record at version 1: %v, %v; want HeadRecordBehind", hc, err)
	}
	if n, unreadable, breaks, err := reg.VerifyChain(bg); err != nil || n != 2 || len(unreadable) != 0 || len(breaks) != 0 {
		t.Errorf("VerifyChain: %d read, unreadable %v, breaks %v, %v", n, unreadable, breaks, err)
	}
}

// A format 2 head that has grown past the threshold becomes segmented at
// its next commit, under whatever claim that commit holds: the migration
// is that commit, once, and it reads back the same.
func TestWholeRegistryMigratesAtItsNextCommit(t *testing.T) {
	withSpill(t, 1<<40)
	s, _, d := meteredStore(t)
	reg := Open(s, Options{Scope: storage.ScopeHost})
	if _, err := reg.Commit(bg, 0, fleetDraft(t, 30, 10)); err != nil {
		t.Fatal(err)
	}
	spillBytes = 32 << 10
	_, snap, err := reg.Head(bg)
	if err != nil {
		t.Fatal(err)
	}
	next := snap.Next()
	reserveT(t, next, "adhoc/after-upgrade")
	if _, err := reg.Commit(bg, 1, next); err != nil {
		t.Fatal(err)
	}
	if f1, f2 := peekFormat(readRaw(t, d, VersionKey(1))), peekFormat(readRaw(t, d, VersionKey(2))); f1 != Format || f2 != formatSegmented {
		t.Fatalf("formats %d then %d, want %d then %d", f1, f2, Format, formatSegmented)
	}
	_, got, err := Open(s, Options{}).Head(bg)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Live(), next.Live()) || len(got.Live()) != 11 {
		t.Fatalf("the migrated head reads %d live checkpoints, not the %d committed", len(got.Live()), len(next.Live()))
	}
}

// A segment that is missing, rewritten or filed under the wrong bucket
// makes its version unreadable (ErrCorruptRegistry naming the segment and
// the way out), never missing: storage.ErrNotFound would read as "no such
// version" to Head's callers.
func TestDamagedSegmentIsCorruptNotMissing(t *testing.T) {
	withSpill(t, 0)
	build := func(t *testing.T) (*storage.Store, *memstore.Driver, *Snapshot) {
		s, _, d := meteredStore(t)
		draft := newDraft(t)
		reserveT(t, draft, "team/a")
		reserveT(t, draft, "team/b")
		if _, err := Open(s, Options{Scope: storage.ScopeHost}).Commit(bg, 0, draft); err != nil {
			t.Fatal(err)
		}
		return s, d, draft
	}
	segments := func(d *memstore.Driver) (rows, index []string) {
		page, err := d.List(bg, storage.ListOptions{Prefix: SegmentsPrefix, PageSize: 1000})
		if err != nil {
			panic(err)
		}
		for _, o := range page.Objects {
			if bytes.Contains(readRaw(t, d, o.Key), []byte(`"kind":"rows"`)) {
				rows = append(rows, o.Key)
			} else {
				index = append(index, o.Key)
			}
		}
		return rows, index
	}
	check := func(t *testing.T, s *storage.Store, key string) {
		t.Helper()
		_, err := Open(s, Options{}).Read(bg, 1)
		if !errors.Is(err, ErrCorruptRegistry) || errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("read: %v; want ErrCorruptRegistry and not ErrNotFound", err)
		}
		if !strings.Contains(err.Error(), key) || !strings.Contains(err.Error(), "retain registry recover") {
			t.Errorf("the error does not name %s and the way out: %v", key, err)
		}
	}
	t.Run("rows object missing", func(t *testing.T) {
		s, d, _ := build(t)
		rows, _ := segments(d)
		if err := d.Delete(bg, rows[0], storage.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		check(t, s, rows[0])
	})
	t.Run("bucket rewritten", func(t *testing.T) {
		s, d, _ := build(t)
		_, index := segments(d)
		b := readRaw(t, d, index[0])
		putRaw(t, d, index[0], bytes.Replace(b, []byte(`"alice@host"`), []byte(`"mallory@hos"`), 1))
		check(t, s, index[0])
	})
	t.Run("name filed in another bucket", func(t *testing.T) {
		s, d, _ := build(t)
		vb := readRaw(t, d, VersionKey(1))
		v, err := decodeSegmentedLink(VersionKey(1), vb, 1)
		if err != nil {
			t.Fatal(err)
		}
		// Move the first bucket's content to another bucket number, with
		// digests that match: only the filing is wrong.
		key := SegmentKey(v.Buckets[0].SHA256)
		var ib indexBucket
		if err := strictDecode(readRaw(t, d, key), &ib); err != nil {
			t.Fatal(err)
		}
		ib.Bucket = (ib.Bucket + 1) % numBuckets
		nb, _ := marshalLine(&ib)
		putRaw(t, d, SegmentKey(sumOf(nb)), nb)
		v.Buckets = []bucketRef{{Bucket: ib.Bucket, segRef: segRef{SHA256: sumOf(nb), Size: int64(len(nb))}}}
		nv, _ := marshalLine(v)
		putRaw(t, d, VersionKey(1), nv)
		check(t, s, SegmentKey(sumOf(nb)))
	})
}

// ReadRef gives a version's Ref from its version object alone: one get,
// whatever the version holds, and the same Ref a whole read gives.
func TestReadRefReadsTheVersionObjectOnly(t *testing.T) {
	withSpill(t, 0)
	s, m, _ := meteredStore(t)
	reg := Open(s, Options{Scope: storage.ScopeHost})
	draft := newDraft(t)
	for i := 0; i < 5; i++ {
		reserveT(t, draft, fmt.Sprintf("team/%d", i))
	}
	ref, err := reg.Commit(bg, 0, draft)
	if err != nil {
		t.Fatal(err)
	}
	before := m.getCount()
	got, err := Open(s, Options{}).ReadRef(bg, 1)
	if err != nil || got != ref {
		t.Fatalf("ReadRef: %v, %v; want %v", got, err, ref)
	}
	if n := m.getCount() - before; n != 1 {
		t.Errorf("ReadRef made %d requests, want 1", n)
	}
	if _, err := Open(s, Options{}).ReadRef(bg, 2); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("ReadRef of a missing version: %v, want ErrNotFound", err)
	}
}

// One Registry reads each segment once: a second Head (as create makes
// under the claim) costs what Head costs on a whole snapshot, the version
// object and the head record, and after a commit through the same handle
// the next Head reads only the new version object.
func TestSecondHeadReadsOnlyWhatChanged(t *testing.T) {
	withSpill(t, 0)
	s, m, _ := meteredStore(t)
	draft := newDraft(t)
	for i := 0; i < 8; i++ {
		reserveT(t, draft, fmt.Sprintf("team/%d", i))
	}
	if _, err := Open(s, Options{Scope: storage.ScopeHost}).Commit(bg, 0, draft); err != nil {
		t.Fatal(err)
	}
	reg := Open(s, Options{Scope: storage.ScopeHost})
	g0 := m.getCount()
	v, snap, err := reg.Head(bg)
	if err != nil {
		t.Fatal(err)
	}
	first := m.getCount() - g0
	if _, _, err := reg.Head(bg); err != nil {
		t.Fatal(err)
	}
	second := m.getCount() - g0 - first
	if first <= 2 || second != 2 {
		t.Errorf("Head read %d objects, then %d; want every segment, then 2 (version and record)", first, second)
	}
	next := snap.Next()
	reserveT(t, next, "team/new")
	if _, err := reg.Commit(bg, v, next); err != nil {
		t.Fatal(err)
	}
	g1 := m.getCount()
	if _, got, err := reg.Head(bg); err != nil || len(got.Live()) != 9 {
		t.Fatalf("head after the commit: %v", err)
	}
	if n := m.getCount() - g1; n != 2 {
		t.Errorf("Head after a commit through the same handle read %d objects, want 2", n)
	}
}

// BenchmarkCommitBytes reports the registry bytes and objects one
// checkpoint create and one delete write, by live checkpoints (30 tables):
//
//	go test -run '^$' -bench CommitBytes -benchtime 1x ./core/checkpoint/registry/
func BenchmarkCommitBytes(b *testing.B) {
	for _, live := range []int{1, 10, 100, 1000} {
		b.Run(fmt.Sprintf("live=%d", live), func(b *testing.B) {
			var c, d, objs int64
			for b.Loop() {
				cb, db, keys := createBytes(b, live)
				c, d, objs = c+cb, d+db, objs+int64(len(keys))
			}
			n := float64(b.N)
			b.ReportMetric(float64(c)/n, "create-bytes/op")
			b.ReportMetric(float64(d)/n, "delete-bytes/op")
			b.ReportMetric(float64(objs)/n, "create-objects/op")
		})
	}
}
