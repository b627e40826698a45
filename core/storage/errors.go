package storage

import (
	"errors"
	"fmt"
)

// Kind classifies what happened to a storage operation. Kinds are owned by
// core so every adapter, in-process or across the plugin boundary, reports
// the same vocabulary. A Kind is itself an error, so the exported sentinels
// below work with errors.Is. A kind describes the outcome; it never decides
// by itself whether a caller may retry.
type Kind uint8

// The error kinds. Their numeric values cross the plugin wire: append only.
const (
	ErrUnknown            Kind = iota // the adapter could not classify the failure
	ErrNotFound                       // the key does not exist
	ErrAlreadyExists                  // create-if-absent lost: the key exists
	ErrPreconditionFailed             // the object's version is not the expected one
	ErrUnsupported                    // the adapter does not provide the capability
	ErrInvalidArgument                // a bad key, option or configuration
	ErrPermissionDenied               // the backend refused access
	ErrTransient                      // timeout, throttling or a broken connection
	ErrLimitExceeded                  // a declared or caller-set limit was hit
	ErrUnavailable                    // the adapter process is gone; the call's outcome is unknown
	kindCount
)

var kindNames = [...]string{
	ErrUnknown:            "unknown",
	ErrNotFound:           "not found",
	ErrAlreadyExists:      "already exists",
	ErrPreconditionFailed: "precondition failed",
	ErrUnsupported:        "unsupported",
	ErrInvalidArgument:    "invalid argument",
	ErrPermissionDenied:   "permission denied",
	ErrTransient:          "transient",
	ErrLimitExceeded:      "limit exceeded",
	ErrUnavailable:        "unavailable",
}

func (k Kind) Error() string { return k.String() }

// String names the kind.
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Valid reports whether k is one of the kinds defined above. A kind read from
// the wire that is not valid is treated as ErrUnknown.
func (k Kind) Valid() bool { return k < kindCount }

// Error is the one error type of the storage contract: which operation, on
// which key, what kind of failure, and the underlying cause.
type Error struct {
	Op   string // contract operation: "get", "put", "delete", "list", ...
	Key  string // the key, or the prefix for list; may be empty
	Kind Kind
	Msg  string // human detail: names the rule or the next step
	Err  error  // cause, may be nil
}

func (e *Error) Error() string {
	s := e.Op
	if e.Key != "" {
		s += " " + quoteKey(e.Kind, e.Key)
	}
	s += ": " + e.Kind.String()
	if e.Msg != "" {
		s += ": " + e.Msg
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap exposes both the cause and the kind, so errors.Is matches either a
// sentinel kind or the cause (for example context.DeadlineExceeded).
func (e *Error) Unwrap() []error {
	if e.Err == nil {
		return []error{e.Kind}
	}
	return []error{e.Kind, e.Err}
}

// Errorf builds an *Error with a formatted message and no cause.
func Errorf(op, key string, kind Kind, format string, args ...any) *Error {
	return &Error{Op: op, Key: key, Kind: kind, Msg: fmt.Sprintf(format, args...)}
}

// Wrap builds an *Error around a cause. If cause already carries a kind
// (an *Error or a bare Kind) and kind is ErrUnknown, the cause's kind is kept.
func Wrap(op, key string, kind Kind, cause error) *Error {
	if kind == ErrUnknown {
		kind = KindOf(cause)
	}
	return &Error{Op: op, Key: key, Kind: kind, Err: cause}
}

// KindOf returns the kind of err: the kind of the first *Error or Kind in
// its chain, ErrUnknown for any other non-nil error.
func KindOf(err error) Kind {
	if err == nil {
		return ErrUnknown
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	var k Kind
	if errors.As(err, &k) {
		return k
	}
	return ErrUnknown
}
