package httpstore

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/retain-dev/retain/conformance/examples/httpstore/server"
	"github.com/retain-dev/retain/core/storage"
)

func TestKindOfStatus(t *testing.T) {
	for _, c := range []struct {
		status int
		mode   storage.PutMode
		want   storage.Kind
	}{
		{404, storage.PutOverwrite, storage.ErrNotFound},
		{412, storage.PutReplaceIfVersion, storage.ErrPreconditionFailed},
		{412, storage.PutCreateIfAbsent, storage.ErrAlreadyExists},
		{409, storage.PutCreateIfAbsent, storage.ErrAlreadyExists},
		{409, storage.PutOverwrite, storage.ErrPreconditionFailed},
		{401, storage.PutOverwrite, storage.ErrPermissionDenied},
		{403, storage.PutOverwrite, storage.ErrPermissionDenied},
		{413, storage.PutOverwrite, storage.ErrLimitExceeded},
		{429, storage.PutOverwrite, storage.ErrTransient},
		{503, storage.PutOverwrite, storage.ErrTransient},
		{504, storage.PutOverwrite, storage.ErrTransient},
		{400, storage.PutOverwrite, storage.ErrInvalidArgument},
		{501, storage.PutOverwrite, storage.ErrUnsupported},
		{500, storage.PutOverwrite, storage.ErrUnknown},
		{418, storage.PutOverwrite, storage.ErrUnknown},
	} {
		if got := KindOfStatus(c.status, c.mode); got != c.want {
			t.Errorf("status %d (%s): %s, want %s", c.status, c.mode, got, c.want)
		}
	}
}

// answering is a server whose bucket HEAD succeeds (so Open works) and
// whose every other request gets status, with a message body that names
// another kind: the mapping must read the status, not the text.
func answering(t *testing.T, status int) *Driver {
	t.Helper()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodHead && r.URL.Path == "/bucket" {
			return
		}
		w.WriteHeader(status)
		io.WriteString(w, "not found; already exists; permission denied")
	}))
	t.Cleanup(ts.Close)
	return open(t, ts.URL+"/bucket")
}

func open(t *testing.T, uri string) *Driver {
	t.Helper()
	loc, err := storage.ParseLocation(uri)
	if err != nil {
		t.Fatal(err)
	}
	d, err := Open(context.Background(), loc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// every calls each operation and returns its error by name.
func every(d *Driver, ctx context.Context) map[string]error {
	_, getErr := d.Get(ctx, "k")
	_, statErr := d.Stat(ctx, "k")
	_, putErr := d.Put(ctx, "k", strings.NewReader("x"), storage.PutOptions{})
	_, createErr := d.Put(ctx, "k", strings.NewReader("x"), storage.PutOptions{Mode: storage.PutCreateIfAbsent})
	_, replaceErr := d.Put(ctx, "k", strings.NewReader("x"), storage.PutOptions{Mode: storage.PutReplaceIfVersion, IfVersion: "v1"})
	_, listErr := d.List(ctx, storage.ListOptions{})
	_, dmErr := d.DeleteMany(ctx, []string{"k"})
	return map[string]error{
		"get": getErr, "stat": statErr, "put": putErr, "create": createErr, "replace": replaceErr,
		"delete-if-version": d.Delete(ctx, "k", storage.DeleteOptions{IfVersion: "v1"}),
		"list":              listErr, "delete-many": dmErr,
	}
}

func TestStatusMapping(t *testing.T) {
	for status, want := range map[int]storage.Kind{
		403: storage.ErrPermissionDenied, 429: storage.ErrTransient, 503: storage.ErrTransient,
		413: storage.ErrLimitExceeded, 500: storage.ErrUnknown,
	} {
		for op, err := range every(answering(t, status), context.Background()) {
			if !errors.Is(err, want) {
				t.Errorf("HTTP %d on %s: %v (kind %s), want %s", status, op, err, storage.KindOf(err), want)
			}
			var se *StatusError
			if !errors.As(err, &se) || se.Status != status {
				t.Errorf("HTTP %d on %s: the status is not kept as the cause: %v", status, op, err)
			}
		}
	}
	d := answering(t, 412)
	_, err := d.Put(context.Background(), "k", strings.NewReader("x"), storage.PutOptions{Mode: storage.PutCreateIfAbsent})
	if !errors.Is(err, storage.ErrAlreadyExists) {
		t.Errorf("412 on create-if-absent: %v, want already exists", err)
	}
	_, err = d.Put(context.Background(), "k", strings.NewReader("x"), storage.PutOptions{Mode: storage.PutReplaceIfVersion, IfVersion: "v"})
	if !errors.Is(err, storage.ErrPreconditionFailed) {
		t.Errorf("412 on replace-if-version: %v, want precondition failed", err)
	}
	_, err = answering(t, 404).Get(context.Background(), "k")
	if !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("404 on get: %v, want not found", err)
	}
}

func TestTransportErrors(t *testing.T) {
	// A server that went away: every call is transient.
	srv := httptest.NewServer(server.New(server.Config{}, "bucket"))
	d := open(t, srv.URL+"/bucket")
	srv.Close()
	for op, err := range every(d, context.Background()) {
		if !errors.Is(err, storage.ErrTransient) {
			t.Errorf("%s on a closed server: %v (kind %s), want transient", op, err, storage.KindOf(err))
		}
	}

	// A server that does not answer in time: transient, and still the
	// caller's own deadline.
	release := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodHead && r.URL.Path == "/bucket" {
			return
		}
		<-release
	}))
	defer hang.Close()
	defer close(release)
	d = open(t, hang.URL+"/bucket")
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := d.Stat(ctx, "k")
	if !errors.Is(err, storage.ErrTransient) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("stat past its deadline: %v, want transient wrapping the deadline", err)
	}
}

// TestCutBodyIsNotWhole: a GET whose connection drops mid-body ends in a
// transient error, never in a short body read as complete.
func TestCutBodyIsNotWhole(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodHead {
			return
		}
		w.Header().Set("ETag", `"v1"`)
		w.Header().Set("Content-Length", "100")
		w.WriteHeader(200)
		io.WriteString(w, "only ten b")
		w.(http.Flusher).Flush()
		conn, _, _ := w.(http.Hijacker).Hijack()
		conn.Close()
	}))
	defer ts.Close()
	r, err := open(t, ts.URL+"/bucket").Get(context.Background(), "k")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if !errors.Is(err, storage.ErrTransient) {
		t.Fatalf("read of a cut body: %d bytes, %v, want a transient error", len(b), err)
	}
}

func TestOpenErrors(t *testing.T) {
	srv := httptest.NewServer(server.New(server.Config{Token: "secret"}, "bucket"))
	defer srv.Close()
	ctx := context.Background()
	for uri, want := range map[string]storage.Kind{
		srv.URL + "/bucket":          storage.ErrPermissionDenied, // no $HTTPSTORE_TOKEN
		srv.URL:                      storage.ErrInvalidArgument,  // no bucket
		srv.URL + "/bucket?region=x": storage.ErrInvalidArgument,
		"s3://bucket/prefix":         storage.ErrInvalidArgument,
		"http://127.0.0.1:1/bucket":  storage.ErrTransient, // nothing listens on port 1
	} {
		loc, err := storage.ParseLocation(uri)
		if err == nil {
			_, err = Open(ctx, loc)
		}
		if !errors.Is(err, want) {
			t.Errorf("open %s: %v, want %s", uri, err, want)
		}
	}
	t.Setenv(TokenEnv, "secret")
	d := open(t, srv.URL+"/bucket")
	if _, err := d.Put(ctx, "k", bytes.NewReader(nil), storage.PutOptions{}); err != nil {
		t.Fatalf("put with the token: %v", err)
	}
	loc, _ := storage.ParseLocation(srv.URL + "/other")
	_, err := Open(ctx, loc)
	if !errors.Is(err, storage.ErrNotFound) || !strings.Contains(err.Error(), "httpstore-server -bucket other") {
		t.Errorf("open of a missing bucket: %v, want not found naming how to create it", err)
	}
}

// TestLimitsFromServer: the declared limits are the ones the server
// reports, and a body over the object size limit is refused as limit
// exceeded with nothing stored.
func TestLimitsFromServer(t *testing.T) {
	srv := server.New(server.Config{MaxObjectSize: 10, MaxListPage: 3, MaxDeleteBatch: 2}, "bucket")
	ts := httptest.NewServer(srv)
	defer ts.Close()
	d := open(t, ts.URL+"/bucket")
	caps, err := d.Capabilities(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if want := (storage.Limits{MaxObjectSize: 10, MaxListPage: 3, MaxDeleteBatch: 2}); caps.Limits != want {
		t.Fatalf("limits %+v, want %+v", caps.Limits, want)
	}
	_, err = d.Put(context.Background(), "big", strings.NewReader("eleven byte"), storage.PutOptions{})
	if !errors.Is(err, storage.ErrLimitExceeded) || srv.Len("bucket") != 0 {
		t.Fatalf("put of 11 bytes over a limit of 10: %v, %d objects stored", err, srv.Len("bucket"))
	}
	_, err = d.DeleteMany(context.Background(), []string{"a", "b", "c"})
	if !errors.Is(err, storage.ErrLimitExceeded) {
		t.Fatalf("delete-many of 3 over a batch of 2: %v", err)
	}
}
