package httpstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"syscall"

	"github.com/retain-dev/retain/sdk/core"
	"github.com/retain-dev/retain/sdk/examples/httpstore/server"
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
func KindOfStatus(status int, mode core.PutMode) core.Kind {
	switch status {
	case http.StatusNotFound:
		return core.ErrNotFound
	case http.StatusPreconditionFailed, http.StatusConflict:
		if mode == core.PutCreateIfAbsent {
			return core.ErrAlreadyExists
		}
		return core.ErrPreconditionFailed
	case http.StatusUnauthorized, http.StatusForbidden:
		return core.ErrPermissionDenied
	case http.StatusRequestEntityTooLarge:
		return core.ErrLimitExceeded
	case http.StatusBadRequest:
		return core.ErrInvalidArgument
	case http.StatusMethodNotAllowed, http.StatusNotImplemented:
		return core.ErrUnsupported
	case http.StatusRequestTimeout, http.StatusTooManyRequests,
		http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return core.ErrTransient
	}
	return core.ErrUnknown
}

// statusErr turns a response that is not 2xx into an *core.Error, nil for
// success.
func (d *Driver) statusErr(op, key string, resp *http.Response, mode core.PutMode) error {
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return nil
	}
	se := &StatusError{Status: resp.StatusCode, Code: resp.Header.Get(server.ErrorCodeHeader)}
	e := &core.Error{Op: op, Key: key, Kind: KindOfStatus(se.Status, mode), Err: se}
	switch {
	case se.Code == server.CodeNoSuchBucket:
		e.Msg = fmt.Sprintf("bucket %q does not exist at %s: create it (httpstore-server -bucket %s, or curl -X PUT %s)", d.bucket, d.base, d.bucket, d.bucketURL())
	case e.Kind == core.ErrPermissionDenied:
		e.Msg = fmt.Sprintf("the server refused access: set $%s to its token", TokenEnv)
	case e.Kind == core.ErrTransient:
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
	var ce *core.Error
	if errors.As(err, &ce) {
		return ce
	}
	if k := transportKind(err); k != core.ErrUnknown {
		msg := "the connection to " + d.base + " failed"
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			msg = "context done"
		}
		// Err keeps the cause, so errors.Is(err, context.DeadlineExceeded)
		// still holds for the caller.
		return &core.Error{Op: op, Key: key, Kind: k, Msg: msg, Err: err}
	}
	return core.Wrap(op, key, core.ErrUnknown, err)
}

// transportKind is the kind of an error from the HTTP client or a body.
func transportKind(err error) core.Kind {
	var netErr net.Error
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return core.ErrTransient
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return core.ErrTransient
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		// A body cut short, or a connection the server closed mid-request.
		return core.ErrTransient
	case errors.As(err, &netErr):
		return core.ErrTransient
	}
	return core.ErrUnknown
}

// kindOfCode is the kind of a per-key error code in a batch answer.
func kindOfCode(code string) core.Kind {
	switch code {
	case server.CodeBadRequest:
		return core.ErrInvalidArgument
	case server.CodeAccessDenied:
		return core.ErrPermissionDenied
	case server.CodePreconditionFailed:
		return core.ErrPreconditionFailed
	}
	return core.ErrUnknown
}
