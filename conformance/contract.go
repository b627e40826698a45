// Package conformance proves that a storage adapter keeps the contract in
// core: the same table runs against the in-memory reference, localfs
// in-process, and any adapter through the plugin boundary.
package conformance

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/retain-dev/retain/core/storage"
)

// OpenFunc returns a fresh, empty store for one subtest. It registers its own
// cleanup with t.
type OpenFunc func(t *testing.T) *storage.Store

// RunContract runs the storage contract table against stores from open.
// Cases whose capability the adapter declares none are checked for honesty
// instead (unsupported, nothing written), or skipped with the reason.
func RunContract(t *testing.T, open OpenFunc) {
	for _, c := range contractCases {
		t.Run(c.name, func(t *testing.T) {
			c.run(t, open(t))
		})
	}
}

type contractCase struct {
	name string
	run  func(t T, s *storage.Store)
}

var contractCases = []contractCase{
	{"RoundTrip", testRoundTrip},
	{"Missing", testMissing},
	{"OverwriteChangesVersion", testOverwriteVersion},
	{"CreateIfAbsent", testCreateIfAbsent},
	{"ReplaceIfVersion", testReplaceIfVersion},
	{"ReplaceSameBytes", testReplaceSameBytes},
	{"DeleteIfVersion", testDeleteIfVersion},
	{"DeleteMany", testDeleteMany},
	{"BatchReads", testBatchReads},
	{"ListOrder", testListOrder},
	{"ListPaging", testListPaging},
	{"ListStartAfterNotAKey", testListStartAfterNotAKey},
	{"ListAgreesWithStat", testListAgreesWithStat},
	{"ListLimit", testListLimit},
	{"ListLevel", testListLevel},
	{"InvalidKeys", testInvalidKeys},
	{"LargeObject", testLargeObject},
	{"AtomicVisibility", testAtomicVisibility},
	{"CreateVisibility", testCreateVisibility},
	{"Gates", testGates},
	{"DeclaredNoneIsUnsupported", testDeclaredNone},
}

func ctxT(t T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func wantKind(t T, err error, kind storage.Kind, what string) {
	t.Helper()
	if !errors.Is(err, kind) {
		t.Fatalf("%s: want %s, got %v (kind %s)", what, kind, err, storage.KindOf(err))
	}
}

func mustPut(t T, s *storage.Store, key string, body []byte, opts storage.PutOptions) storage.Info {
	t.Helper()
	info, err := s.PutBytes(ctxT(t), key, body, opts)
	if err != nil {
		t.Fatalf("put %q (%s): %v", key, opts.Mode, err)
	}
	if info.Key != key || info.Size != int64(len(body)) || info.Version == "" {
		t.Fatalf("put %q: bad info %+v", key, info)
	}
	return info
}

func mustRead(t T, s *storage.Store, key string) ([]byte, storage.Info) {
	t.Helper()
	b, info, err := s.ReadAll(ctxT(t), key)
	if err != nil {
		t.Fatalf("read %q: %v", key, err)
	}
	return b, info
}

func wantBody(t T, s *storage.Store, key string, want []byte) {
	t.Helper()
	got, _ := mustRead(t, s, key)
	if !bytes.Equal(got, want) {
		t.Fatalf("read-back %q: got %d bytes %.40q, want %d bytes %.40q", key, len(got), got, len(want), want)
	}
}

func wantAbsent(t T, s *storage.Store, key string) {
	t.Helper()
	_, err := s.Stat(ctxT(t), key)
	wantKind(t, err, storage.ErrNotFound, "stat "+key)
}

func testRoundTrip(t T, s *storage.Store) {
	for _, body := range [][]byte{{}, []byte("x"), bytes.Repeat([]byte("0123456789abcdef"), 65536)} {
		key := fmt.Sprintf("rt/%d", len(body))
		info := mustPut(t, s, key, body, storage.PutOptions{})
		wantBody(t, s, key, body)
		st, err := s.Stat(ctxT(t), key)
		if err != nil {
			t.Fatal(err)
		}
		if st.Version != info.Version || st.Size != int64(len(body)) {
			t.Fatalf("stat %q = %+v, put returned %+v", key, st, info)
		}
		_, got := mustRead(t, s, key)
		if got.Version != info.Version {
			t.Fatalf("get %q version %q, put returned %q", key, got.Version, info.Version)
		}
		if err := s.Delete(ctxT(t), key, storage.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		wantAbsent(t, s, key)
	}
}

func testMissing(t T, s *storage.Store) {
	ctx := ctxT(t)
	_, err := s.Get(ctx, "missing/a")
	wantKind(t, err, storage.ErrNotFound, "get missing")
	_, err = s.Stat(ctx, "missing/a")
	wantKind(t, err, storage.ErrNotFound, "stat missing")
	if err := s.Delete(ctx, "missing/a", storage.DeleteOptions{}); err != nil {
		t.Fatalf("unconditional delete of a missing key: want nil, got %v", err)
	}
	page, err := s.ListPage(ctx, storage.ListOptions{Prefix: "missing/"})
	if err != nil || len(page.Objects) != 0 || page.More {
		t.Fatalf("list of an empty prefix: %+v, %v", page, err)
	}
}

func testOverwriteVersion(t T, s *storage.Store) {
	a := mustPut(t, s, "ov/k", []byte("same"), storage.PutOptions{})
	if !s.Capabilities().UniqueVersions {
		b := mustPut(t, s, "ov/k", []byte("different"), storage.PutOptions{})
		if a.Version == b.Version {
			t.Fatalf("writes of different bytes share version %q", a.Version)
		}
		t.Logf("adapter does not declare unique versions: only a change of bytes is required to change the token")
		return
	}
	b := mustPut(t, s, "ov/k", []byte("same"), storage.PutOptions{})
	if a.Version == b.Version {
		t.Fatalf("two writes of the same bytes share version %q, but the adapter declares unique versions", a.Version)
	}
}

func skipIfNone(t T, s *storage.Store, f storage.Feature) {
	c, _ := s.Capabilities().Of(f)
	if c.Level == storage.LevelNone {
		t.Skipf("adapter declares %s none (%s): checked by DeclaredNoneIsUnsupported", f, c.Reason)
	}
}

func testCreateIfAbsent(t T, s *storage.Store) {
	skipIfNone(t, s, storage.FeatureCreateIfAbsent)
	create := storage.PutOptions{Mode: storage.PutCreateIfAbsent}
	mustPut(t, s, "cia/k", []byte("first"), create)
	_, err := s.PutBytes(ctxT(t), "cia/k", []byte("second"), create)
	wantKind(t, err, storage.ErrAlreadyExists, "second create")
	wantBody(t, s, "cia/k", []byte("first"))
}

func testReplaceIfVersion(t T, s *storage.Store) {
	skipIfNone(t, s, storage.FeatureReplaceIfVersion)
	v1 := mustPut(t, s, "riv/k", []byte("one"), storage.PutOptions{})
	v2 := mustPut(t, s, "riv/k", []byte("two"), storage.PutOptions{Mode: storage.PutReplaceIfVersion, IfVersion: v1.Version})
	if v2.Version == v1.Version {
		t.Fatal("replace kept the version")
	}
	_, err := s.PutBytes(ctxT(t), "riv/k", []byte("stale"), storage.PutOptions{Mode: storage.PutReplaceIfVersion, IfVersion: v1.Version})
	wantKind(t, err, storage.ErrPreconditionFailed, "replace with a stale version")
	wantBody(t, s, "riv/k", []byte("two"))
	_, err = s.PutBytes(ctxT(t), "riv/missing", []byte("x"), storage.PutOptions{Mode: storage.PutReplaceIfVersion, IfVersion: v1.Version})
	wantKind(t, err, storage.ErrNotFound, "replace of a missing key")
	wantAbsent(t, s, "riv/missing")
}

func testDeleteIfVersion(t T, s *storage.Store) {
	skipIfNone(t, s, storage.FeatureDeleteIfVersion)
	ctx := ctxT(t)
	v1 := mustPut(t, s, "div/k", []byte("one"), storage.PutOptions{})
	v2 := mustPut(t, s, "div/k", []byte("two"), storage.PutOptions{})
	err := s.Delete(ctx, "div/k", storage.DeleteOptions{IfVersion: v1.Version})
	wantKind(t, err, storage.ErrPreconditionFailed, "delete with a stale version")
	wantBody(t, s, "div/k", []byte("two"))
	if err := s.Delete(ctx, "div/k", storage.DeleteOptions{IfVersion: v2.Version}); err != nil {
		t.Fatalf("delete with the current version: %v", err)
	}
	wantAbsent(t, s, "div/k")
	err = s.Delete(ctx, "div/k", storage.DeleteOptions{IfVersion: v2.Version})
	wantKind(t, err, storage.ErrNotFound, "delete-if-version of a missing key")
}

func testDeleteMany(t T, s *storage.Store) {
	var keys []string
	for i := range 25 {
		k := fmt.Sprintf("dm/%03d", i)
		if i%5 != 0 {
			mustPut(t, s, k, []byte(k), storage.PutOptions{})
		}
		keys = append(keys, k)
	}
	keys = append(keys, "dm/../escape")
	res, err := s.DeleteMany(ctxT(t), keys)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != len(keys) {
		t.Fatalf("%d results for %d keys", len(res), len(keys))
	}
	for i, r := range res {
		if r.Key != keys[i] {
			t.Fatalf("result %d names %q, want %q", i, r.Key, keys[i])
		}
		if i == len(keys)-1 {
			wantKind(t, r.Err, storage.ErrInvalidArgument, "delete-many of an invalid key")
			continue
		}
		if r.Err != nil {
			t.Fatalf("delete-many %q: %v", r.Key, r.Err)
		}
		wantAbsent(t, s, r.Key)
	}
}

// Keys whose byte order differs from a naive directory walk: '.' (0x2e)
// sorts before '/' (0x2f), which sorts before '0'; non-ASCII sorts last.
// No key is a directory of another: a filesystem cannot hold both "a" and
// "a/b", so the contract does not ask it to.
var orderKeys = []string{"o/a.b", "o/a/b", "o/a/c/d", "o/a0", "o/b", "o/~", "o/é"}

func testListOrder(t T, s *storage.Store) {
	for i := len(orderKeys) - 1; i >= 0; i-- {
		mustPut(t, s, orderKeys[i], []byte(orderKeys[i]), storage.PutOptions{})
	}
	mustPut(t, s, "other", []byte("x"), storage.PutOptions{})
	got, err := s.List(ctxT(t), "o/", 0)
	if err != nil {
		t.Fatal(err)
	}
	if keysOf(got) != strings.Join(orderKeys, ",") {
		t.Fatalf("list order:\n got %s\nwant %s", keysOf(got), strings.Join(orderKeys, ","))
	}
	for _, o := range got {
		if o.Size != int64(len(o.Key)) || o.Version == "" {
			t.Fatalf("list info for %q: %+v", o.Key, o)
		}
	}
	page, err := s.ListPage(ctxT(t), storage.ListOptions{Prefix: "o/a", StartAfter: "o/a.b"})
	if err != nil {
		t.Fatal(err)
	}
	if want := "o/a/b,o/a/c/d,o/a0"; keysOf(page.Objects) != want {
		t.Fatalf("list after o/a.b: got %s, want %s", keysOf(page.Objects), want)
	}
}

func keysOf(infos []storage.Info) string {
	ks := make([]string, len(infos))
	for i, o := range infos {
		ks[i] = o.Key
	}
	return strings.Join(ks, ",")
}

func testListPaging(t T, s *storage.Store) {
	var want []string
	for i := range 23 {
		k := fmt.Sprintf("pg/%02d", i)
		mustPut(t, s, k, nil, storage.PutOptions{})
		want = append(want, k)
	}
	var got []string
	opts := storage.ListOptions{Prefix: "pg/", PageSize: 5}
	for pages := 0; ; pages++ {
		if pages > 10 {
			t.Fatal("paging does not end")
		}
		page, err := s.ListPage(ctxT(t), opts)
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Objects) > 5 {
			t.Fatalf("page of %d with page size 5", len(page.Objects))
		}
		for _, o := range page.Objects {
			got = append(got, o.Key)
		}
		if !page.More {
			break
		}
		opts.StartAfter = page.Objects[len(page.Objects)-1].Key
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("paged listing:\n got %v\nwant %v", got, want)
	}
}

// levelKeys are a level with objects and folders interleaved in byte
// order ("lv/a.b" < "lv/a/" < "lv/a0"), a folder two deep, and a name
// that continues past a folder's name.
var levelKeys = []string{"lv/a.b", "lv/a/1", "lv/a/2/x", "lv/a0", "lv/b/c", "lv/t.lance/_versions/1.manifest", "lv/t.lance/data/x", "lv/t.lance0", "lv/é/1"}

// testListLevel lists one level with the delimiter, at every page size,
// through the store: natively where the adapter declares ListDelimiter,
// folder by folder otherwise. Both must give the level the keys say.
func testListLevel(t T, s *storage.Store) {
	for _, k := range levelKeys {
		mustPut(t, s, k, []byte("x"), storage.PutOptions{})
	}
	want := "lv/a.b,lv/a/,lv/a0,lv/b/,lv/t.lance/,lv/t.lance0,lv/é/"
	for _, size := range []int{1, 2, 3, 0} {
		var got []string
		opts := storage.ListOptions{Prefix: "lv/", PageSize: size, Delimiter: storage.Delimiter}
		for pages := 0; ; pages++ {
			if pages > 20 {
				t.Fatalf("page size %d: the level's paging does not end", size)
			}
			page, err := s.ListPage(ctxT(t), opts)
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range page.Objects {
				got = append(got, o.Key)
			}
			got = append(got, page.Folders...)
			if !page.More {
				break
			}
			opts.StartAfter = page.Last()
		}
		sort.Strings(got)
		if strings.Join(got, ",") != want {
			t.Fatalf("level of lv/ at page size %d (native delimiter: %v):\n got %s\nwant %s", size, s.Capabilities().ListDelimiter, strings.Join(got, ","), want)
		}
	}
	page, err := s.ListPage(ctxT(t), storage.ListOptions{Prefix: "lv/", StartAfter: "lv/a/", Delimiter: storage.Delimiter})
	if err != nil {
		t.Fatal(err)
	}
	if got := append(strings.Split(keysOf(page.Objects), ","), page.Folders...); !strings.HasPrefix(strings.Join(got, ","), "lv/a0,") {
		t.Fatalf("level after the folder lv/a/: objects %s, folders %v: want lv/a0 first and nothing under lv/a/", keysOf(page.Objects), page.Folders)
	}
}

func testListLimit(t T, s *storage.Store) {
	for i := range 12 {
		mustPut(t, s, fmt.Sprintf("lim/%02d", i), nil, storage.PutOptions{})
	}
	_, err := s.List(ctxT(t), "lim/", 11)
	wantKind(t, err, storage.ErrLimitExceeded, "list of 12 with max 11")
	got, err := s.List(ctxT(t), "lim/", 12)
	if err != nil || len(got) != 12 {
		t.Fatalf("list of 12 with max 12: %d, %v", len(got), err)
	}
}

// InvalidKeys are refused by every operation, by the portable Store and by
// the driver itself (which cannot trust its caller across the boundary).
var InvalidKeys = []string{"", "/abs", "a//b", "a/./b", "a/../b", "..", "a/", "nul\x00byte", "ctl\x01", "back\\slash", strings.Repeat("k", storage.MaxKeyBytes+1)}

func testInvalidKeys(t T, s *storage.Store) {
	ctx := ctxT(t)
	d := s.Driver()
	for _, k := range InvalidKeys {
		name := fmt.Sprintf("%.20q", k)
		_, err := s.PutBytes(ctx, k, []byte("x"), storage.PutOptions{})
		wantKind(t, err, storage.ErrInvalidArgument, "store put "+name)
		_, err = d.Put(ctx, k, bytes.NewReader([]byte("x")), storage.PutOptions{})
		wantKind(t, err, storage.ErrInvalidArgument, "driver put "+name)
		_, err = d.Get(ctx, k)
		wantKind(t, err, storage.ErrInvalidArgument, "driver get "+name)
		_, err = d.Stat(ctx, k)
		wantKind(t, err, storage.ErrInvalidArgument, "driver stat "+name)
		err = d.Delete(ctx, k, storage.DeleteOptions{})
		wantKind(t, err, storage.ErrInvalidArgument, "driver delete "+name)
	}
	if got, err := s.List(ctx, "", 0); err != nil || len(got) != 0 {
		t.Fatalf("invalid keys left objects behind: %s, %v", keysOf(got), err)
	}
}

func testLargeObject(t T, s *storage.Store) {
	body := make([]byte, 9<<20+17)
	for i := range body {
		body[i] = byte(i * 7 / 3)
	}
	mustPut(t, s, "large/9MiB", body, storage.PutOptions{})
	wantBody(t, s, "large/9MiB", body)
}

// testAtomicVisibility replaces a 2 MiB object with uniform bodies of a new
// byte value each time while readers read it: every body read must be whole
// and uniform. Bounded by write count, not wall time.
func testAtomicVisibility(t T, s *storage.Store) {
	const size, writes, readers = 2 << 20, 40, 3
	ctx := ctxT(t)
	mustPut(t, s, "av/k", bytes.Repeat([]byte{'A'}, size), storage.PutOptions{})
	stop := readRace(readers, func() (bool, error) {
		b, _, err := s.ReadAll(ctx, "av/k")
		if errors.Is(err, storage.ErrTransient) {
			// An adapter may refuse a torn read it detects (transient);
			// that keeps the contract. Read again.
			return false, nil
		}
		if err != nil {
			return false, err
		}
		if len(b) != size || bytes.Count(b, b[:1]) != size {
			return false, fmt.Errorf("partial or mixed body: %d bytes, first %q, %d of them", len(b), b[:1], bytes.Count(b, b[:1]))
		}
		return true, nil
	})
	for i := range writes {
		if _, err := s.PutBytes(ctx, "av/k", bytes.Repeat([]byte{byte('B' + i%24)}, size), storage.PutOptions{}); err != nil {
			stop()
			t.Fatal(err)
		}
	}
	if _, err := stop(); err != nil {
		t.Fatal(err)
	}
}

func testGates(t T, s *storage.Store) {
	gates := s.Capabilities().Gates
	if len(gates) == 0 {
		t.Skip("adapter declares no gates")
	}
	ctx := ctxT(t)
	d := s.Driver()
	g := gates[0].Name
	l, err := d.AcquireGate(ctx, g)
	if err != nil {
		t.Fatal(err)
	}
	// Held: a second acquire must wait until the deadline.
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	_, err = d.AcquireGate(short, g)
	cancel()
	if err == nil {
		t.Fatalf("gate %q acquired twice", g)
	}
	err = d.ReleaseGate(ctx, storage.GateLease{Name: g, Token: "not-the-token"})
	wantKind(t, err, storage.ErrPreconditionFailed, "release with a wrong token")
	if err := d.ReleaseGate(ctx, l); err != nil {
		t.Fatal(err)
	}
	ran := false
	if err := s.WithGates(ctx, storage.ScopeProcess, []string{g, g}, func(context.Context) error { ran = true; return nil }); err != nil || !ran {
		t.Fatalf("WithGates: ran=%v err=%v", ran, err)
	}
	err = s.WithGates(ctx, storage.ScopeProcess, []string{g, "no-such-gate"}, func(context.Context) error { t.Fatal("ran without the gate"); return nil })
	wantKind(t, err, storage.ErrUnsupported, "WithGates with an undeclared gate")
	_, err = d.AcquireGate(ctx, "no-such-gate")
	wantKind(t, err, storage.ErrUnsupported, "acquire of an undeclared gate")
}

// testDeclaredNone: every capability declared none must answer unsupported
// from the driver itself and write nothing.
func testDeclaredNone(t T, s *storage.Store) {
	caps := s.Capabilities()
	ctx := ctxT(t)
	d := s.Driver()
	checked := 0
	if caps.CreateIfAbsent.Level == storage.LevelNone {
		checked++
		_, err := d.Put(ctx, "none/cia", bytes.NewReader([]byte("x")), storage.PutOptions{Mode: storage.PutCreateIfAbsent})
		wantKind(t, err, storage.ErrUnsupported, "create-if-absent declared none")
		wantAbsent(t, s, "none/cia")
	}
	if caps.ReplaceIfVersion.Level == storage.LevelNone {
		checked++
		v := mustPut(t, s, "none/riv", []byte("orig"), storage.PutOptions{})
		_, err := d.Put(ctx, "none/riv", bytes.NewReader([]byte("new")), storage.PutOptions{Mode: storage.PutReplaceIfVersion, IfVersion: v.Version})
		wantKind(t, err, storage.ErrUnsupported, "replace-if-version declared none")
		wantBody(t, s, "none/riv", []byte("orig"))
	}
	if caps.DeleteIfVersion.Level == storage.LevelNone {
		checked++
		v := mustPut(t, s, "none/div", []byte("orig"), storage.PutOptions{})
		err := d.Delete(ctx, "none/div", storage.DeleteOptions{IfVersion: v.Version})
		wantKind(t, err, storage.ErrUnsupported, "delete-if-version declared none")
		wantBody(t, s, "none/div", []byte("orig"))
	}
	if checked == 0 {
		t.Skip("adapter declares no capability none")
	}
}
