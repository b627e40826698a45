package pluginproto

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/redact"
	"github.com/retain-dev/retain/pluginproto/internal/pb"
)

// kindCodes is the gRPC code each kind travels with. The code is for
// generic gRPC tooling; the host reads the kind from the ErrorDetail.
var kindCodes = map[storage.Kind]codes.Code{
	storage.ErrUnknown:            codes.Unknown,
	storage.ErrNotFound:           codes.NotFound,
	storage.ErrAlreadyExists:      codes.AlreadyExists,
	storage.ErrPreconditionFailed: codes.FailedPrecondition,
	storage.ErrUnsupported:        codes.Unimplemented,
	storage.ErrInvalidArgument:    codes.InvalidArgument,
	storage.ErrPermissionDenied:   codes.PermissionDenied,
	storage.ErrTransient:          codes.Unavailable,
	storage.ErrLimitExceeded:      codes.ResourceExhausted,
	storage.ErrUnavailable:        codes.Unavailable,
}

// detailOf describes err for the wire. op and key fill in what err does not
// say itself.
func detailOf(op, key string, err error) (*pb.ErrorDetail, codes.Code) {
	d := &pb.ErrorDetail{Op: op, Key: key}
	kind := storage.ErrUnknown
	var ce *storage.Error
	switch {
	case errors.As(err, &ce):
		kind = ce.Kind
		if ce.Op != "" {
			d.Op = ce.Op
		}
		d.Key = ce.Key
		if error(ce) == err {
			// The text below "op key: kind", which the host re-renders.
			d.Message = ce.Msg
			if ce.Err != nil {
				if d.Message != "" {
					d.Message += ": "
				}
				d.Message += ce.Err.Error()
			}
		} else {
			d.Message = err.Error()
		}
	case errors.Is(err, context.DeadlineExceeded):
		kind = storage.ErrTransient
		d.Message = err.Error()
	default:
		kind = storage.KindOf(err)
		d.Message = err.Error()
	}
	if !kind.Valid() {
		kind = storage.ErrUnknown
	}
	d.Kind = uint32(kind)
	// Proto strings must be UTF-8; these are for people, so make them so.
	d.Op = strings.ToValidUTF8(d.Op, "\uFFFD")
	d.Key = strings.ToValidUTF8(d.Key, "\uFFFD")
	// Whatever the endpoint echoed into the error, no credential this
	// process knows leaves it.
	d.Message = redact.String(strings.ToValidUTF8(d.Message, "\uFFFD"))

	code := kindCodes[kind]
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		code = codes.DeadlineExceeded
	case errors.Is(err, context.Canceled):
		code = codes.Canceled
	}
	return d, code
}

// toStatus is the plugin half: err as a gRPC status carrying an
// ErrorDetail, so the host can rebuild the *storage.Error.
func toStatus(op, key string, err error) error {
	if err == nil {
		return nil
	}
	d, code := detailOf(op, key, err)
	st, serr := status.New(code, (&storage.Error{Op: d.Op, Key: d.Key, Kind: storage.Kind(d.Kind), Msg: d.Message}).Error()).WithDetails(d)
	if serr != nil {
		// Cannot happen for a well-formed proto message; the host would
		// report it as an unknown transport error.
		return status.Error(code, redact.String(err.Error()))
	}
	return st.Err()
}

// fromDetail rebuilds the *storage.Error the plugin sent.
func fromDetail(d *pb.ErrorDetail, code codes.Code) *storage.Error {
	// Masked again with what the host knows: a vendor's plugin may not.
	e := &storage.Error{Op: d.Op, Key: d.Key, Kind: validKind(d.Kind), Msg: redact.String(d.Message)}
	switch code {
	case codes.DeadlineExceeded:
		e.Err = context.DeadlineExceeded
	case codes.Canceled:
		e.Err = context.Canceled
	}
	return e
}

// convertErr is the host half: any error of an RPC on c as a *storage.Error.
// ctx is the caller's context for the call.
func (c *Client) convertErr(ctx context.Context, op, key string, err error) error {
	if err == nil {
		return nil
	}
	var ce *storage.Error
	if errors.As(err, &ce) {
		return err
	}
	st, isStatus := status.FromError(err)
	if isStatus {
		for _, d := range st.Details() {
			if d, ok := d.(*pb.ErrorDetail); ok {
				return fromDetail(d, st.Code())
			}
		}
	}
	// No detail: the plugin did not answer; the transport did.
	if cerr := ctx.Err(); cerr != nil {
		return ctxError(op, key, cerr)
	}
	if c.closed.Load() {
		return &storage.Error{Op: op, Key: key, Kind: storage.ErrUnavailable, Err: err, Msg: fmt.Sprintf(
			"the plugin client for adapter %q was closed during the call; the outcome of the call is unknown", c.adapter)}
	}
	if !isStatus {
		// An I/O error on the stream itself.
		return c.unavailable(op, key, err)
	}
	switch st.Code() {
	case codes.DeadlineExceeded:
		return ctxError(op, key, context.DeadlineExceeded)
	case codes.Canceled:
		if c.pluginGone() {
			return c.unavailable(op, key, err)
		}
		return ctxError(op, key, context.Canceled)
	case codes.Unavailable:
		return c.unavailable(op, key, err)
	}
	if c.pluginGone() {
		return c.unavailable(op, key, err)
	}
	return &storage.Error{Op: op, Key: key, Kind: storage.ErrUnknown,
		Msg: fmt.Sprintf("plugin transport error talking to adapter %q", c.adapter), Err: err}
}

// ctxError is a context's end as a *storage.Error, shaped as storage.Store does.
func ctxError(op, key string, cerr error) *storage.Error {
	if errors.Is(cerr, context.DeadlineExceeded) {
		return &storage.Error{Op: op, Key: key, Kind: storage.ErrTransient, Err: context.DeadlineExceeded}
	}
	return &storage.Error{Op: op, Key: key, Kind: storage.ErrUnknown, Err: context.Canceled}
}

// unavailable reports a plugin that stopped answering mid-call.
func (c *Client) unavailable(op, key string, cause error) *storage.Error {
	what := describe(op, key)
	if why := c.dead.Load(); why != nil {
		return &storage.Error{Op: op, Key: key, Kind: storage.ErrUnavailable, Err: cause, Msg: fmt.Sprintf(
			"the plugin for adapter %q was killed during %s because it %s; "+
				"the outcome of the call is unknown: check the object before retrying", c.adapter, what, *why)}
	}
	return &storage.Error{Op: op, Key: key, Kind: storage.ErrUnavailable, Err: cause, Msg: fmt.Sprintf(
		"the plugin process for adapter %q exited or crashed (its connection broke) during %s; "+
			"the outcome of the call is unknown: check the object before retrying", c.adapter, what)}
}
