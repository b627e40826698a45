package registry

import (
	"errors"
	"fmt"

	"github.com/retain-dev/retain/core/storage"
)

// Typed refusals. Every error this package returns for one of these reasons
// matches the sentinel with errors.Is, and also the storage.Kind listed with it,
// so callers that only speak the storage contract's vocabulary still branch
// correctly.
var (
	// ErrInvalidName: a checkpoint name breaks a rule of the v1 name rules
	// (kind storage.ErrInvalidArgument). The concrete error is *NameError.
	ErrInvalidName = errors.New("invalid checkpoint name")
	// ErrConflict: another writer committed the registry version this
	// commit wanted (kind storage.ErrPreconditionFailed). Re-read the head,
	// re-apply the change, commit again.
	ErrConflict = errors.New("registry conflict: another writer committed first")
	// ErrNameTaken: the name has a live reservation (kind
	// storage.ErrAlreadyExists).
	ErrNameTaken = errors.New("checkpoint name is taken")
	// ErrNameTombstoned: Reserve (insert-only) found a tombstoned
	// reservation of the name; reuse it with Revive and the tombstoned
	// generation (kind storage.ErrAlreadyExists).
	ErrNameTombstoned = errors.New("checkpoint name is tombstoned")
	// ErrStaleGeneration: Revive was given a generation that is not the
	// name's current tombstoned generation (kind
	// storage.ErrPreconditionFailed).
	ErrStaleGeneration = errors.New("checkpoint name generation is not the expected one")
	// ErrCheckpointNotFound: no such checkpoint, name or table (kind
	// storage.ErrNotFound).
	ErrCheckpointNotFound = errors.New("checkpoint not found")
	// ErrAlreadyTombstoned: the checkpoint is already tombstoned (kind
	// storage.ErrPreconditionFailed); the message names its delete operation.
	ErrAlreadyTombstoned = errors.New("checkpoint is already tombstoned")
	// ErrAmbiguous: a name-or-id resolves to two different checkpoints
	// (kind storage.ErrInvalidArgument).
	ErrAmbiguous = errors.New("ambiguous checkpoint reference")
	// ErrInvalidSnapshot: a draft snapshot, pin, table or argument breaks
	// an invariant of the registry; nothing was written (kind
	// storage.ErrInvalidArgument).
	ErrInvalidSnapshot = errors.New("invalid registry change")
	// ErrCorruptRegistry: a stored registry version does not parse, breaks
	// an invariant, or its version field disagrees with its object name
	// (kind storage.ErrUnknown). Readers and writers refuse: the registry is
	// the authority for what is retained, so nothing is decided from a
	// registry this build cannot fully read.
	ErrCorruptRegistry = errors.New("corrupt checkpoint registry")
	// ErrNewerRegistry: a stored registry version has a format newer than
	// this build reads: a newer retain wrote it. It also matches
	// ErrCorruptRegistry (nothing is decided from it), but it is not
	// damage: registry recover refuses to rebuild over it, and the way out
	// is running that newer build.
	ErrNewerRegistry = errors.New("registry version written by a newer retain")
	// ErrRefMismatch: a registry version's bytes are not the ones a
	// registry ref names (kind storage.ErrPreconditionFailed).
	ErrRefMismatch = errors.New("registry version is not the one the ref names")
	// ErrBehindGCBoundary: a pin names a version at or behind the newest
	// version a cleanup removed from that branch of that table incarnation
	// (its gc_boundary row): the version is gone, or is an older neighbour
	// of what went, and must not become a root again (kind
	// storage.ErrPreconditionFailed).
	ErrBehindGCBoundary = errors.New("version is at or behind the table's gc boundary")
)

// kindOf is the storage kind each sentinel carries.
var kindOf = map[error]storage.Kind{
	ErrInvalidName:        storage.ErrInvalidArgument,
	ErrConflict:           storage.ErrPreconditionFailed,
	ErrNameTaken:          storage.ErrAlreadyExists,
	ErrNameTombstoned:     storage.ErrAlreadyExists,
	ErrStaleGeneration:    storage.ErrPreconditionFailed,
	ErrCheckpointNotFound: storage.ErrNotFound,
	ErrAlreadyTombstoned:  storage.ErrPreconditionFailed,
	ErrAmbiguous:          storage.ErrInvalidArgument,
	ErrInvalidSnapshot:    storage.ErrInvalidArgument,
	ErrCorruptRegistry:    storage.ErrUnknown,
	ErrRefMismatch:        storage.ErrPreconditionFailed,
	ErrBehindGCBoundary:   storage.ErrPreconditionFailed,
}

// Error is the one error type of this package besides *NameError, and of
// the checkpoint protocols built on it: what was attempted, on which key or
// name, which sentinel, and the cause.
type Error struct {
	Op    string // "reserve", "commit", "head", ...
	Key   string // the store key, checkpoint name or id concerned; may be empty
	Err   error  // a sentinel: one of the above, or of a package built on this one
	Msg   string // what happened and, where there is one, the next step
	Cause error  // may be nil
	// Kind is the storage kind of a sentinel this package does not know
	// (the protocols' own; unset means ErrUnknown); for this package's
	// sentinels it is looked up.
	Kind storage.Kind
}

func (e *Error) Error() string {
	s := e.Op
	if e.Key != "" {
		s += " " + storage.Quote(e.Key)
	}
	s += ": " + e.Err.Error()
	if e.Msg != "" {
		s += ": " + e.Msg
	}
	if e.Cause != nil {
		s += ": " + e.Cause.Error()
	}
	return s
}

// Unwrap matches the sentinel, its storage kind and the cause.
func (e *Error) Unwrap() []error {
	out := []error{e.Err}
	if k, ok := kindOf[e.Err]; ok {
		out = append(out, k)
	} else {
		out = append(out, e.Kind) // ErrUnknown when not set: honest
	}
	if e.Cause != nil {
		out = append(out, e.Cause)
	}
	return out
}

func errorf(op, key string, sentinel error, format string, args ...any) *Error {
	return &Error{Op: op, Key: key, Err: sentinel, Msg: fmt.Sprintf(format, args...)}
}

func corrupt(op, key string, cause error, format string, args ...any) *Error {
	return &Error{Op: op, Key: key, Err: ErrCorruptRegistry, Cause: cause, Msg: fmt.Sprintf(format, args...) +
		"; retain refuses to read or extend a registry it cannot fully read: inspect the object, restore it from the store's history, or report it"}
}
