// Package claim is the retention claim: at most one retention operation owns
// a store at a time. The claim is one object, __leases/retention.json,
// created with create-if-absent and carrying a random owner token. It is
// never stolen for its age: a takeover needs the exact token of the stale
// claim and proof that its owner cannot resume.
package claim

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/retain-dev/retain/core/storage"
)

// Key is where the claim lives in a store.
const Key = "__leases/retention.json"

// Format is the payload format version this package writes.
const Format = 1

// Sentinel errors; the concrete errors are *HeldError and *LostError.
var (
	// ErrHeld: acquire found the claim held by someone else.
	ErrHeld = errors.New("retention claim is held")
	// ErrLost: a handle no longer owns the claim (released, taken over,
	// replaced or unreadable).
	ErrLost = errors.New("retention claim lost")
	// ErrNoProof: a takeover was refused because nothing proves the
	// holder cannot resume.
	ErrNoProof = errors.New("no proof that the claim's owner cannot resume")
	// ErrUnreadable: the claim object exists but this build cannot read it
	// (torn, not JSON, no owner token, another format). The store stays
	// claimed; only TakeoverUnreadable, on an operator's attestation,
	// clears it.
	ErrUnreadable = errors.New("the retention claim object is unreadable")
)

// Payload is the claim object's content.
type Payload struct {
	Format       int       `json:"format"`
	OperationID  string    `json:"operation_id"`
	Action       string    `json:"action"`
	Actor        string    `json:"actor"`
	CreatedAt    time.Time `json:"created_at"`
	OwnerToken   string    `json:"owner_token"`
	Host         string    `json:"host"`
	PID          int       `json:"pid"`
	BootID       string    `json:"boot_id,omitempty"`
	ProcessStart string    `json:"process_start,omitempty"`
	// Takeover is set when this claim replaced a stale one.
	Takeover *TakeoverRecord `json:"takeover,omitempty"`
}

// TakeoverRecord says which claim was taken over, why and on what proof.
type TakeoverRecord struct {
	PreviousOperationID string    `json:"previous_operation_id"`
	PreviousHost        string    `json:"previous_host"`
	PreviousPID         int       `json:"previous_pid"`
	PreviousCreatedAt   time.Time `json:"previous_created_at"`
	Reason              string    `json:"reason"`
	Proof               string    `json:"proof"`
	// Attested is the operator's statement, when the owner ran on another
	// host and the tool could not prove its death itself.
	Attested string `json:"attested,omitempty"`
	// Unreadable describes the claim object cleared, when it could not be
	// read (the Previous fields are then empty: nothing names its owner).
	Unreadable *Unreadable `json:"unreadable,omitempty"`
}

// Unreadable describes a claim object that exists but cannot be read.
type Unreadable struct {
	// Version is the object's version token: TakeoverUnreadable replaces
	// exactly this object and no other.
	Version string `json:"version"`
	Size    int    `json:"size"`
	SHA256  string `json:"sha256"`
	// Why is what is wrong with it: "is not valid JSON (...)", ...
	Why string `json:"why"`
}

// UnreadableError is what Read returns for a claim object it cannot read;
// it matches ErrUnreadable. Its message names the one way out.
type UnreadableError struct{ Unreadable }

func (e *UnreadableError) Error() string {
	return fmt.Sprintf("%v: %s (version %s, %d bytes) %s; the store stays claimed. Once you have made sure no retention operation is running on this store, clear it with `%s`",
		ErrUnreadable, Key, e.Version, e.Size, e.Why, e.TakeoverCommand("STORE"))
}

func (e *UnreadableError) Is(target error) bool { return target == ErrUnreadable }

// TakeoverCommand is the command that clears this object from store. The
// version is given as --unreadable=V: a localfs version token may begin
// with '-'.
func (u *Unreadable) TakeoverCommand(store string) string {
	return fmt.Sprintf("retain claim takeover %s --unreadable=%s --reason R --owner-dead-attested WHY", storage.ShellWord(store), storage.ShellWord(u.Version))
}

// HeldError carries the holder's payload (nil if it could not be read).
type HeldError struct {
	Holder  *Payload
	Version string
	Err     error // why the holder could not be read, if it could not
	// Dead is set when the holder ran on this host and provably is no
	// longer running: the proof, as a takeover would record it. Then the
	// message names the command that continues instead of "try again".
	Dead string
}

func (e *HeldError) Error() string {
	if e.Holder == nil {
		if errors.Is(e.Err, ErrUnreadable) {
			return fmt.Sprintf("%s: %v", ErrHeld, e.Err)
		}
		return fmt.Sprintf("%s: %s exists but could not be read (%v); it stays held: see `retain claim status STORE`, and try again", ErrHeld, Key, e.Err)
	}
	h := e.Holder
	if e.Dead != "" {
		return fmt.Sprintf("%s by pid %d on %s, which is no longer running (%s): it was %s (%s, operation %s) since %s. %s",
			ErrHeld, h.PID, h.Host, e.Dead, h.Actor, h.Action, h.OperationID, h.CreatedAt.Format(time.RFC3339), ContinueHint("STORE", h))
	}
	return fmt.Sprintf("%s by %s (%s, operation %s) on %s pid %d since %s",
		ErrHeld, h.Actor, h.Action, h.OperationID, h.Host, h.PID, h.CreatedAt.Format(time.RFC3339))
}

// DeadHere returns the proof that the holder of p ran on this host
// (host as in Request.Host, "" for os.Hostname) and is no longer running,
// or "" when it may be alive, ran elsewhere or cannot be checked. It is
// the proof Takeover accepts without an attestation.
func DeadHere(host string, p *Payload) string {
	if host == "" {
		host = hostOf(Request{})
	}
	if p == nil || p.Host != host {
		return ""
	}
	proof, err := Proof(host, p, "")
	if err != nil {
		return ""
	}
	return proof
}

// NextCommands are the commands, in order, that continue after the dead
// holder p of store's claim. A cleanup run's own resume takes the claim
// over on the same proof, so it comes first; a run that died before it
// journaled a plan deleted nothing and has nothing to resume, and then,
// as for any other operation, the takeover frees the store.
func NextCommands(store string, p *Payload) []string {
	takeover := fmt.Sprintf("retain claim takeover %s --token %s --reason %s",
		storage.ShellWord(store), storage.ShellWord(p.OwnerToken), storage.ShellWord(fmt.Sprintf("pid %d on %s is no longer running", p.PID, p.Host)))
	if isCleanup(p.Action) {
		return []string{fmt.Sprintf("retain cleanup run %s --resume --confirm-write-outage", storage.ShellWord(store)), takeover}
	}
	return []string{takeover}
}

func isCleanup(action string) bool { return action == "cleanup" || action == "cleanup-resume" }

// ContinueHint says in a sentence what NextCommands are for.
func ContinueHint(store string, p *Payload) string {
	next := NextCommands(store, p)
	if isCleanup(p.Action) {
		return fmt.Sprintf("Finish the run with `%s`; if that answers that there is nothing to resume (the run stopped before it planned anything, so it deleted nothing), free the store with `%s` and run cleanup again", next[0], next[1])
	}
	return fmt.Sprintf("Free the store with `%s`, then run the command again", next[0])
}

func (e *HeldError) Is(target error) bool { return target == ErrHeld }
func (e *HeldError) Unwrap() error        { return e.Err }

// LostError says why a handle no longer owns the claim.
type LostError struct {
	Why string
	Err error
}

func (e *LostError) Error() string {
	s := ErrLost.Error() + ": " + e.Why
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *LostError) Is(target error) bool { return target == ErrLost }
func (e *LostError) Unwrap() error        { return e.Err }

// Request describes the operation that wants the claim.
type Request struct {
	OperationID string // generated if empty
	Action      string // "cleanup", "checkpoint-create", ...
	Actor       string // who: user, service; defaults to $USER@host
	// Host names this host; defaults to os.Hostname(). Set it where the
	// kernel's host name is not a stable identity (some containers).
	Host string
	// Scope is how far the store's writers reach: ScopeHost is enough for
	// a file:// store, a shared bucket needs ScopeGlobal. Zero means global.
	Scope storage.Scope
	// Logger receives takeover records; nil means none.
	Logger Logger
}

// Logger is what a takeover record is written to: log/slog's *slog.Logger
// and hclog's Logger both are one, so this module needs neither.
type Logger interface {
	Warn(msg string, args ...any)
}

// ScopeFor returns the scope a claim on loc needs.
func ScopeFor(loc storage.Location) storage.Scope {
	if loc.Scheme == "file" {
		return storage.ScopeHost
	}
	return storage.ScopeGlobal
}

// Handle is a held claim.
type Handle struct {
	store   *storage.Store
	payload Payload
	version string
	scope   storage.Scope

	checks checks // Verify's shared reads (verify.go)
}

// Payload returns what was written.
func (h *Handle) Payload() Payload { return h.payload }

// Version is the claim object's version token as created.
func (h *Handle) Version() string { return h.version }

// Token is the owner token.
func (h *Handle) Token() string { return h.payload.OwnerToken }

func newToken() string {
	var b [16]byte // 128 bits
	if _, err := rand.Read(b[:]); err != nil {
		panic("claim: no randomness: " + err.Error())
	}
	return hex.EncodeToString(b[:])
}

func hostOf(req Request) string {
	if req.Host != "" {
		return req.Host
	}
	host, _ := os.Hostname()
	return host
}

func self(req Request) Payload {
	host := hostOf(req)
	actor := req.Actor
	if actor == "" {
		actor = os.Getenv("USER")
		if actor == "" {
			actor = "unknown"
		}
		actor += "@" + host
	}
	op := req.OperationID
	if op == "" {
		op = "op-" + newToken()[:12]
	}
	start, _ := processStart(os.Getpid())
	return Payload{
		Format:       Format,
		OperationID:  op,
		Action:       req.Action,
		Actor:        actor,
		CreatedAt:    time.Now().UTC().Truncate(time.Millisecond),
		OwnerToken:   newToken(),
		Host:         host,
		PID:          os.Getpid(),
		BootID:       bootID(),
		ProcessStart: start,
	}
}

func scopeOf(req Request) storage.Scope {
	if req.Scope == storage.ScopeNone {
		return storage.ScopeGlobal
	}
	return req.Scope
}

// Acquire creates the claim. If it exists the error is a *HeldError
// (errors.Is(err, ErrHeld)) with the holder's payload. An adapter whose
// create-if-absent does not reach req.Scope is refused with
// storage.ErrUnsupported naming the capability.
func Acquire(ctx context.Context, s *storage.Store, req Request) (*Handle, error) {
	scope := scopeOf(req)
	if err := s.Require(storage.FeatureCreateIfAbsent, scope); err != nil {
		return nil, fmt.Errorf("retention claim needs create-if-absent reaching every writer of this store: %w", err)
	}
	p := self(req)
	h, err := create(ctx, s, p, scope)
	var held *HeldError
	if errors.As(err, &held) && held.Holder != nil {
		if lost, ok := unresolved.LoadAndDelete(held.Holder.OwnerToken); ok {
			// A claim this process created earlier whose response was lost
			// and could not be read back then: its token is secret to this
			// process, so it is ours. Rewrite it (compare-and-swap on the
			// version found) to name this operation — a crash from here on
			// must leave a claim that names the run it belongs to, which is
			// what resume and takeover look for.
			if body, merr := json.MarshalIndent(p, "", "  "); merr == nil {
				info, rerr := s.PutBytes(ctx, Key, body, storage.PutOptions{Mode: storage.PutReplaceIfVersion, IfVersion: held.Version})
				if rerr == nil {
					return &Handle{store: s, payload: p, version: info.Version, scope: scope}, nil
				}
				if !errors.Is(rerr, storage.ErrUnsupported) {
					unresolved.Store(held.Holder.OwnerToken, lost)
					return nil, fmt.Errorf("adopting this process's own unconfirmed claim: %w", rerr)
				}
			}
			// No replace-if-version: adopt it as it is.
			return &Handle{store: s, payload: *held.Holder, version: held.Version, scope: lost.(storage.Scope)}, nil
		}
		// A holder that provably died on this host is named as such,
		// with the way on: otherwise "held" reads as "wait".
		held.Dead = DeadHere(p.Host, held.Holder)
	}
	return h, err
}

// unresolved holds the tokens of claims this process created with a lost
// response that no read-back could confirm: such a claim may exist under
// a token only this process knows. Without this, a long-running process
// (the daemon) would find its own orphan forever held, and no takeover
// could prove its owner dead while it runs.
var unresolved sync.Map // owner token -> storage.Scope

// readBackDelays space the read-backs of a create with a lost response:
// reads have no effect, so they may be repeated until one answers.
var readBackDelays = []time.Duration{0, 50 * time.Millisecond, 200 * time.Millisecond, time.Second}

func create(ctx context.Context, s *storage.Store, p Payload, scope storage.Scope) (*Handle, error) {
	body, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return nil, err
	}
	info, err := s.PutBytes(ctx, Key, body, storage.PutOptions{Mode: storage.PutCreateIfAbsent})
	if errors.Is(err, storage.ErrAlreadyExists) {
		holder, hinfo, rerr := Read(ctx, s)
		if rerr != nil {
			return nil, &HeldError{Err: rerr}
		}
		if holder.OwnerToken == p.OwnerToken {
			// Our own create, applied by a retry below us.
			return &Handle{store: s, payload: p, version: hinfo.Version, scope: scope}, nil
		}
		return nil, &HeldError{Holder: holder, Version: hinfo.Version}
	}
	if err != nil {
		// The outcome is unknown (a lost response): the token is fresh and
		// secret, so a claim carrying it can only be this create's. Reading
		// it back decides; without an answer the token is remembered as
		// possibly ours (Acquire adopts it when it finds it).
		for _, d := range readBackDelays {
			if d > 0 {
				select {
				case <-ctx.Done():
					unresolved.Store(p.OwnerToken, scope)
					return nil, err
				case <-time.After(d):
				}
			}
			holder, hinfo, rerr := Read(ctx, s)
			switch {
			case rerr == nil && holder.OwnerToken == p.OwnerToken:
				return &Handle{store: s, payload: p, version: hinfo.Version, scope: scope}, nil
			case rerr == nil:
				return nil, &HeldError{Holder: holder, Version: hinfo.Version} // answered: held by another
			case errors.Is(rerr, storage.ErrNotFound):
				return nil, err // answered: the create did not land
			}
		}
		unresolved.Store(p.OwnerToken, scope)
		return nil, err
	}
	return &Handle{store: s, payload: p, version: info.Version, scope: scope}, nil
}

// Read returns the current claim, or storage.ErrNotFound if the store is free.
// A claim object that cannot be read is an *UnreadableError (ErrUnreadable)
// carrying its version: it stays held until TakeoverUnreadable clears it.
func Read(ctx context.Context, s *storage.Store) (*Payload, storage.Info, error) {
	b, info, err := s.ReadAll(ctx, Key)
	if err != nil {
		return nil, storage.Info{}, err
	}
	unreadable := func(format string, args ...any) (*Payload, storage.Info, error) {
		sum := sha256.Sum256(b)
		return nil, info, &UnreadableError{Unreadable{Version: info.Version, Size: len(b), SHA256: hex.EncodeToString(sum[:]), Why: fmt.Sprintf(format, args...)}}
	}
	var p Payload
	dec := json.NewDecoder(bytes.NewReader(b))
	switch err := dec.Decode(&p); {
	case len(bytes.TrimSpace(b)) == 0:
		return unreadable("is empty")
	case err != nil:
		return unreadable("is not a valid claim (%v)", err)
	case p.Format != Format:
		return unreadable("has format %d, and this build reads format %d (if a newer retain wrote it, use that build)", p.Format, Format)
	case p.OwnerToken == "":
		return unreadable("names no owner token")
	}
	return &p, info, nil
}

// Verify proves the handle still owns the claim: the object exists with the
// version it was created with and carries the handle's token. Every
// protected phase of an operation calls it before acting. Calls made
// while a check is on the wire share the next one (verify.go): each
// caller's answer comes from a read that started after it called.
func (h *Handle) Verify(ctx context.Context) error {
	return h.checks.do(ctx, h.verifyOnce)
}

// verifyOnce reads the claim object once and judges it.
func (h *Handle) verifyOnce(ctx context.Context) error {
	p, info, err := Read(ctx, h.store)
	switch {
	case errors.Is(err, storage.ErrNotFound):
		return &LostError{Why: "the claim object is gone (released or taken over)"}
	case err != nil:
		return &LostError{Why: "the claim object cannot be read", Err: err}
	case p.OwnerToken != h.payload.OwnerToken:
		return &LostError{Why: fmt.Sprintf("the claim now belongs to %s (operation %s)", p.Actor, p.OperationID)}
	case info.Version != h.version:
		return &LostError{Why: "the claim object was rewritten since it was acquired"}
	}
	return nil
}

// Release gives the claim up. With conditional delete reaching the claim's
// scope it is one delete-if-version of exactly the acquired object. Without
// it, Release re-reads, checks token and version, then deletes: a takeover
// landing between that check and the delete would be deleted too. That
// window is why a takeover needs proof that the old owner cannot resume.
// A mismatched token or version is refused with *LostError and the claim
// object is left as it is.
func (h *Handle) Release(ctx context.Context) error {
	if h.store.Require(storage.FeatureDeleteIfVersion, h.scope) == nil {
		err := h.store.Delete(ctx, Key, storage.DeleteOptions{IfVersion: h.version})
		switch {
		case errors.Is(err, storage.ErrPreconditionFailed):
			return &LostError{Why: "release refused: the claim object is not the one this handle created", Err: err}
		case errors.Is(err, storage.ErrNotFound):
			return &LostError{Why: "release: the claim object is already gone", Err: err}
		}
		return err
	}
	if err := h.Verify(ctx); err != nil {
		return err
	}
	return h.store.Delete(ctx, Key, storage.DeleteOptions{})
}

// TakeoverRequest asks to replace a stale claim.
type TakeoverRequest struct {
	Request
	// Token must equal the stale claim's owner token exactly.
	Token string
	// Reason is recorded in the new claim and the log.
	Reason string
	// OwnerDeadAttested is the operator's statement that the owner on
	// another host cannot resume. Only consulted when the tool cannot
	// prove it itself.
	OwnerDeadAttested string
}

// Proof explains why the holder of p cannot resume, or returns ErrNoProof.
// On the same host the tool proves it: the boot id changed, the pid is not
// running, or the pid now belongs to a process with another start time.
// For an owner on another host only an attestation counts. host is the
// caller's host identity.
func Proof(host string, p *Payload, attested string) (string, error) {
	if p.Host == host && p.BootID != "" {
		if boot := bootID(); boot != "" && boot != p.BootID {
			return fmt.Sprintf("host %s rebooted (boot id %s, claim made under %s)", host, boot, p.BootID), nil
		}
		alive, start, err := processAlive(p.PID)
		switch {
		case err != nil:
			return "", fmt.Errorf("%w: cannot inspect pid %d on this host: %v", ErrNoProof, p.PID, err)
		case !alive:
			return fmt.Sprintf("pid %d is not running on %s", p.PID, host), nil
		case p.ProcessStart != "" && start != p.ProcessStart:
			return fmt.Sprintf("pid %d on %s is a different process (started at tick %s, owner started at %s)", p.PID, host, start, p.ProcessStart), nil
		}
		return "", fmt.Errorf("%w: pid %d on %s is still running (the same process that made the claim)", ErrNoProof, p.PID, host)
	}
	if attested != "" {
		return "attested by operator: " + attested, nil
	}
	if p.Host == host {
		return "", fmt.Errorf("%w: the claim carries no boot id to check against; pass --owner-dead-attested with a reason", ErrNoProof)
	}
	return "", fmt.Errorf("%w: the owner ran on host %s, which this tool cannot inspect; pass --owner-dead-attested with a reason once you have made sure it is dead", ErrNoProof, p.Host)
}

// Takeover replaces the stale claim whose token is req.Token with a new
// claim owned by the caller. It needs the exact token and proof that the
// owner cannot resume; without either it refuses and the claim is
// untouched. It is conditional: delete-if-version of exactly the stale
// object, then create-if-absent.
func Takeover(ctx context.Context, s *storage.Store, req TakeoverRequest) (*Handle, error) {
	scope := scopeOf(req.Request)
	if err := s.Require(storage.FeatureCreateIfAbsent, scope); err != nil {
		return nil, fmt.Errorf("retention claim needs create-if-absent reaching every writer of this store: %w", err)
	}
	if req.Reason == "" {
		return nil, storage.Errorf("takeover", Key, storage.ErrInvalidArgument, "a takeover needs a reason")
	}
	stale, info, err := Read(ctx, s)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, storage.Errorf("takeover", Key, storage.ErrNotFound, "the store is not claimed: nothing to take over; acquire it instead")
	}
	if err != nil {
		return nil, err
	}
	if req.Token != stale.OwnerToken {
		return nil, storage.Errorf("takeover", Key, storage.ErrPreconditionFailed, "the token given is not the claim's owner token: see `retain claim status`; the claim is untouched")
	}
	proof, err := Proof(hostOf(req.Request), stale, req.OwnerDeadAttested)
	if err != nil {
		return nil, err
	}
	rec := &TakeoverRecord{
		PreviousOperationID: stale.OperationID, PreviousHost: stale.Host, PreviousPID: stale.PID,
		PreviousCreatedAt: stale.CreatedAt, Reason: req.Reason, Proof: proof, Attested: req.OwnerDeadAttested,
	}
	return replace(ctx, s, req.Request, scope, info.Version, rec)
}

// UnreadableTakeoverRequest asks to clear a claim object that cannot be
// read (Read returns *UnreadableError).
type UnreadableTakeoverRequest struct {
	Request
	// Version must equal the unreadable object's version token exactly
	// (UnreadableError.Version, `retain claim status`): only that object is
	// replaced, never one written since.
	Version string
	// Reason is recorded in the new claim and the log.
	Reason string
	// Attested is the operator's statement that no retention operation is
	// running on the store: nothing in an unreadable object names an owner
	// the tool could check, so it is the only proof there is. Required.
	Attested string
}

// TakeoverUnreadable replaces the unreadable claim object whose version is
// req.Version with a new claim owned by the caller, recording the
// attestation and what the cleared object was (version, size, digest, what
// was wrong). It refuses, leaving the object untouched, without a reason,
// an attestation or the exact version, and when the claim is readable
// (take it over with its token) or free. Like Takeover it is conditional:
// delete-if-version of exactly that object, then create-if-absent.
func TakeoverUnreadable(ctx context.Context, s *storage.Store, req UnreadableTakeoverRequest) (*Handle, error) {
	scope := scopeOf(req.Request)
	if err := s.Require(storage.FeatureCreateIfAbsent, scope); err != nil {
		return nil, fmt.Errorf("retention claim needs create-if-absent reaching every writer of this store: %w", err)
	}
	switch {
	case req.Reason == "":
		return nil, storage.Errorf("takeover", Key, storage.ErrInvalidArgument, "a takeover needs a reason")
	case req.Attested == "":
		return nil, storage.Errorf("takeover", Key, storage.ErrInvalidArgument, "clearing an unreadable claim needs your attestation that no retention operation is running on this store (--owner-dead-attested WHY): nothing in the object names an owner retain could check")
	case req.Version == "":
		return nil, storage.Errorf("takeover", Key, storage.ErrInvalidArgument, "clearing an unreadable claim needs its version token, as `retain claim status STORE` prints it")
	}
	p, _, err := Read(ctx, s)
	var ue *UnreadableError
	switch {
	case errors.Is(err, storage.ErrNotFound):
		return nil, storage.Errorf("takeover", Key, storage.ErrNotFound, "the store is not claimed: nothing to take over; acquire it instead")
	case err == nil:
		return nil, storage.Errorf("takeover", Key, storage.ErrPreconditionFailed, "the claim is readable (held by %s, %s, operation %s): take it over with its token (`retain claim status STORE` shows it), not --unreadable; the claim is untouched", p.Actor, p.Action, p.OperationID)
	case !errors.As(err, &ue):
		return nil, err
	case ue.Version != req.Version:
		return nil, storage.Errorf("takeover", Key, storage.ErrPreconditionFailed, "the unreadable claim object is version %s, not %s: it was rewritten; run `retain claim status STORE` again; the claim is untouched", storage.ShellWord(ue.Version), storage.Quote(req.Version))
	}
	u := ue.Unreadable
	rec := &TakeoverRecord{Reason: req.Reason, Attested: req.Attested, Unreadable: &u,
		Proof: fmt.Sprintf("attested by operator: %s (the claim object %s, so nothing named an owner to check)", req.Attested, u.Why)}
	return replace(ctx, s, req.Request, scope, u.Version, rec)
}

// replace deletes exactly the claim object at version (conditionally), then
// creates the caller's claim carrying rec, and logs rec.
func replace(ctx context.Context, s *storage.Store, req Request, scope storage.Scope, version string, rec *TakeoverRecord) (*Handle, error) {
	var err error
	if s.Require(storage.FeatureDeleteIfVersion, scope) == nil {
		err = s.Delete(ctx, Key, storage.DeleteOptions{IfVersion: version})
	} else {
		// Without conditional delete: re-check right before an
		// unconditional delete; the window is the one Release documents.
		var again storage.Info
		again, err = s.Stat(ctx, Key)
		if err == nil && again.Version != version {
			err = storage.Errorf("takeover", Key, storage.ErrPreconditionFailed, "the claim changed while taking it over")
		}
		if err == nil {
			err = s.Delete(ctx, Key, storage.DeleteOptions{})
		}
	}
	if err != nil {
		return nil, fmt.Errorf("takeover: removing the stale claim: %w", err)
	}
	p := self(req)
	p.Takeover = rec
	h, err := create(ctx, s, p, scope)
	if err != nil {
		return nil, fmt.Errorf("takeover: the stale claim was removed but another owner claimed the store first: %w", err)
	}
	if req.Logger != nil {
		kv := []any{"store_key", Key, "previous_operation", rec.PreviousOperationID,
			"previous_host", rec.PreviousHost, "previous_pid", rec.PreviousPID, "reason", rec.Reason, "proof", rec.Proof,
			"new_operation", p.OperationID, "actor", p.Actor}
		if u := rec.Unreadable; u != nil {
			kv = append(kv, "unreadable_version", u.Version, "unreadable_size", u.Size, "unreadable_sha256", u.SHA256, "attested", rec.Attested)
		}
		req.Logger.Warn("retention claim taken over", kv...)
	}
	return h, nil
}
