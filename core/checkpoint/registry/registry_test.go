package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/memstore"
	"github.com/retain-dev/retain/core/storage/storagetest"
)

// bytesDriver counts the body bytes read through Get and the objects
// returned by List.
type bytesDriver struct {
	storage.Driver
	read, listed atomic.Int64
}

type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (c *countingBody) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	c.n.Add(int64(n))
	return n, err
}

func (b *bytesDriver) Get(ctx context.Context, key string) (*storage.Reader, error) {
	r, err := b.Driver.Get(ctx, key)
	if err == nil {
		r.ReadCloser = &countingBody{r.ReadCloser, &b.read}
	}
	return r, err
}

func (b *bytesDriver) List(ctx context.Context, opts storage.ListOptions) (storage.ListPage, error) {
	p, err := b.Driver.List(ctx, opts)
	b.listed.Add(int64(len(p.Objects)))
	return p, err
}

// meter is a store whose requests, bytes read and objects listed are
// counted.
type meter struct {
	store *storage.Store
	cnt   *storagetest.Counting
	bytes *bytesDriver
}

func newMeter(t testing.TB, d storage.Driver) *meter {
	t.Helper()
	m := &meter{cnt: storagetest.NewCounting(d)}
	m.bytes = &bytesDriver{Driver: m.cnt}
	s, err := storage.NewStore(bg, "metered", m.bytes)
	if err != nil {
		t.Fatal(err)
	}
	m.store = s
	return m
}

// cost is what one operation cost.
type cost struct {
	storagetest.Counts
	BytesRead, Listed int64
}

func (c cost) String() string {
	return fmt.Sprintf("%d requests (list %d, get %d, stat %d, put %d), %d bytes read, %d keys listed",
		c.Total(), c.List, c.Get, c.Stat, c.Put, c.BytesRead, c.Listed)
}

func (m *meter) measure(t testing.TB, f func() error) cost {
	t.Helper()
	c0, b0, l0 := m.cnt.Counts(), m.bytes.read.Load(), m.bytes.listed.Load()
	if err := f(); err != nil {
		t.Fatal(err)
	}
	c1 := m.cnt.Counts()
	return cost{Counts: storagetest.Counts{Get: c1.Get - c0.Get, Stat: c1.Stat - c0.Stat, Put: c1.Put - c0.Put, Delete: c1.Delete - c0.Delete,
		DeleteMany: c1.DeleteMany - c0.DeleteMany, List: c1.List - c0.List, Gate: c1.Gate - c0.Gate},
		BytesRead: m.bytes.read.Load() - b0, Listed: m.bytes.listed.Load() - l0}
}

func TestEmptyRegistryAndFirstCommits(t *testing.T) {
	s, _ := memStore(t)
	reg := Open(s, Options{})
	v, snap, err := reg.Head(bg)
	if err != nil || v != 0 || snap.Version != 0 || len(snap.Names) != 0 || !snap.Ref().IsZero() {
		t.Fatalf("empty head: %d %+v %v", v, snap, err)
	}
	d := snap.Next()
	reserveT(t, d, "a")
	ref, err := reg.Commit(bg, 0, d)
	if err != nil {
		t.Fatal(err)
	}
	if d.IsDraft() || d.Ref() != ref {
		t.Fatal("a committed draft stays editable")
	}
	if _, err := reg.Commit(bg, 0, d); !errors.Is(err, ErrInvalidSnapshot) {
		t.Fatalf("recommitting a committed draft: %v", err)
	}
	v, snap, err = reg.Head(bg)
	if err != nil || v != 1 || snap.Ref() != ref {
		t.Fatalf("head %d %v %v", v, snap.Ref(), err)
	}
	if err := reg.VerifyRef(bg, ref); err != nil {
		t.Fatal(err)
	}
	// A writer still on the empty registry conflicts.
	stale := Empty().Next()
	reserveT(t, stale, "b")
	_, err = reg.Commit(bg, 0, stale)
	if !errors.Is(err, ErrConflict) || !errors.Is(err, storage.ErrPreconditionFailed) || storage.KindOf(err) != storage.ErrPreconditionFailed {
		t.Fatalf("stale commit: %v", err)
	}
	// The draft must be of the next version...
	d = snap.Next()
	if _, err := reg.Commit(bg, 0, d); !errors.Is(err, ErrInvalidSnapshot) {
		t.Fatalf("commit of a version-2 draft on head 0: %v", err)
	}
	// ... and a non-draft is refused.
	if _, err := reg.Commit(bg, 1, snap); !errors.Is(err, ErrInvalidSnapshot) {
		t.Fatalf("commit of the head itself: %v", err)
	}
	// No gaps: a fresh handle may not commit on a head that does not exist.
	far := snap.Next().Next().Next() // version 4
	far.draft = true
	if _, err := Open(s, Options{}).Commit(bg, 3, far); !errors.Is(err, ErrInvalidSnapshot) || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("commit on a missing head: %v", err)
	}
	if vs, _ := reg.History(bg, 0); len(vs) != 1 {
		t.Fatalf("history %v", vs)
	}
	// VerifyRef tells a mismatch and a missing version apart.
	if err := reg.VerifyRef(bg, Ref{Version: 1, Size: ref.Size, SHA256: strings.Repeat("0", 64)}); !errors.Is(err, ErrRefMismatch) {
		t.Fatalf("verify mismatch: %v", err)
	}
	if err := reg.VerifyRef(bg, Ref{Version: 2, Size: 1, SHA256: ref.SHA256}); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("verify missing: %v", err)
	}
}

func TestCorruptHeadFailsClosed(t *testing.T) {
	s, _ := memStore(t)
	reg := Open(s, Options{})
	d := newDraft(t)
	reserveT(t, d, "a")
	if _, err := reg.Commit(bg, 0, d); err != nil {
		t.Fatal(err)
	}
	v1, _, err := s.ReadAll(bg, VersionKey(1))
	if err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string][]byte{
		"garbage":                  []byte("not json"),
		"version 1 stored as 2":    v1,
		"truncated":                v1[:len(v1)/2],
		"valid JSON, not snapshot": []byte(`{"format":1}`),
	} {
		t.Run(name, func(t *testing.T) {
			s, _ := memStore(t)
			if _, err := s.PutBytes(bg, VersionKey(1), v1, storage.PutOptions{}); err != nil {
				t.Fatal(err)
			}
			if _, err := s.PutBytes(bg, VersionKey(2), body, storage.PutOptions{}); err != nil {
				t.Fatal(err)
			}
			reg := Open(s, Options{})
			if _, _, err := reg.Head(bg); !errors.Is(err, ErrCorruptRegistry) || storage.KindOf(err) != storage.ErrUnknown {
				t.Fatalf("head: %v", err)
			}
			if _, _, err := reg.List(bg); !errors.Is(err, ErrCorruptRegistry) {
				t.Fatalf("list: %v", err)
			}
			// Version 1 stays readable by number.
			if _, err := reg.Read(bg, 1); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// Objects under versions/ that are not version names are skipped, at the
// cost of the strays, not of the versions.
func TestStrayObjectsUnderVersions(t *testing.T) {
	s, _ := memStore(t)
	for _, k := range []string{"00.json", "0000000000000000000x.json", "18446744073709551615.json", "a/b", VersionKey(1)[len(VersionsPrefix):] + ".tmp"} {
		if _, err := s.PutBytes(bg, VersionsPrefix+k, []byte("x"), storage.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	reg := Open(s, Options{})
	if v, _, err := reg.Head(bg); err != nil || v != 0 {
		t.Fatalf("head over strays only: %d %v", v, err)
	}
	d := newDraft(t)
	if _, err := reg.Commit(bg, 0, d); err != nil {
		t.Fatal(err)
	}
	if v, _, err := reg.Head(bg); err != nil || v != 1 {
		t.Fatalf("head: %d %v", v, err)
	}
}

func commitNoop(t testing.TB, reg *Registry, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		v, s, err := reg.Head(bg)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := reg.Commit(bg, v, s.Next()); err != nil {
			t.Fatal(err)
		}
	}
}

// Stores without ordered listing: the hint plus forward probing, and a
// full listing only when the hint is missing, unreadable or ahead.
func TestUnorderedStoreUsesTheHint(t *testing.T) {
	mem := memstore.New()
	m := newMeter(t, &storagetest.Caps{Driver: mem, Edit: func(c *storage.Capabilities) { c.OrderedList = false }})
	reg := Open(m.store, Options{})
	commitNoop(t, reg, 5)
	c := m.measure(t, func() error { v, _, err := reg.Head(bg); return expectV(v, 5, err) })
	if c.Get != 2 || c.Stat != 1 || c.List != 0 {
		t.Fatalf("head with a fresh hint: %v", c)
	}
	// A stale hint (a slow writer put an older one back) costs the lag.
	if _, err := m.store.PutBytes(bg, HintKey, []byte(`{"format":1,"version":"00000000000000000002"}`), storage.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	c = m.measure(t, func() error { v, _, err := reg.Head(bg); return expectV(v, 5, err) })
	if c.Get != 2 || c.Stat != 4 || c.List != 0 {
		t.Fatalf("head with a hint 3 behind: %v", c)
	}
	// A hint ahead of the registry, an unreadable or a missing one: the
	// full listing.
	for name, body := range map[string]string{
		"ahead":      `{"format":1,"version":"00000000000000000009"}`,
		"unreadable": `{"version":`,
		"missing":    "",
	} {
		if body == "" {
			if err := m.store.Delete(bg, HintKey, storage.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		} else if _, err := m.store.PutBytes(bg, HintKey, []byte(body), storage.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		c = m.measure(t, func() error { v, _, err := reg.HeadUnverified(bg); return expectV(v, 5, err) })
		if c.List == 0 {
			t.Fatalf("hint %s: no fallback listing: %v", name, c)
		}
		// The hint is also the head record: without a readable one a
		// format 2 head above version 1 is not proven.
		if _, _, err := reg.Head(bg); name != "ahead" && !errors.Is(err, ErrCorruptRegistry) {
			t.Fatalf("hint %s: Head accepted an unproven head: %v", name, err)
		}
	}
	// An unproven head takes no commit (it would launder the damage);
	// once the record is settled (what recover does), a commit rewrites
	// the hint.
	hv, hs, err := reg.HeadUnverified(bg)
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.WriteHeadRecord(bg, hv, hs); err != nil {
		t.Fatal(err)
	}
	commitNoop(t, reg, 1)
	c = m.measure(t, func() error { v, _, err := reg.Head(bg); return expectV(v, 6, err) })
	if c.Get != 2 || c.Stat != 1 || c.List != 0 {
		t.Fatalf("head after a commit rewrote the hint: %v", c)
	}
}

func expectV(got, want Version, err error) error {
	if err == nil && got != want {
		err = fmt.Errorf("head %d, want %d", got, want)
	}
	return err
}

// Without list-after-write, a version the listing missed is found by
// probing forward.
func TestNoListAfterWriteProbes(t *testing.T) {
	mem := memstore.New()
	m := newMeter(t, &storagetest.Caps{Driver: mem, Edit: func(c *storage.Capabilities) { c.ListAfterWrite = false }})
	reg := Open(m.store, Options{})
	commitNoop(t, reg, 3)
	c := m.measure(t, func() error { v, _, err := reg.Head(bg); return expectV(v, 3, err) })
	if c.List != 1 || c.Stat != 1 || c.Get != 2 { // + the head record
		t.Fatalf("head: %v", c)
	}
}

func TestCommitNeedsCreateIfAbsentReachingTheScope(t *testing.T) {
	host := &storagetest.Caps{Driver: memstore.New(), Edit: func(c *storage.Capabilities) {
		c.CreateIfAbsent = storage.Capability{Level: storage.LevelGated, Gate: "g", Scope: storage.ScopeHost}
	}}
	s, err := storage.NewStore(bg, "host-only", host)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Open(s, Options{}).Commit(bg, 0, Empty().Next()); !errors.Is(err, storage.ErrUnsupported) {
		t.Fatalf("global scope on a host-scope store: %v", err)
	}
	if _, err := Open(s, Options{Scope: storage.ScopeHost}).Commit(bg, 0, Empty().Next()); err != nil {
		t.Fatalf("host scope: %v", err)
	}
}

// Goroutines racing on one store: every commit wins or conflicts, nothing
// is lost, the history has no gaps.
func TestConcurrentCommitsInProcess(t *testing.T) {
	s, _ := memStore(t)
	setup := Open(s, Options{})
	if _, err := setup.Commit(bg, 0, newDraft(t)); err != nil {
		t.Fatal(err)
	}
	const writers, each = 4, 25
	var wg sync.WaitGroup
	var conflicts atomic.Int64
	errs := make(chan error, writers)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			reg := Open(s, Options{})
			for i := 0; i < each; i++ {
				name := fmt.Sprintf("w%d/%d", w, i)
				for {
					_, err := reserveAndCommit(reg, name, NewID())
					if errors.Is(err, ErrConflict) {
						conflicts.Add(1)
						continue
					}
					if err != nil {
						errs <- err
						return
					}
					break
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	v, head, err := setup.Head(bg)
	if err != nil {
		t.Fatal(err)
	}
	if int(v) != 1+writers*each || len(head.Live()) != writers*each {
		t.Fatalf("head %d with %d live, want %d and %d", v, len(head.Live()), 1+writers*each, writers*each)
	}
	checkHistory(t, setup, v)
	t.Logf("%d commits, %d conflicts retried", writers*each, conflicts.Load())
}

// reserveAndCommit is one create's registry step: read the head, reserve
// (or revive) the name, commit. It returns the version written.
func reserveAndCommit(reg *Registry, name string, id ID) (Version, error) {
	v, s, err := reg.Head(bg)
	if err != nil {
		return 0, err
	}
	d := s.Next()
	c := NewCheckpoint{ID: id, Name: name, SourceBranch: MainBranch, CreatedAt: t0, Actor: "test", Pins: pinsOf(s, 7)}
	if _, err := d.Reserve(c); err != nil {
		return 0, err
	}
	if _, err := reg.Commit(bg, v, d); err != nil {
		return 0, err
	}
	return v + 1, nil
}

// checkHistory reads every version 1..head: each exists, parses, carries
// its own number, and the names never shrink (no lost commit).
func checkHistory(t testing.TB, reg *Registry, head Version) {
	t.Helper()
	vs, err := reg.History(bg, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != int(head) {
		t.Fatalf("history has %d versions, head is %d", len(vs), head)
	}
	prev := map[string]bool{}
	for i, v := range vs {
		if v != Version(i+1) {
			t.Fatalf("history gap: version %d at position %d", v, i)
		}
		s, err := reg.Read(bg, v)
		if err != nil {
			t.Fatal(err)
		}
		cur := map[string]bool{}
		for _, r := range s.Names {
			cur[r.Name] = true
		}
		for n := range prev {
			if !cur[n] {
				t.Fatalf("version %d lost the name %q", v, n)
			}
		}
		prev = cur
	}
}

func TestVersionKeys(t *testing.T) {
	if k := VersionKey(1); k != "_retain/registry/versions/18446744073709551614.json" {
		t.Fatalf("VersionKey(1) = %s", k)
	}
	prev := ""
	for _, v := range []Version{1, 2, 9, 10, 99, 100, 1 << 40, 1<<64 - 1} {
		k := VersionKey(v)
		if err := storage.ValidateKey("test", k); err != nil {
			t.Fatal(err)
		}
		if back, ok := ParseVersionKey(k); !ok || back != v {
			t.Fatalf("ParseVersionKey(%s) = %d %v, want %d", k, back, ok, v)
		}
		if prev != "" && k >= prev {
			t.Fatalf("version %d's key %s does not sort before the older %s", v, k, prev)
		}
		prev = k
	}
	for _, bad := range []string{VersionsPrefix + "18446744073709551615.json", VersionsPrefix + "1.json",
		VersionsPrefix + "1844674407370955161x.json", VersionsPrefix + "18446744073709551614.json.tmp",
		VersionsPrefix + "99999999999999999999.json", "other/18446744073709551614.json", VersionsPrefix + "a/18446744073709551614.json"} {
		if v, ok := ParseVersionKey(bad); ok {
			t.Errorf("ParseVersionKey(%s) = %d", bad, v)
		}
	}
}

// TestUpgradeFromUnchainedRegistry: a registry written by a build before
// the chain (format 1, no head record on ordered stores) reads as before,
// and so does the first format 2 version on top of it even if its record
// write was lost; from then on the record is required.
func TestUpgradeFromUnchainedRegistry(t *testing.T) {
	mem := memstore.New()
	m := newMeter(t, mem)
	reg := Open(m.store, Options{})
	commitNoop(t, reg, 2)
	for v := Version(1); v <= 2; v++ { // as the old build wrote them
		b, _, err := m.store.ReadAll(bg, VersionKey(v))
		if err != nil {
			t.Fatal(err)
		}
		var obj map[string]any
		if err := json.Unmarshal(b, &obj); err != nil {
			t.Fatal(err)
		}
		obj["format"] = 1
		delete(obj, "prev")
		nb, _ := json.Marshal(obj)
		if _, err := m.store.PutBytes(bg, VersionKey(v), append(nb, '\n'), storage.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.store.Delete(bg, HintKey, storage.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	reg = Open(m.store, Options{})
	if _, _, err := reg.Head(bg); err != nil {
		t.Fatalf("a format 1 registry: %v", err)
	}
	commitNoop(t, reg, 1)                                                        // version 3, format 2
	if err := m.store.Delete(bg, HintKey, storage.DeleteOptions{}); err != nil { // its record write lost
		t.Fatal(err)
	}
	if _, _, err := reg.Head(bg); err != nil {
		t.Fatalf("the first format 2 version without its record: %v", err)
	}
	hv, hs, _ := reg.HeadUnverified(bg)
	if err := reg.WriteHeadRecord(bg, hv, hs); err != nil {
		t.Fatal(err)
	}
	commitNoop(t, reg, 1) // version 4
	if err := m.store.Delete(bg, HintKey, storage.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := reg.Head(bg); !errors.Is(err, ErrCorruptRegistry) {
		t.Fatalf("a chained head without its record: %v", err)
	}
}
