package azure

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"

	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/storagetest"
	"github.com/retain-dev/retain/internal/emulator"
)

// throttleProxy is a loopback reverse proxy in front of Azurite that
// answers some requests itself the way Blob Storage throttles (503
// ServerBusy, with x-ms-error-code and the XML error body) and forwards
// the rest. Shared Key signs the path, not the host, so signatures hold.
type throttleProxy struct {
	URL             string
	next            atomic.Int64 // throttle this many of the coming requests
	always          atomic.Bool  // throttle every request
	status          atomic.Int32
	code            atomic.Value
	seen, throttled atomic.Int64
}

func newThrottleProxy(t testing.TB, endpoint string) *throttleProxy {
	t.Helper()
	target, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	target.Path = ""
	p := &throttleProxy{}
	p.answer(http.StatusServiceUnavailable, "ServerBusy")
	rp := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.seen.Add(1)
		if p.always.Load() || p.next.Add(-1) >= 0 {
			p.throttled.Add(1)
			io.Copy(io.Discard, r.Body)
			code := p.code.Load().(string)
			w.Header().Set("Content-Type", "application/xml")
			w.Header().Set("x-ms-error-code", code)
			w.Header().Set("x-ms-request-id", "00000000-0000-0000-0000-000000000000")
			w.WriteHeader(int(p.status.Load()))
			if r.Method != http.MethodHead {
				io.WriteString(w, `<?xml version="1.0" encoding="utf-8"?><Error><Code>`+code+
					`</Code><Message>The server is busy.`+"\n"+`RequestId:00000000-0000-0000-0000-000000000000</Message></Error>`)
			}
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	p.URL = srv.URL
	return p
}

func (p *throttleProxy) throttleNext(n int) {
	p.seen.Store(0)
	p.throttled.Store(0)
	p.next.Store(int64(n))
}

func (p *throttleProxy) answer(status int, code string) {
	p.status.Store(int32(status))
	p.code.Store(code)
}

// fastRetry shortens the adapter's waits; its retry count and statuses
// stay the adapter's.
var fastRetry = &policy.RetryOptions{RetryDelay: time.Millisecond, MaxRetryDelay: 2 * time.Millisecond}

func throttledStore(t *testing.T, az *emulator.Azure, prefix string) (*Driver, *throttleProxy) {
	t.Helper()
	p := newThrottleProxy(t, az.Endpoint)
	via := *az
	via.Endpoint = p.URL + "/" + az.Account
	d := openAz(t, &via, "retain-test", prefix, map[string]string{OptConditionalDelete: "on"}, openOptions{retry: fastRetry})
	return d, p
}

func testThrottling(t *testing.T, az *emulator.Azure) {
	t.Run("OperationsSucceed", func(t *testing.T) { testThrottledOperations(t, az) })
	t.Run("RefusalIsDefinite", func(t *testing.T) { testThrottledRefusalIsDefinite(t, az) })
	t.Run("PersistentIsTransient", func(t *testing.T) { testPersistentThrottle(t, az) })
}

// Every operation rides out four ServerBusy answers in a row (one more
// than azcore's default of three retries allows) and succeeds on the
// fifth try; the proxy's counts show the retries.
func testThrottledOperations(t *testing.T, az *emulator.Azure) {
	d, p := throttledStore(t, az, "throttled")
	const burst = retryMaxRetries
	step := func(what string, f func() error) {
		t.Helper()
		p.throttleNext(burst)
		if err := f(); err != nil {
			t.Fatalf("%s after %d throttled answers: %v", what, burst, err)
		}
		if got, seen := p.throttled.Load(), p.seen.Load(); got != burst || seen != burst+1 {
			t.Fatalf("%s: %d of %d requests throttled, want %d of %d (the retries)", what, got, seen, burst, burst+1)
		}
	}
	var v storage.Info
	step("create-if-absent", func() (err error) { v, err = put(d, "k", "one", storage.PutCreateIfAbsent, ""); return })
	step("get", func() error {
		r, err := d.Get(bg, "k")
		if err == nil {
			defer r.Close()
			if b, _ := io.ReadAll(r); string(b) != "one" || r.Info.Version != v.Version {
				err = errors.New("get returned " + string(b) + " at " + r.Info.Version)
			}
		}
		return err
	})
	step("stat", func() error { _, err := d.Stat(bg, "k"); return err })
	step("replace-if-version", func() (err error) { v, err = put(d, "k", "two", storage.PutReplaceIfVersion, v.Version); return })
	step("overwrite", func() error { _, err := put(d, "m", "x", storage.PutOverwrite, ""); return err })
	step("list", func() error {
		page, err := d.List(bg, storage.ListOptions{})
		if err == nil && len(page.Objects) != 2 {
			err = errors.New("listed the wrong keys")
		}
		return err
	})
	step("delete-if-version", func() error { return d.Delete(bg, "k", storage.DeleteOptions{IfVersion: v.Version}) })
	step("delete-many", func() error {
		res, err := d.DeleteMany(bg, []string{"m"})
		if err == nil {
			err = res[0].Err
		}
		return err
	})
	for _, k := range []string{"k", "m"} {
		_, err := d.Stat(bg, k)
		storagetest.WantKind(t, "stat "+k+" after its delete", err, storage.ErrNotFound)
	}
	// 500 InternalError is retried too; it may follow a write, and the
	// write id tells the retry's 409 that the blob is this write's.
	p.answer(http.StatusInternalServerError, "InternalError")
	step("create-if-absent after 500s", func() error { _, err := put(d, "i", "x", storage.PutCreateIfAbsent, ""); return err })
	p.answer(http.StatusServiceUnavailable, "ServerBusy")
	step("delete", func() error { return d.Delete(bg, "i", storage.DeleteOptions{}) })
}

// A throttled try was refused unexecuted, so the 409/412 on the retry
// after it is definite: already exists, precondition failed.
func testThrottledRefusalIsDefinite(t *testing.T, az *emulator.Azure) {
	d, p := throttledStore(t, az, "definite")
	v := storagetest.MustPut(t, d, "k", "theirs")
	p.throttleNext(2)
	_, err := put(d, "k", "mine", storage.PutCreateIfAbsent, "")
	storagetest.WantKind(t, "create on an existing blob after ServerBusy", err, storage.ErrAlreadyExists)
	storagetest.MustPut(t, d, "k", "newer")
	p.throttleNext(2)
	_, err = put(d, "k", "mine", storage.PutReplaceIfVersion, v.Version)
	storagetest.WantKind(t, "stale replace after ServerBusy", err, storage.ErrPreconditionFailed)
	if p.throttled.Load() != 2 {
		t.Fatalf("%d requests throttled, want 2", p.throttled.Load())
	}
}

// ServerBusy past the retries is transient, after exactly five tries,
// naming the container and the flags that lower the request rate.
func testPersistentThrottle(t *testing.T, az *emulator.Azure) {
	d, p := throttledStore(t, az, "persistent")
	storagetest.MustPut(t, d, "k", "x")
	p.throttleNext(0)
	p.always.Store(true)
	ctx, cancel := context.WithTimeout(bg, 20*time.Second)
	defer cancel()
	start := time.Now()
	for what, call := range map[string]func() error{
		"get": func() error { _, err := d.Get(ctx, "k"); return err },
		"create-if-absent": func() error {
			_, err := d.Put(ctx, "n", strings.NewReader("x"), storage.PutOptions{Mode: storage.PutCreateIfAbsent})
			return err
		},
		"list":   func() error { _, err := d.List(ctx, storage.ListOptions{}); return err },
		"delete": func() error { return d.Delete(ctx, "k", storage.DeleteOptions{}) },
	} {
		p.seen.Store(0)
		err := call()
		storagetest.WantKind(t, what+" under persistent throttling", err, storage.ErrTransient)
		if errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("%s waited for the context instead of giving up: %v", what, err)
		}
		for _, want := range []string{`"retain-test"`, "503 ServerBusy", "--max-rps", "--parallelism", "5 tries"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: the message does not say %q: %v", what, want, err)
			}
		}
		if n := p.seen.Load(); n != retryMaxRetries+1 {
			t.Errorf("%s: %d requests, want %d tries", what, n, retryMaxRetries+1)
		}
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("persistent throttling took %v to surface", el)
	}
}
