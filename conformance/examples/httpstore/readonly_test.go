package httpstore_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/retain-dev/retain/conformance/examples/httpstore"
	"github.com/retain-dev/retain/conformance/examples/httpstore/server"
	"github.com/retain-dev/retain/core/storage"
)

// TestReadOnlyOpenWritesNothing: a read-only open sends the server no
// request but GET and HEAD, at open or after, declares itself read-only with
// every conditional capability none, refuses every write with permission
// denied, and still reads.
func TestReadOnlyOpenWritesNothing(t *testing.T) {
	srv := server.New(server.Config{}, "bucket")
	var writes atomic.Int64
	var mu sync.Mutex
	var seen []string
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			writes.Add(1)
			mu.Lock()
			seen = append(seen, r.Method+" "+r.URL.String())
			mu.Unlock()
		}
		srv.ServeHTTP(w, r)
	}))
	defer ts.Close()
	ctx := context.Background()
	loc, err := storage.ParseLocation(ts.URL + "/bucket/data")
	if err != nil {
		t.Fatal(err)
	}

	rw, err := httpstore.Adapter.Open(ctx, loc)
	if err != nil {
		t.Fatal(err)
	}
	v, err := rw.Put(ctx, "k", bytes.NewReader([]byte("kept")), storage.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rw.Close()
	writes.Store(0)
	mu.Lock()
	seen = nil
	mu.Unlock()

	loc.ReadOnly = true
	ro, err := httpstore.Adapter.Open(ctx, loc)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	caps, err := ro.Capabilities(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !caps.ReadOnly || len(caps.Gates) != 0 {
		t.Fatalf("read-only open declares ReadOnly=%v, gates %v", caps.ReadOnly, caps.Gates)
	}
	for _, f := range []storage.Feature{storage.FeatureCreateIfAbsent, storage.FeatureReplaceIfVersion, storage.FeatureDeleteIfVersion} {
		c, _ := caps.Of(f)
		if c.Level != storage.LevelNone || c.Reason != "opened read-only" {
			t.Fatalf("read-only open declares %s %s (%q), want none (\"opened read-only\")", f, c, c.Reason)
		}
	}

	denied := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, storage.ErrPermissionDenied) {
			t.Fatalf("%s on a read-only open: want permission denied, got %v", what, err)
		}
	}
	for _, opts := range []storage.PutOptions{{}, {Mode: storage.PutCreateIfAbsent}, {Mode: storage.PutReplaceIfVersion, IfVersion: v.Version}} {
		_, err := ro.Put(ctx, "k", bytes.NewReader([]byte("overwritten")), opts)
		denied("put "+opts.Mode.String(), err)
		_, err = ro.Put(ctx, "new", bytes.NewReader([]byte("x")), opts)
		denied("put of a new key "+opts.Mode.String(), err)
	}
	denied("delete", ro.Delete(ctx, "k", storage.DeleteOptions{}))
	denied("delete-if-version", ro.Delete(ctx, "k", storage.DeleteOptions{IfVersion: v.Version}))
	_, err = ro.DeleteMany(ctx, []string{"k"})
	denied("delete-many", err)
	_, err = ro.AcquireGate(ctx, "any")
	denied("acquire-gate", err)

	r, err := ro.Get(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(r)
	r.Close()
	if string(body) != "kept" || r.Info.Version != v.Version {
		t.Fatalf("read-only get: %q version %s, want %q version %s", body, r.Info.Version, "kept", v.Version)
	}
	if _, err := ro.Stat(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	page, err := ro.List(ctx, storage.ListOptions{})
	if err != nil || len(page.Objects) != 1 || page.Objects[0].Key != "k" {
		t.Fatalf("read-only list: %+v, %v", page, err)
	}
	if n := writes.Load(); n != 0 {
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("a read-only open sent %d writing requests: %v", n, seen)
	}
	if b, _ := srv.Bytes("bucket", "data/k"); string(b) != "kept" || srv.Len("bucket") != 1 {
		t.Fatalf("the store changed under a read-only open: %q, %d objects", b, srv.Len("bucket"))
	}
}
