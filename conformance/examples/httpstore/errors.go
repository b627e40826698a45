package httpstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"syscall"

	"github.com/retain-dev/retain/conformance/examples/httpstore/server"
	"github.com/retain-dev/retain/core/storage"
)

// StatusError is a response the server refused: its HTTP status and the
// machine-readable code it sent. The mapping reads these two, never the
// message text.
type StatusError struct {
	Status int
	Code   string // the X-Error-Code header, may be empty
}

func (e *StatusError) Error() string {
	switch {
	case e.Status == 0:
		return e.Code
	case e.Code != "":
		return fmt.Sprintf("HTTP %d %s", e.Status, e.Code)
	}
	return fmt.Sprintf("HTTP %d", e.Status)
}

// KindOfStatus is the core kind of an HTTP status, for an operation with
// put mode mode (a lost create-if-absent is already-exists, not a version
// mismatch).
func KindOfStatus(status int, mode storage.PutMode) storage.Kind {
	switch status {
	case http.StatusNotFound:
		return storage.ErrNotFound
	case http.StatusPreconditionFailed, http.StatusConflict:
		if mode == storage.PutCreateIfAbsent {
			return storage.ErrAlreadyExists
		}
		return storage.ErrPreconditionFailed
	case http.StatusUnauthorized, http.StatusForbidden:
		return storage.ErrPermissionDenied
	case http.StatusRequestEntityTooLarge:
		return storage.ErrLimitExceeded
	case http.StatusBadRequest:
		return storage.ErrInvalidArgument
	case http.StatusMethodNotAllowed, http.StatusNotImplemented:
		return storage.ErrUnsupported
	case http.StatusRequestTimeout, http.StatusTooManyRequests,
		http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return storage.ErrTransient
	}
	return storage.ErrUnknown
}

// statusErr turns a response that is not 2xx into an *storage.Error, nil for
// success.
func (d *Driver) statusErr(op, key string, resp *http.Response, mode storage.PutMode) error {
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return nil
	}
	se := &StatusError{Status: resp.StatusCode, Code: resp.Header.Get(server.ErrorCodeHeader)}
	e := &storage.Error{Op: op, Key: key, Kind: KindOfStatus(se.Status, mode), Err: se}
	switch {
	case se.Code == server.CodeNoSuchBucket:
		e.Msg = fmt.Sprintf("bucket %q does not exist at %s: create it (httpstore-server -bucket %s, or curl -X PUT %s)", d.bucket, d.base, d.bucket, d.bucketURL())
	case e.Kind == storage.ErrPermissionDenied:
		e.Msg = fmt.Sprintf("the server refused access: set $%s to its token", TokenEnv)
	case e.Kind == storage.ErrTransient:
		e.Msg = "the server is busy or unavailable: try again"
	}
	return e
}

// mapErr classifies a transport or body error by its type: context ends and
// broken or refused connections are transient (the host retries within its
// budget), anything unrecognised is unknown, which retain treats as "keep,
// do not delete".
func (d *Driver) mapErr(op, key string, err error) error {
	if err == nil {
		return nil
	}
	var ce *storage.Error
	if errors.As(err, &ce) {
		return ce
	}
	if k := transportKind(err); k != storage.ErrUnknown {
		msg := "the connection to " + d.base + " failed"
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			msg = "context done"
		}
		// Err keeps the cause, so errors.Is(err, context.DeadlineExceeded)
		// still holds for the caller.
		return &storage.Error{Op: op, Key: key, Kind: k, Msg: msg, Err: err}
	}
	return storage.Wrap(op, key, storage.ErrUnknown, err)
}

// transportKind is the kind of an error from the HTTP client or a body.
func transportKind(err error) storage.Kind {
	var netErr net.Error
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return storage.ErrTransient
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return storage.ErrTransient
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		// A body cut short, or a connection the server closed mid-request.
		return storage.ErrTransient
	case errors.As(err, &netErr):
		return storage.ErrTransient
	}
	return storage.ErrUnknown
}

// kindOfCode is the kind of a per-key error code in a batch answer.
func kindOfCode(code string) storage.Kind {
	switch code {
	case server.CodeBadRequest:
		return storage.ErrInvalidArgument
	case server.CodeAccessDenied:
		return storage.ErrPermissionDenied
	case server.CodePreconditionFailed:
		return storage.ErrPreconditionFailed
	}
	return storage.ErrUnknown
}
