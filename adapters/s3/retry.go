package s3

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
)

// Throttling (503 SlowDown, 429) and server errors (500 InternalError,
// 502, 504, broken connections) are retried by the SDK's own retryer,
// configured here rather than left to the SDK's defaults (3 attempts):
// S3 answers SlowDown while it scales a prefix up, and a few more spaced
// attempts ride that out.
const (
	// retryMaxAttempts is the attempts per call (the first included),
	// unless AWS_MAX_ATTEMPTS or max_attempts in the shared config says.
	retryMaxAttempts = 5
	// retryMaxBackoff caps one back-off. The SDK's exponential back-off
	// with full jitter starts at 1 s for throttling and 50 ms otherwise.
	retryMaxBackoff = 20 * time.Second
)

// newRetryer builds the SDK's standard retryer (or, with AWS_RETRY_MODE or
// retry_mode=adaptive, its adaptive mode, which also slows the whole client
// down after throttling) with the adapter's attempts and back-off. The
// standard retryer's retry quota stays: once a store has answered so many
// errors that the quota is spent, calls fail at once instead of piling up
// retries.
func newRetryer(mode aws.RetryMode, attempts int, backoff retry.BackoffDelayer) aws.Retryer {
	std := func(o *retry.StandardOptions) {
		o.MaxAttempts = attempts
		o.MaxBackoff = retryMaxBackoff
		if backoff != nil {
			o.Backoff = backoff
		}
	}
	if mode == aws.RetryModeAdaptive {
		return retry.NewAdaptiveMode(func(o *retry.AdaptiveModeOptions) {
			o.StandardOptions = append(o.StandardOptions, std)
		})
	}
	return retry.NewStandard(std)
}

// refusal says a failed attempt was refused before the endpoint did any
// work: throttling (503 SlowDown, 429 and the SDK's throttle codes). A
// conditional write refused so cannot have been applied, so a 412 on the
// retry after it is a plain answer, not an unknown outcome.
func refusal(err error) bool {
	f := failureOf(err)
	if f.status == http.StatusServiceUnavailable || f.status == http.StatusTooManyRequests {
		return true
	}
	_, throttle := retry.DefaultThrottleErrorCodes[f.code]
	return throttle && f.code != "PriorRequestNotComplete" && f.code != "TransactionInProgressException"
}

// throttleMsg names the store and the way out of a throttle that outlasted
// the retries.
func (d *Driver) throttleMsg(err error) string {
	tries := fmt.Sprintf("through %d attempts with back-off", d.maxAttempts)
	var me *retry.MaxAttemptsError
	var qe ratelimit.QuotaExceededError
	switch {
	case errors.As(err, &me):
		tries = fmt.Sprintf("through %d attempts with back-off", me.Attempt)
	case errors.As(err, &qe):
		tries = "until the SDK's retry quota for this store was spent"
	}
	return fmt.Sprintf("S3 bucket %q (%s) kept throttling (%s) %s: lower the request rate with --max-rps R (requests per second to the store) or --parallelism N (requests in flight; the adapter declares %d), or retry later",
		d.bucket, endpointNote(d.endpoint), failureOf(err).describe(), tries, parallelism)
}
