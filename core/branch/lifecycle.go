package branch

import (
	"errors"
	"fmt"

	"github.com/retain-dev/retain/core/refs/lifecycle"
	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/claim"
)

// Typed refusals of the branch lifecycle (Create, and Delete's marking).
var (
	// ErrLifecycleOwned: the branch is creating or deleting under another
	// operation whose process is not proven dead. A transition is taken
	// over only with claim.Proof's proof (same host: boot id changed, pid
	// gone or reused; other host: the operator's attestation), never for
	// its age. The concrete error is *OwnerAliveError (kind
	// storage.ErrPreconditionFailed, also matches claim.ErrNoProof).
	ErrLifecycleOwned = errors.New("another operation owns the branch's lifecycle transition")
	// ErrBranchConflict: create named an existing branch with another
	// source (or, ready, other metadata) than the branch has. The
	// concrete error is *ConflictError (kind storage.ErrAlreadyExists).
	ErrBranchConflict = errors.New("branch exists with another source")
	// ErrBranchBeingDeleted: create named a branch that is being deleted;
	// finish the delete first. Kind storage.ErrPreconditionFailed.
	ErrBranchBeingDeleted = errors.New("branch is being deleted")
	// ErrBranchBroken: create refused to adopt a branch whose folder has
	// no readable head, or whose fork point is gone. Kind
	// storage.ErrPreconditionFailed.
	ErrBranchBroken = errors.New("branch cannot be opened")
)

// OwnerAliveError refuses to take over a transition whose owner is not
// proven dead.
type OwnerAliveError struct {
	Branch    string          `json:"branch"`
	Table     string          `json:"table"`
	State     lifecycle.State `json:"state"`
	Operation string          `json:"operation"`
	Owner     lifecycle.Owner `json:"owner"`
	Why       string          `json:"why"`
	Cause     error           `json:"-"`
}

func (e *OwnerAliveError) Error() string {
	return fmt.Sprintf("%v: branch %q of %s is %s under operation %s of %s pid %d: %s; nothing was changed: wait for it, or once it is dead run the command again (for an owner on another host add --owner-dead-attested)",
		ErrLifecycleOwned, e.Branch, e.Table, e.State, e.Operation, e.Owner.Host, e.Owner.PID, e.Why)
}

// Unwrap matches ErrLifecycleOwned, claim.ErrNoProof and the kind.
func (e *OwnerAliveError) Unwrap() []error {
	return []error{ErrLifecycleOwned, claim.ErrNoProof, storage.ErrPreconditionFailed}
}

// ConflictError is a create whose source (or metadata) differs from the
// existing branch's.
type ConflictError struct {
	Branch string `json:"branch"`
	Table  string `json:"table"`
	// Want is the source asked for, Have the branch's.
	Want string `json:"want"`
	Have string `json:"have"`
	Msg  string `json:"message,omitempty"`
}

func (e *ConflictError) Error() string {
	s := fmt.Sprintf("%v: branch %q of %s was forked from %s, not %s", ErrBranchConflict, e.Branch, e.Table, e.Have, e.Want)
	if e.Msg != "" {
		s = fmt.Sprintf("%v: branch %q of %s: %s", ErrBranchConflict, e.Branch, e.Table, e.Msg)
	}
	return s + "; nothing was changed: choose another name, or delete the branch first"
}

// Unwrap matches ErrBranchConflict and storage.ErrAlreadyExists.
func (e *ConflictError) Unwrap() []error { return []error{ErrBranchConflict, storage.ErrAlreadyExists} }

// TookOver records a transition this operation took over from a dead
// process, and the proof.
type TookOver struct {
	State             lifecycle.State `json:"state"`
	PreviousOperation string          `json:"previous_operation"`
	PreviousOwner     lifecycle.Owner `json:"previous_owner"`
	Proof             string          `json:"proof"`
}

// selfOwner is this process as a lifecycle owner: the identity the claim
// recorded.
func selfOwner(h *claim.Handle) *lifecycle.Owner {
	p := h.Payload()
	return &lifecycle.Owner{Host: p.Host, PID: p.PID, BootID: p.BootID, ProcessStart: p.ProcessStart}
}

// takeOver decides whether operation op (running as self, holding the
// claim) may continue the transition l records on branch name of table:
// a state without owner, or one this operation wrote, needs nothing; any
// other owner must be proven dead by claim.Proof — on the same host the
// tool proves it, for another host only attested counts.
func takeOver(self *lifecycle.Owner, op, name, table string, l lifecycle.Record, attested string) (*TookOver, error) {
	if l.Owner == nil || l.Op == op {
		return nil, nil
	}
	prev := &claim.Payload{Host: l.Owner.Host, PID: l.Owner.PID, BootID: l.Owner.BootID, ProcessStart: l.Owner.ProcessStart}
	proof, err := claim.Proof(self.Host, prev, attested)
	if err != nil {
		return nil, &OwnerAliveError{Branch: name, Table: table, State: l.State, Operation: l.Op, Owner: *l.Owner, Why: err.Error(), Cause: err}
	}
	return &TookOver{State: l.State, PreviousOperation: l.Op, PreviousOwner: *l.Owner, Proof: proof}, nil
}

// refusal is a typed refusal: it matches its sentinel and its kind.
type refusal struct {
	sentinel error
	kind     storage.Kind
	msg      string
}

func refuse(sentinel error, kind storage.Kind, format string, args ...any) error {
	return &refusal{sentinel: sentinel, kind: kind, msg: fmt.Sprintf(format, args...)}
}

func (e *refusal) Error() string   { return e.sentinel.Error() + ": " + e.msg }
func (e *refusal) Unwrap() []error { return []error{e.sentinel, e.kind} }
