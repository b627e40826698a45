package checkpoint

import (
	"errors"
	"fmt"

	"github.com/retain-dev/retain/core/checkpoint/registry"
	"github.com/retain-dev/retain/core/storage"
)

// Typed refusals of the protocols. Each matches its sentinel and the
// storage.Kind listed with it.
var (
	// ErrSourceChanged: a table changed under the create between capture
	// and verification (a head moved, a table was recreated at its path:
	// the ABA case) and retries are exhausted, or it changed after its tag
	// was written (kind storage.ErrPreconditionFailed). Nothing was published.
	ErrSourceChanged = errors.New("the source changed during the checkpoint")
	// ErrPinConflict: a pin tag exists under the deterministic name but
	// points elsewhere than the name's target, or a pinned version is no
	// longer the commit its row names: corruption, never overwritten
	// (kind storage.ErrUnknown).
	ErrPinConflict = errors.New("pin tag conflict")
	// ErrReservedTag: a user command tried to create, move or delete a tag
	// in retain's reserved "ogcp_" namespace (kind storage.ErrInvalidArgument).
	ErrReservedTag = errors.New("reserved tag name")
	// ErrNoTables: the store root holds no Lance table (kind
	// storage.ErrNotFound).
	ErrNoTables = errors.New("no Lance tables in the store")
	// ErrMissingTarget: a captured table or branch does not exist (kind
	// storage.ErrNotFound).
	ErrMissingTarget = errors.New("checkpoint target is missing")
	// ErrConflicts: reconcile found conflicts it left untouched (kind
	// storage.ErrPreconditionFailed); the report lists them.
	ErrConflicts = errors.New("reconcile found conflicts")
	// ErrAuthorityLost: pins exist that no intact registry record explains
	// (the registry lost or rewrote history); nothing was reclaimed or
	// deleted (kind storage.ErrPreconditionFailed). The way out is
	// `retain registry recover` (RecoverHint).
	ErrAuthorityLost = errors.New("checkpoint authority lost or rewritten")
	// ErrRegistryDamaged: registry verify found versions that do not read
	// or pins the registry does not account for (kind
	// storage.ErrPreconditionFailed); the report names the way out.
	ErrRegistryDamaged = errors.New("the registry is damaged")
	// ErrPinNotLost: drop-lost was asked to give up a pin whose version is
	// intact or cannot be read (so is not provably gone); nothing was
	// dropped (kind storage.ErrPreconditionFailed).
	ErrPinNotLost = errors.New("the pin is not provably lost")
)

var kindOf = map[error]storage.Kind{
	ErrSourceChanged:   storage.ErrPreconditionFailed,
	ErrPinConflict:     storage.ErrUnknown,
	ErrReservedTag:     storage.ErrInvalidArgument,
	ErrNoTables:        storage.ErrNotFound,
	ErrMissingTarget:   storage.ErrNotFound,
	ErrConflicts:       storage.ErrPreconditionFailed,
	ErrAuthorityLost:   storage.ErrPreconditionFailed,
	ErrRegistryDamaged: storage.ErrPreconditionFailed,
	ErrPinNotLost:      storage.ErrPreconditionFailed,
}

// Error is a protocol refusal: checkpoint's error type, with the kind of
// the protocol's sentinel filled in.
type Error = registry.Error

// refusal builds an *Error for sentinel with its storage kind.
func refusal(op, key string, sentinel error, msg string, cause error) *Error {
	return &Error{Op: op, Key: key, Err: sentinel, Kind: kindOf[sentinel], Msg: msg, Cause: cause}
}

func errorf(op, key string, sentinel error, format string, args ...any) *Error {
	return refusal(op, key, sentinel, fmt.Sprintf(format, args...), nil)
}

// CheckUserTag refuses a tag name in retain's reserved "ogcp_" namespace:
// every user command that creates, moves or deletes a tag calls it first.
func CheckUserTag(name string) error {
	if registry.IsReservedTag(name) {
		return errorf("tag", name, ErrReservedTag, "tags beginning with %q are checkpoint pins, managed only by retain's checkpoint commands and reconcile", registry.TagPrefix)
	}
	return nil
}
