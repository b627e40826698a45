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

	"github.com/retain-dev/retain/sdk/core"
	"github.com/retain-dev/retain/sdk/examples/httpstore/server"
)

func TestKindOfStatus(t *testing.T) {
	for _, c := range []struct {
		status int
		mode   core.PutMode
		want   core.Kind
	}{
		{404, core.PutOverwrite, core.ErrNotFound},
		{412, core.PutReplaceIfVersion, core.ErrPreconditionFailed},
		{412, core.PutCreateIfAbsent, core.ErrAlreadyExists},
		{409, core.PutCreateIfAbsent, core.ErrAlreadyExists},
		{409, core.PutOverwrite, core.ErrPreconditionFailed},
		{401, core.PutOverwrite, core.ErrPermissionDenied},
		{403, core.PutOverwrite, core.ErrPermissionDenied},
		{413, core.PutOverwrite, core.ErrLimitExceeded},
		{429, core.PutOverwrite, core.ErrTransient},
		{503, core.PutOverwrite, core.ErrTransient},
		{504, core.PutOverwrite, core.ErrTransient},
		{400, core.PutOverwrite, core.ErrInvalidArgument},
		{501, core.PutOverwrite, core.ErrUnsupported},
		{500, core.PutOverwrite, core.ErrUnknown},
		{418, core.PutOverwrite, core.ErrUnknown},
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
	loc, err := core.ParseLocation(uri)
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
	_, putErr := d.Put(ctx, "k", strings.NewReader("x"), core.PutOptions{})
	_, createErr := d.Put(ctx, "k", strings.NewReader("x"), core.PutOptions{Mode: core.PutCreateIfAbsent})
	_, replaceErr := d.Put(ctx, "k", strings.NewReader("x"), core.PutOptions{Mode: core.PutReplaceIfVersion, IfVersion: "v1"})
	_, listErr := d.List(ctx, core.ListOptions{})
	_, dmErr := d.DeleteMany(ctx, []string{"k"})
	return map[string]error{
		"get": getErr, "stat": statErr, "put": putErr, "create": createErr, "replace": replaceErr,
		"delete-if-version": d.Delete(ctx, "k", core.DeleteOptions{IfVersion: "v1"}),
		"list":              listErr, "delete-many": dmErr,
	}
}

func TestStatusMapping(t *testing.T) {
	for status, want := range map[int]core.Kind{
		403: core.ErrPermissionDenied, 429: core.ErrTransient, 503: core.ErrTransient,
		413: core.ErrLimitExceeded, 500: core.ErrUnknown,
	} {
		for op, err := range every(answering(t, status), context.Background()) {
			if !errors.Is(err, want) {
				t.Errorf("HTTP %d on %s: %v (kind %s), want %s", status, op, err, core.KindOf(err), want)
			}
			var se *StatusError
			if !errors.As(err, &se) || se.Status != status {
				t.Errorf("HTTP %d on %s: the status is not kept as the cause: %v", status, op, err)
			}
		}
	}
	d := answering(t, 412)
	_, err := d.Put(context.Background(), "k", strings.NewReader("x"), core.PutOptions{Mode: core.PutCreateIfAbsent})
	if !errors.Is(err, core.ErrAlreadyExists) {
		t.Errorf("412 on create-if-absent: %v, want already exists", err)
	}
	_, err = d.Put(context.Background(), "k", strings.NewReader("x"), core.PutOptions{Mode: core.PutReplaceIfVersion, IfVersion: "v"})
	if !errors.Is(err, core.ErrPreconditionFailed) {
		t.Errorf("412 on replace-if-version: %v, want precondition failed", err)
	}
	_, err = answering(t, 404).Get(context.Background(), "k")
	if !errors.Is(err, core.ErrNotFound) {
		t.Errorf("404 on get: %v, want not found", err)
	}
}

func TestTransportErrors(t *testing.T) {
	// A server that went away: every call is transient.
	srv := httptest.NewServer(server.New(server.Config{}, "bucket"))
	d := open(t, srv.URL+"/bucket")
	srv.Close()
	for op, err := range every(d, context.Background()) {
		if !errors.Is(err, core.ErrTransient) {
			t.Errorf("%s on a closed server: %v (kind %s), want transient", op, err, core.KindOf(err))
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
	if !errors.Is(err, core.ErrTransient) || !errors.Is(err, context.DeadlineExceeded) {
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
	if !errors.Is(err, core.ErrTransient) {
		t.Fatalf("read of a cut body: %d bytes, %v, want a transient error", len(b), err)
	}
}

func TestOpenErrors(t *testing.T) {
	srv := httptest.NewServer(server.New(server.Config{Token: "secret"}, "bucket"))
	defer srv.Close()
	ctx := context.Background()
	for uri, want := range map[string]core.Kind{
		srv.URL + "/bucket":          core.ErrPermissionDenied, // no $HTTPSTORE_TOKEN
		srv.URL:                      core.ErrInvalidArgument,  // no bucket
		srv.URL + "/bucket?region=x": core.ErrInvalidArgument,
		"s3://bucket/prefix":         core.ErrInvalidArgument,
		"http://127.0.0.1:1/bucket":  core.ErrTransient, // nothing listens on port 1
	} {
		loc, err := core.ParseLocation(uri)
		if err == nil {
			_, err = Open(ctx, loc)
		}
		if !errors.Is(err, want) {
			t.Errorf("open %s: %v, want %s", uri, err, want)
		}
	}
	t.Setenv(TokenEnv, "secret")
	d := open(t, srv.URL+"/bucket")
	if _, err := d.Put(ctx, "k", bytes.NewReader(nil), core.PutOptions{}); err != nil {
		t.Fatalf("put with the token: %v", err)
	}
	loc, _ := core.ParseLocation(srv.URL + "/other")
	_, err := Open(ctx, loc)
	if !errors.Is(err, core.ErrNotFound) || !strings.Contains(err.Error(), "httpstore-server -bucket other") {
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
	if want := (core.Limits{MaxObjectSize: 10, MaxListPage: 3, MaxDeleteBatch: 2}); caps.Limits != want {
		t.Fatalf("limits %+v, want %+v", caps.Limits, want)
	}
	_, err = d.Put(context.Background(), "big", strings.NewReader("eleven byte"), core.PutOptions{})
	if !errors.Is(err, core.ErrLimitExceeded) || srv.Len("bucket") != 0 {
		t.Fatalf("put of 11 bytes over a limit of 10: %v, %d objects stored", err, srv.Len("bucket"))
	}
	_, err = d.DeleteMany(context.Background(), []string{"a", "b", "c"})
	if !errors.Is(err, core.ErrLimitExceeded) {
		t.Fatalf("delete-many of 3 over a batch of 2: %v", err)
	}
}
