package azure

import (
	"fmt"
	"net/http"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
)

// Retries are azcore's retry policy, configured here rather than left to
// its defaults (3 retries): Blob Storage answers 503 ServerBusy when an
// account or partition is over its request rate, and 500 for its internal
// errors; both are retried with exponential back-off, honouring Retry-After.
const (
	// retryMaxRetries is the retries after the first try: 5 tries a call.
	retryMaxRetries = 4
)

// retryOptions: back-off (2^try - 1) x 0.8 s with jitter, at most 30 s a
// wait: 0.8, 2.4, 5.6, 12 s.
func retryOptions() policy.RetryOptions {
	return policy.RetryOptions{
		MaxRetries:    retryMaxRetries,
		RetryDelay:    800 * time.Millisecond,
		MaxRetryDelay: 30 * time.Second,
		StatusCodes: []int{
			http.StatusRequestTimeout,      // 408
			http.StatusTooManyRequests,     // 429
			http.StatusInternalServerError, // 500 InternalError
			http.StatusBadGateway,          // 502
			http.StatusServiceUnavailable,  // 503 ServerBusy
			http.StatusGatewayTimeout,      // 504 OperationTimedOut
		},
	}
}

// withTestRetry lays the non-zero fields of a test's options over the
// adapter's: tests shorten the delays, or turn retries off, and keep the
// rest.
func withTestRetry(o policy.RetryOptions, t *policy.RetryOptions) policy.RetryOptions {
	if t == nil {
		return o
	}
	if t.MaxRetries != 0 {
		o.MaxRetries = t.MaxRetries
	}
	if t.RetryDelay != 0 {
		o.RetryDelay = t.RetryDelay
	}
	if t.MaxRetryDelay != 0 {
		o.MaxRetryDelay = t.MaxRetryDelay
	}
	return o
}

// throttled: the service asked to slow down (503 ServerBusy, 429).
func throttled(err error, se *ServiceError) bool {
	return hasCode(err, bloberror.ServerBusy) || se.Status == http.StatusServiceUnavailable || se.Status == http.StatusTooManyRequests
}

func (d *Driver) throttleMsg(se *ServiceError) string {
	what := fmt.Sprintf("HTTP %d", se.Status)
	if se.Code != "" {
		what += " " + se.Code
	}
	return fmt.Sprintf("Azure container %q kept throttling (%s) through %d tries with back-off: lower the request rate with --max-rps R (requests per second to the store) or --parallelism N (requests in flight; the adapter declares %d), or retry later",
		d.bucket, what, retryMaxRetries+1, parallelism)
}
