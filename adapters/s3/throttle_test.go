package s3

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/retry"

	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/storagetest"
	"github.com/retain-dev/retain/internal/emulator"
)

// fastBackoff keeps retries in tests to milliseconds; everything else of
// the retryer (attempts, what is retried, the quota) is the adapter's.
var fastBackoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 2 * time.Millisecond, nil })

// throttledStore opens bucket on versitygw through a throttle proxy.
func throttledStore(t *testing.T, bucket string) (*Driver, *throttleProxy) {
	t.Helper()
	e := emulator.Versitygw(t)
	p := newThrottleProxy(t, e.Endpoint)
	via := *e
	via.Endpoint = p.URL
	useEmulator(t, &via, bucket)
	loc, err := storage.ParseLocation("s3://" + bucket + "/p")
	if err != nil {
		t.Fatal(err)
	}
	d, err := openWith(bg, loc, testHooks{backoff: fastBackoff})
	if err != nil {
		t.Fatalf("open through the throttle proxy: %v", err)
	}
	t.Cleanup(func() { d.Close() })
	return d, p
}

// Every operation rides out a burst of throttling: four SlowDown answers
// in a row (one more than the SDK's default of three attempts allows) and
// the fifth attempt succeeds. The proxy's counts show the retries.
func TestThrottledOperationsSucceed(t *testing.T) {
	d, p := throttledStore(t, "throttled")
	const burst = retryMaxAttempts - 1
	// requests: what the operation sends when nothing is throttled.
	steps := func(what string, requests int64, f func() error) {
		t.Helper()
		p.throttleNext(burst)
		if err := f(); err != nil {
			t.Fatalf("%s after %d throttled answers: %v", what, burst, err)
		}
		if got, seen := p.throttled.Load(), p.seen.Load(); got != burst || seen != burst+requests {
			t.Fatalf("%s: %d of %d requests throttled, want %d of %d (the retries)", what, got, seen, burst, burst+requests)
		}
	}
	step := func(what string, f func() error) { t.Helper(); steps(what, 1, f) }
	var v storage.Info
	step("create-if-absent", func() (err error) { v, err = putS(d, "k", "one", storage.PutCreateIfAbsent, ""); return })
	step("get", func() error {
		got, info, err := readS(d, "k")
		if err == nil && (got != "one" || info.Version != v.Version) {
			err = errors.New("read " + got + " at " + info.Version)
		}
		return err
	})
	step("stat", func() error { _, err := d.Stat(bg, "k"); return err })
	step("replace-if-version", func() (err error) { v, err = putS(d, "k", "two", storage.PutReplaceIfVersion, v.Version); return })
	wantBody(t, d, "k", "two")
	step("overwrite", func() error { _, err := putS(d, "m", "x", storage.PutOverwrite, ""); return err })
	step("list", func() error {
		page, err := d.List(bg, storage.ListOptions{})
		if err == nil && len(page.Objects) != 2 {
			err = errors.New("listed the wrong keys")
		}
		return err
	})
	heads := int64(1)
	if d.deleteHeadFirst {
		heads = 2 // HeadObject, then the conditional DeleteObject
	}
	steps("delete-if-version", heads, func() error { return d.Delete(bg, "k", storage.DeleteOptions{IfVersion: v.Version}) })
	wantAbsent(t, d, "k")
	step("delete-many", func() error {
		res, err := d.DeleteMany(bg, []string{"m", "never"})
		for _, r := range res {
			if err == nil && r.Err != nil {
				err = r.Err
			}
		}
		return err
	})
	wantAbsent(t, d, "m")

	// 500 InternalError is retried too.
	p.answer(http.StatusInternalServerError, "InternalError")
	step("create-if-absent after 500 InternalError", func() error { _, err := putS(d, "i", "x", storage.PutCreateIfAbsent, ""); return err })
	p.answer(http.StatusServiceUnavailable, "SlowDown")
	step("delete", func() error { return d.Delete(bg, "i", storage.DeleteOptions{}) })
}

// A throttled attempt was refused unexecuted, so a 412 on the retry after
// it is a plain answer: a create on an existing key is "already exists"
// and a stale replace "precondition failed", never an unknown outcome.
func TestThrottledConditionalRefusalIsDefinite(t *testing.T) {
	d, p := throttledStore(t, "definite")
	v := storagetest.MustPut(t, d, "k", "theirs")
	p.throttleNext(2)
	_, err := putS(d, "k", "mine", storage.PutCreateIfAbsent, "")
	storagetest.WantKind(t, "create on an existing key after throttling", err, storage.ErrAlreadyExists)
	if p.throttled.Load() != 2 {
		t.Fatalf("%d requests throttled, want 2", p.throttled.Load())
	}
	storagetest.MustPut(t, d, "k", "newer")
	p.throttleNext(2)
	_, err = putS(d, "k", "mine", storage.PutReplaceIfVersion, v.Version)
	storagetest.WantKind(t, "stale replace after throttling", err, storage.ErrPreconditionFailed)
	wantBody(t, d, "k", "newer")
}

// Throttling that outlasts the retries ends in bounded time as the
// transient kind, with a message naming the bucket and the flags that
// lower the request rate.
func TestPersistentThrottleIsTransient(t *testing.T) {
	d, p := throttledStore(t, "persistent")
	storagetest.MustPut(t, d, "k", "x")
	p.throttleNext(0)
	p.always.Store(true)
	ctx, cancel := context.WithTimeout(bg, 20*time.Second)
	defer cancel()
	start := time.Now()
	calls := map[string]func() error{
		"get": func() error { _, err := d.Get(ctx, "k"); return err },
		"create-if-absent": func() error {
			_, err := d.Put(ctx, "n", strings.NewReader("x"), storage.PutOptions{Mode: storage.PutCreateIfAbsent})
			return err
		},
		"list":   func() error { _, err := d.List(ctx, storage.ListOptions{}); return err },
		"delete": func() error { return d.Delete(ctx, "k", storage.DeleteOptions{}) },
	}
	for what, call := range calls {
		p.seen.Store(0)
		err := call()
		storagetest.WantKind(t, what+" under persistent throttling", err, storage.ErrTransient)
		if errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("%s waited for the context instead of giving up: %v", what, err)
		}
		for _, want := range []string{`"persistent"`, "SlowDown", "--max-rps", "--parallelism", "5 attempts"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: the message does not say %q: %v", what, want, err)
			}
		}
		if n := p.seen.Load(); n != retryMaxAttempts {
			t.Errorf("%s: %d requests, want %d attempts", what, n, retryMaxAttempts)
		}
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("persistent throttling took %v to surface", el)
	}
}
