package gcs

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/googleapis/gax-go/v2"

	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/storagetest"
)

// throttler answers requests through a faultProxy the way GCS throttles
// (429 rateLimitExceeded in the JSON API's error form) and forwards the
// rest: the next n requests, or every one while always is set.
type throttler struct {
	next            atomic.Int64
	always          atomic.Bool
	seen, throttled atomic.Int64
}

func (th *throttler) hook(w http.ResponseWriter, r *http.Request, _ func() *http.Response) bool {
	th.seen.Add(1)
	if !th.always.Load() && th.next.Add(-1) < 0 {
		return false
	}
	th.throttled.Add(1)
	gcsError(w, http.StatusTooManyRequests, "rateLimitExceeded")
	return true
}

func (th *throttler) throttleNext(n int) {
	th.seen.Store(0)
	th.throttled.Store(0)
	th.next.Store(int64(n))
}

// throttledStore opens gs://bucket/t on fake-gcs-server through a proxy
// that throttles on demand, with back-off of milliseconds.
func throttledStore(t *testing.T, bucket string) (*Driver, *throttler, *faultProxy) {
	t.Helper()
	emu := startEmu(t, bucket)
	p := newFaultProxy(t, emu)
	th := &throttler{}
	p.set(th.hook)
	t.Setenv(emulatorEnv, strings.TrimPrefix(p.URL, "http://"))
	loc, err := storage.ParseLocation("gs://" + bucket + "/t")
	if err != nil {
		t.Fatal(err)
	}
	d, err := openWith(bg, loc, testHooks{backoff: &gax.Backoff{Initial: time.Millisecond, Max: 2 * time.Millisecond, Multiplier: 2}})
	if err != nil {
		t.Fatalf("open through the proxy: %v", err)
	}
	t.Cleanup(func() { d.Close() })
	return d, th, p
}

// Every operation rides out four 429s in a row and succeeds on the fifth
// attempt; conditional uploads are retried like the rest.
func TestThrottledOperationsSucceed(t *testing.T) {
	d, th, _ := throttledStore(t, "throttled")
	const burst = retryMaxAttempts - 1
	step := func(what string, f func() error) {
		t.Helper()
		th.throttleNext(burst)
		if err := f(); err != nil {
			t.Fatalf("%s after %d throttled answers: %v", what, burst, err)
		}
		if got, seen := th.throttled.Load(), th.seen.Load(); got != burst || seen <= burst {
			t.Fatalf("%s: %d of %d requests throttled, want %d and the retry after them", what, got, seen, burst)
		}
	}
	var v storage.Info
	step("create-if-absent", func() (err error) { v, err = put(d, "k", "one", storage.PutCreateIfAbsent, ""); return })
	step("get", func() error {
		r, err := d.Get(bg, "k")
		if err == nil {
			r.Close()
			if r.Info.Version != v.Version {
				err = errors.New("get returned another version")
			}
		}
		return err
	})
	step("stat", func() error { _, err := d.Stat(bg, "k"); return err })
	step("replace-if-version", func() (err error) { v, err = put(d, "k", "two", storage.PutReplaceIfVersion, v.Version); return })
	if body, _ := read(t, d, "k"); body != "two" {
		t.Fatalf("read %q after the replace", body)
	}
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
	storagetest.MustPut(t, d, "u", "x")
	step("delete", func() error { return d.Delete(bg, "u", storage.DeleteOptions{}) })
}

// A 429 is a refusal: a 412 on the retry after it is definite (already
// exists, precondition failed), never an unknown outcome.
func TestThrottledConditionalRefusalIsDefinite(t *testing.T) {
	d, th, _ := throttledStore(t, "definite")
	v := storagetest.MustPut(t, d, "k", "theirs")
	th.throttleNext(2)
	_, err := put(d, "k", "mine", storage.PutCreateIfAbsent, "")
	storagetest.WantKind(t, "create on an existing key after 429s", err, storage.ErrAlreadyExists)
	storagetest.MustPut(t, d, "k", "newer")
	th.throttleNext(2)
	_, err = put(d, "k", "mine", storage.PutReplaceIfVersion, v.Version)
	storagetest.WantKind(t, "stale replace after 429s", err, storage.ErrPreconditionFailed)
	if th.throttled.Load() != 2 {
		t.Fatalf("%d requests throttled, want 2", th.throttled.Load())
	}
}

// A create whose first attempt landed but whose answer was lost, and whose
// key someone else replaced before the retry's 412: the adapter cannot
// tell whether it created the key, so the outcome is unknown, never
// "already exists" for what may have been its own write.
func TestLostCreateOvertakenIsUnknown(t *testing.T) {
	d, _, p := throttledStore(t, "overtaken")
	var n atomic.Int32
	p.set(func(w http.ResponseWriter, r *http.Request, forward func() *http.Response) bool {
		if !isUpload(r) || n.Add(1) != 1 {
			return false
		}
		if resp := forward(); resp == nil || resp.StatusCode != 200 {
			t.Errorf("the first attempt itself failed: %v", resp)
		}
		storagetest.MustPut(t, d, "c", "someone else") // through the proxy: n is 2 now
		gcsError(w, http.StatusServiceUnavailable, "backendError")
		return true
	})
	_, err := put(d, "c", "mine", storage.PutCreateIfAbsent, "")
	storagetest.WantKind(t, "create landed, answer lost, key replaced", err, storage.ErrUnknown)
	if !strings.Contains(err.Error(), "outcome unknown") {
		t.Errorf("the message does not say the outcome is unknown: %v", err)
	}
}

// Throttling that outlasts the retries is transient, after exactly the
// configured attempts (uploads too, which the client would otherwise
// retry until the context ends), naming the bucket and the flags.
func TestPersistentThrottleIsTransient(t *testing.T) {
	d, th, _ := throttledStore(t, "persistent")
	storagetest.MustPut(t, d, "k", "x")
	th.throttleNext(0)
	th.always.Store(true)
	ctx, cancel := context.WithTimeout(bg, 20*time.Second)
	defer cancel()
	start := time.Now()
	for what, call := range map[string]func() error{
		"get": func() error { _, err := d.Get(ctx, "k"); return err },
		"create-if-absent": func() error {
			_, err := d.Put(ctx, "n", strings.NewReader("x"), storage.PutOptions{Mode: storage.PutCreateIfAbsent})
			return err
		},
		"overwrite": func() error { _, err := d.Put(ctx, "n", strings.NewReader("x"), storage.PutOptions{}); return err },
		"list":      func() error { _, err := d.List(ctx, storage.ListOptions{}); return err },
		"delete":    func() error { return d.Delete(ctx, "k", storage.DeleteOptions{}) },
	} {
		th.seen.Store(0)
		err := call()
		storagetest.WantKind(t, what+" under persistent throttling", err, storage.ErrTransient)
		if errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("%s waited for the context instead of giving up: %v", what, err)
		}
		for _, want := range []string{`"persistent"`, "HTTP 429", "--max-rps", "--parallelism", "5 attempts"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: the message does not say %q: %v", what, want, err)
			}
		}
		if n := th.seen.Load(); n != retryMaxAttempts {
			t.Errorf("%s: %d requests, want %d attempts", what, n, retryMaxAttempts)
		}
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("persistent throttling took %v to surface", el)
	}
}
