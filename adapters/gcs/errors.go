package gcs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"syscall"

	"cloud.google.com/go/auth"
	gcsapi "cloud.google.com/go/storage"
	"google.golang.org/api/googleapi"

	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/redact"
)

// mapErr classifies an error of the storage client from its typed form:
// the client's sentinels, the HTTP status of a *googleapi.Error, the status
// of a token endpoint's *auth.Error, network errors. Never message text.
func mapErr(op, key string, err error) *storage.Error {
	var ce *storage.Error
	if errors.As(err, &ce) {
		return ce
	}
	kind, msg := classify(err)
	return &storage.Error{Op: op, Key: key, Kind: kind, Msg: msg, Err: causeOf(err)}
}

// responseError is what an error records of an error answer of GCS or of
// the token endpoint: status, reason and the first line of the message,
// masked and capped. Never the raw body: a misconfigured or hostile
// endpoint may echo the request (its bearer token, or the signed
// assertion sent to the token endpoint) into it. It unwraps to the
// client's error, so errors.As still finds its types.
type responseError struct {
	what   string // "GCS" or "token endpoint"
	status int
	reason string
	msg    string
	err    error
}

// maxExcerpt bounds what of an endpoint's message an error quotes.
const maxExcerpt = 200

func (e *responseError) Error() string {
	s := e.what + ": HTTP " + strconv.Itoa(e.status)
	if e.reason != "" {
		s += " " + e.reason
	}
	if e.msg != "" {
		s += ": " + e.msg
	}
	return s
}

func (e *responseError) Unwrap() error { return e.err }

// causeOf is what a *storage.Error records of a client error: a
// responseError for an answer of GCS or the token endpoint, any other
// error with its text masked.
func causeOf(err error) error {
	var ae *auth.Error
	if errors.As(err, &ae) && ae.Response != nil {
		re := &responseError{what: "token endpoint", status: ae.Response.StatusCode, err: err}
		var body struct {
			Error       string `json:"error"`
			Description string `json:"error_description"`
		}
		if json.Unmarshal(ae.Body, &body) == nil {
			re.reason, re.msg = redact.Excerpt(body.Error, 64), redact.Excerpt(body.Description, maxExcerpt)
		} else {
			re.msg = redact.Excerpt(string(ae.Body), maxExcerpt)
		}
		return re
	}
	var ge *googleapi.Error
	if errors.As(err, &ge) {
		re := &responseError{what: "GCS", status: ge.Code, err: err}
		msg := ge.Message
		if len(ge.Errors) > 0 {
			re.reason = redact.Excerpt(ge.Errors[0].Reason, 64)
			if msg == "" {
				msg = ge.Errors[0].Message
			}
		}
		if msg == "" {
			msg = ge.Body
		}
		re.msg = redact.Excerpt(msg, maxExcerpt)
		return re
	}
	return redact.Error(err)
}

func classify(err error) (storage.Kind, string) {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return storage.ErrTransient, "context done"
	}
	if errors.Is(err, gcsapi.ErrBucketNotExist) {
		return storage.ErrNotFound, "the bucket does not exist"
	}
	if errors.Is(err, gcsapi.ErrObjectNotExist) {
		return storage.ErrNotFound, ""
	}
	// The token endpoint's refusal comes wrapped in the request's error:
	// look for it before the HTTP status of the storage call.
	var ae *auth.Error
	if errors.As(err, &ae) {
		if ae.Response == nil {
			return storage.ErrPermissionDenied, "the credentials could not produce an access token"
		}
		switch c := ae.Response.StatusCode; {
		case c == 408 || c == 429 || c >= 500:
			return storage.ErrTransient, "the token endpoint is unavailable"
		default:
			return storage.ErrPermissionDenied, fmt.Sprintf("the token endpoint refused the credentials (HTTP %d)", c)
		}
	}
	var ge *googleapi.Error
	if errors.As(err, &ge) {
		return kindOfStatus(ge.Code)
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE) || errors.Is(err, net.ErrClosed) {
		return storage.ErrTransient, "the connection failed"
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return storage.ErrTransient, "network error"
	}
	return storage.ErrUnknown, ""
}

// kindOfStatus maps a GCS JSON API status code.
func kindOfStatus(code int) (storage.Kind, string) {
	switch {
	case code == 400:
		return storage.ErrInvalidArgument, "GCS refused the request as invalid"
	case code == 401 || code == 403:
		return storage.ErrPermissionDenied, "GCS refused access: check the credentials' IAM roles on the bucket (storage.objects.*)"
	case code == 404:
		return storage.ErrNotFound, ""
	case code == 412:
		return storage.ErrPreconditionFailed, ""
	case code == 413:
		return storage.ErrLimitExceeded, "GCS refused the request as too large"
	case code == 408 || code == 429:
		return storage.ErrTransient, "GCS asked to slow down or timed out"
	case code >= 500 && code < 600:
		return storage.ErrTransient, "GCS server error"
	}
	return storage.ErrUnknown, ""
}

// httpCode is the HTTP status of a storage error, 0 if it has none.
func httpCode(err error) int {
	var ge *googleapi.Error
	if errors.As(err, &ge) {
		return ge.Code
	}
	return 0
}

// mapErrBucket maps an error of a bucket-level call (list), where the
// client reports a 404 as ErrBucketNotExist, naming the bucket.
func (d *Driver) mapErrBucket(op, key string, err error) *storage.Error {
	if errors.Is(err, gcsapi.ErrBucketNotExist) || httpCode(err) == 404 {
		return d.bucketGone(op, key, err)
	}
	return d.mapErr(op, key, err)
}

func (d *Driver) bucketGone(op, key string, err error) *storage.Error {
	return &storage.Error{Op: op, Key: key, Kind: storage.ErrNotFound,
		Msg: fmt.Sprintf("bucket %q does not exist (or is not visible to these credentials)", d.bucketName), Err: causeOf(err)}
}

func ctxErr(op, key string, err error) *storage.Error {
	return &storage.Error{Op: op, Key: key, Kind: storage.ErrTransient, Msg: "context done", Err: err}
}
