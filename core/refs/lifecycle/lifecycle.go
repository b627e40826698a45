// Package lifecycle is the record retain keeps in a Lance branch file's
// metadata: the branch's state (creating → ready → deleting), the
// operation and process running a transition, and the snapshot it was
// forked from. Branch operations (package branch) write it, and tags and
// checkpoints read it to refuse work on a branch being deleted.
package lifecycle

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/retain-dev/retain/core/lance"
	"github.com/retain-dev/retain/core/refs/refmeta"
	"github.com/retain-dev/retain/core/storage"
)

// Invalid is the state shown for a branch whose lifecycle keys cannot be
// read (ErrMalformed); such a branch is listed only with All. It is never
// written.
const Invalid State = "invalid"

// A branch's lifecycle lives in its own Lance branch file, in the metadata
// map, under reserved keys (refmeta.ReservedPrefix). A branch file without them —
// one plain Lance wrote — is a ready branch retain has not adopted.
const (
	// StateKey is the lifecycle state: creating, ready or deleting.
	StateKey = refmeta.ReservedPrefix + "state"
	// OpKey is the id of the retain operation that wrote the state.
	OpKey = refmeta.ReservedPrefix + "op"
	// OwnerKey names the process running a creating or deleting
	// transition: "<host>/<pid>/<boot id>/<process start>", the identity
	// core/storage/claim records for the claim's owner. It is dropped once the
	// branch is ready.
	OwnerKey = refmeta.ReservedPrefix + "owner"
	// SourceKey is the snapshot the branch was forked from,
	// "<branch>@<version>" ("main@3").
	SourceKey = refmeta.ReservedPrefix + "source"
	// AtKey is when the state was written (RFC 3339, UTC).
	AtKey = refmeta.ReservedPrefix + "at"
)

// State is a branch's lifecycle state.
type State string

const (
	// Creating: retain is adopting the branch (recording its source
	// and metadata); not listed by default.
	Creating State = "creating"
	// Ready: a branch for everyone. A file without lifecycle keys
	// counts as ready.
	Ready State = "ready"
	// Deleting: retain decided to delete the branch; not listed by
	// default. It only moves on to gone (or back to ready when the delete,
	// resumed, is refused).
	Deleting State = "deleting"
)

// ErrMalformed: the reserved lifecycle keys of a branch file cannot
// be read (an unknown state, a transition without owner, ...). retain
// neither lists such a branch by default nor changes it; fix or remove the
// keys. Kind storage.ErrPreconditionFailed.
var ErrMalformed = errors.New("malformed retain lifecycle in a Lance branch file")

// Owner is the process that runs a transition, as core/storage/claim
// identifies the claim's owner: a later process proves it dead with
// claim.Proof before it takes the transition over.
type Owner struct {
	Host         string `json:"host"`
	PID          int    `json:"pid"`
	BootID       string `json:"boot_id,omitempty"`
	ProcessStart string `json:"process_start,omitempty"`
}

// String is the value of OwnerKey.
func (o Owner) String() string {
	return fmt.Sprintf("%s/%d/%s/%s", o.Host, o.PID, o.BootID, o.ProcessStart)
}

// ParseOwner reads a OwnerKey value. The host may contain '/';
// the last three fields may not.
func ParseOwner(s string) (Owner, error) {
	parts := strings.Split(s, "/")
	if len(parts) < 4 {
		return Owner{}, fmt.Errorf("owner %q: want <host>/<pid>/<boot id>/<process start>", s)
	}
	n := len(parts)
	host := strings.Join(parts[:n-3], "/")
	pid, err := strconv.Atoi(parts[n-3])
	if err != nil || pid <= 0 || host == "" {
		return Owner{}, fmt.Errorf("owner %q: want <host>/<pid>/<boot id>/<process start> with a positive pid", s)
	}
	return Owner{Host: host, PID: pid, BootID: parts[n-2], ProcessStart: parts[n-1]}, nil
}

// Source is the snapshot a branch was forked from. Branch is "" for
// main.
type Source struct {
	Branch  string
	Version uint64
}

// String is "<branch>@<version>", "main" for main.
func (s Source) String() string {
	b := s.Branch
	if b == "" {
		b = "main"
	}
	return fmt.Sprintf("%s@%d", b, s.Version)
}

// ParseFrom reads "<branch>[@<version>]" (--from): hasVersion is
// false when the version is left out. "main" is main.
func ParseFrom(s string) (src Source, hasVersion bool, err error) {
	name, ver, at := strings.Cut(s, "@")
	bad := func(format string, args ...any) (Source, bool, error) {
		return Source{}, false, storage.Errorf("branch-source", s, storage.ErrInvalidArgument, format, args...)
	}
	if at {
		v, err := strconv.ParseUint(ver, 10, 64)
		if err != nil || ver == "" || ver[0] == '+' {
			return bad("want <branch>@<version> with a version number, got %q", s)
		}
		src.Version, hasVersion = v, true
	}
	if name != "main" {
		if err := lance.ValidateBranchName(name); err != nil {
			return bad("source branch: %v", err)
		}
		src.Branch = name
	}
	return src, hasVersion, nil
}

// Record is what the reserved keys of a branch file say.
type Record struct {
	State State `json:"state"`
	// Managed: the file carries retain's lifecycle keys; false for a
	// branch only Lance wrote (State is then ready).
	Managed bool `json:"managed"`
	// Op is the operation that wrote the state.
	Op string `json:"operation,omitempty"`
	// Owner runs the transition (creating, deleting).
	Owner *Owner `json:"owner,omitempty"`
	// Source is the recorded fork point, if any.
	Source string    `json:"source,omitempty"`
	At     time.Time `json:"at,omitzero"`
}

// Parse reads the lifecycle from a branch file's metadata.
// Without StateKey the branch is ready and unmanaged (no other
// reserved key may appear then); creating and deleting need an operation
// and an owner. Anything else is ErrMalformed.
func Parse(meta map[string]string) (Record, error) {
	bad := func(format string, args ...any) (Record, error) {
		return Record{}, fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
	}
	st, ok := meta[StateKey]
	if !ok {
		for k := range meta {
			if strings.HasPrefix(k, refmeta.ReservedPrefix) {
				return bad("%q without %q", k, StateKey)
			}
		}
		return Record{State: Ready}, nil
	}
	l := Record{State: State(st), Managed: true, Op: meta[OpKey], Source: meta[SourceKey]}
	switch l.State {
	case Creating, Ready, Deleting:
	default:
		return bad("%s %q: want creating, ready or deleting", StateKey, st)
	}
	if o, ok := meta[OwnerKey]; ok {
		owner, err := ParseOwner(o)
		if err != nil {
			return bad("%s: %v", OwnerKey, err)
		}
		l.Owner = &owner
	}
	if l.State != Ready && (l.Op == "" || l.Owner == nil) {
		return bad("state %s without %s and %s", l.State, OpKey, OwnerKey)
	}
	if l.Source != "" {
		if _, has, err := ParseFrom(l.Source); err != nil || !has {
			return bad("%s %q: want <branch>@<version>", SourceKey, l.Source)
		}
	}
	if at, ok := meta[AtKey]; ok {
		t, err := time.Parse(time.RFC3339Nano, at)
		if err != nil {
			return bad("%s %q: want an RFC 3339 time", AtKey, at)
		}
		l.At = t
	}
	for k := range meta {
		switch k {
		case StateKey, OpKey, OwnerKey, SourceKey, AtKey, refmeta.MetaExpires:
		default:
			if strings.HasPrefix(k, refmeta.ReservedPrefix) {
				return bad("unknown reserved key %q", k)
			}
		}
	}
	return l, nil
}

// Meta returns the metadata map of a branch file: the user metadata
// user (reserved keys in it are dropped, except the expiry) with the lifecycle state, its
// operation, owner (nil for none), source and the time at.
func Meta(user map[string]string, state State, op string, owner *Owner, source Source, at time.Time) map[string]string {
	m := refmeta.User(user)
	// The expiry is the branch's, not the lifecycle's: it survives every
	// transition (a delete marked and rolled back keeps it).
	if v, ok := user[refmeta.MetaExpires]; ok {
		m[refmeta.MetaExpires] = v
	}
	m[StateKey] = string(state)
	m[OpKey] = op
	m[SourceKey] = source.String()
	m[AtKey] = at.UTC().Format(time.RFC3339Nano)
	if owner != nil {
		m[OwnerKey] = owner.String()
	}
	return m
}
