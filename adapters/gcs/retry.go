package gcs

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	gcsapi "cloud.google.com/go/storage"
	"github.com/googleapis/gax-go/v2"
	"google.golang.org/api/googleapi"

	"github.com/retain-dev/retain/core/storage"
)

// Retries are the storage client's own (gcsapi.ShouldRetry: 408, 429,
// 5xx, broken connections), configured here rather than left to its
// defaults, which retry an upload until the context ends: a throttle that
// does not pass must come back as an error in bounded time.
const (
	// retryMaxAttempts is the attempts per call, the first included.
	retryMaxAttempts = 5
)

// retryBackoff is the client's exponential back-off with jitter, as GCS's
// retry strategy recommends: first wait up to 1 s, doubling, at most 30 s.
var retryBackoff = gax.Backoff{Initial: time.Second, Max: 30 * time.Second, Multiplier: 2}

// testHooks are settings only tests change.
type testHooks struct {
	// backoff replaces retryBackoff, so tests of retries stay fast.
	backoff *gax.Backoff
}

// configureRetry sets the client-wide retry: back-off and attempts for
// every call that goes through the client's retry loop (reads, listings,
// deletes, metadata). Uploads retry in the API library's own loop, which
// honours the back-off but not the attempts: calls bound them with
// attemptRecord.option.
func (d *Driver) configureRetry(h testHooks) {
	bo := retryBackoff
	if h.backoff != nil {
		bo = *h.backoff
	}
	d.client.SetRetry(gcsapi.WithBackoff(bo), gcsapi.WithMaxAttempts(retryMaxAttempts), gcsapi.WithPolicy(gcsapi.RetryIdempotent))
}

// attemptRecord watches the retries of one call: it bounds them to
// retryMaxAttempts attempts and records whether a failed attempt may have
// been applied.
type attemptRecord struct {
	// resumable: a chunked upload, whose retries the API library bounds
	// per chunk (ChunkRetryDeadline, 32 s); a count over all its chunks
	// would fail a long upload for errors spread over many minutes.
	resumable bool
	retries   atomic.Int32
	maybe     atomic.Bool
}

// option is the call's retry predicate: the client's own, bounded.
func (a *attemptRecord) option() gcsapi.RetryOption {
	return gcsapi.WithErrorFunc(func(err error) bool {
		if !gcsapi.ShouldRetry(err) || (a.retries.Add(1) >= retryMaxAttempts && !a.resumable) {
			return false
		}
		if !refusal(err) {
			a.maybe.Store(true)
		}
		return true
	})
}

// maybeApplied says whether an earlier attempt may have reached GCS and
// been applied: it failed without an answer saying it was refused.
func (a *attemptRecord) maybeApplied() bool { return a.maybe.Load() }

// refusal: GCS refused the attempt before doing anything (429, rate
// limits). A 503 is not counted as one: GCS documents it for backend
// errors, which may follow a completed write.
func refusal(err error) bool { return httpCode(err) == 429 }

// throttled: GCS asked to slow down (429) or is unavailable (503).
func throttled(err error) bool {
	c := httpCode(err)
	return c == 429 || c == 503
}

// mapErr is the package's mapErr with, for a throttle that outlasted the
// retries, a message naming the bucket and the way out.
func (d *Driver) mapErr(op, key string, err error) *storage.Error {
	e := mapErr(op, key, err)
	if e.Kind == storage.ErrTransient && throttled(err) && !errors.As(err, new(*storage.Error)) {
		e.Msg = d.throttleMsg(err)
	}
	return e
}

func (d *Driver) throttleMsg(err error) string {
	what := fmt.Sprintf("HTTP %d", httpCode(err))
	var ge *googleapi.Error
	if errors.As(err, &ge) && len(ge.Errors) > 0 && ge.Errors[0].Reason != "" {
		what += " " + ge.Errors[0].Reason
	}
	return fmt.Sprintf("GCS bucket %q kept throttling (%s) through %d attempts with back-off: lower the request rate with --max-rps R (requests per second to the store) or --parallelism N (requests in flight; the adapter declares %d), or retry later; GCS also allows about one write per second to one object name",
		d.bucketName, what, retryMaxAttempts, parallelism)
}
