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

	"github.com/retain-dev/retain/lance"
	"github.com/retain-dev/retain/sdk/core"
)

// ReservedPrefix starts the metadata keys retain keeps for itself (the
// branch lifecycle). User metadata on tags and branches may not use it.
const ReservedPrefix = "retain."

// A branch's lifecycle lives in its own Lance branch file, in the metadata
// map, under reserved keys (ReservedPrefix). A branch file without them —
// one plain Lance wrote — is a ready branch retain has not adopted.
const (
	// BranchStateKey is the lifecycle state: creating, ready or deleting.
	BranchStateKey = ReservedPrefix + "state"
	// BranchOpKey is the id of the retain operation that wrote the state.
	BranchOpKey = ReservedPrefix + "op"
	// BranchOwnerKey names the process running a creating or deleting
	// transition: "<host>/<pid>/<boot id>/<process start>", the identity
	// sdk/claim records for the claim's owner. It is dropped once the
	// branch is ready.
	BranchOwnerKey = ReservedPrefix + "owner"
	// BranchSourceKey is the snapshot the branch was forked from,
	// "<branch>@<version>" ("main@3").
	BranchSourceKey = ReservedPrefix + "source"
	// BranchAtKey is when the state was written (RFC 3339, UTC).
	BranchAtKey = ReservedPrefix + "at"
)

// BranchState is a branch's lifecycle state.
type BranchState string

const (
	// BranchCreating: retain is adopting the branch (recording its source
	// and metadata); not listed by default.
	BranchCreating BranchState = "creating"
	// BranchReady: a branch for everyone. A file without lifecycle keys
	// counts as ready.
	BranchReady BranchState = "ready"
	// BranchDeleting: retain decided to delete the branch; not listed by
	// default. It only moves on to gone (or back to ready when the delete,
	// resumed, is refused).
	BranchDeleting BranchState = "deleting"
)

// ErrBranchLifecycle: the reserved lifecycle keys of a branch file cannot
// be read (an unknown state, a transition without owner, ...). retain
// neither lists such a branch by default nor changes it; fix or remove the
// keys. Kind core.ErrPreconditionFailed.
var ErrBranchLifecycle = errors.New("malformed retain lifecycle in a Lance branch file")

// BranchOwner is the process that runs a transition, as sdk/claim
// identifies the claim's owner: a later process proves it dead with
// claim.Proof before it takes the transition over.
type BranchOwner struct {
	Host         string `json:"host"`
	PID          int    `json:"pid"`
	BootID       string `json:"boot_id,omitempty"`
	ProcessStart string `json:"process_start,omitempty"`
}

// String is the value of BranchOwnerKey.
func (o BranchOwner) String() string {
	return fmt.Sprintf("%s/%d/%s/%s", o.Host, o.PID, o.BootID, o.ProcessStart)
}

// ParseBranchOwner reads a BranchOwnerKey value. The host may contain '/';
// the last three fields may not.
func ParseBranchOwner(s string) (BranchOwner, error) {
	parts := strings.Split(s, "/")
	if len(parts) < 4 {
		return BranchOwner{}, fmt.Errorf("owner %q: want <host>/<pid>/<boot id>/<process start>", s)
	}
	n := len(parts)
	host := strings.Join(parts[:n-3], "/")
	pid, err := strconv.Atoi(parts[n-3])
	if err != nil || pid <= 0 || host == "" {
		return BranchOwner{}, fmt.Errorf("owner %q: want <host>/<pid>/<boot id>/<process start> with a positive pid", s)
	}
	return BranchOwner{Host: host, PID: pid, BootID: parts[n-2], ProcessStart: parts[n-1]}, nil
}

// BranchSource is the snapshot a branch was forked from. Branch is "" for
// main.
type BranchSource struct {
	Branch  string
	Version uint64
}

// String is "<branch>@<version>", "main" for main.
func (s BranchSource) String() string {
	b := s.Branch
	if b == "" {
		b = "main"
	}
	return fmt.Sprintf("%s@%d", b, s.Version)
}

// ParseBranchFrom reads "<branch>[@<version>]" (--from): hasVersion is
// false when the version is left out. "main" is main.
func ParseBranchFrom(s string) (src BranchSource, hasVersion bool, err error) {
	name, ver, at := strings.Cut(s, "@")
	bad := func(format string, args ...any) (BranchSource, bool, error) {
		return BranchSource{}, false, core.Errorf("branch-source", s, core.ErrInvalidArgument, format, args...)
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

// BranchLifecycle is what the reserved keys of a branch file say.
type BranchLifecycle struct {
	State BranchState `json:"state"`
	// Managed: the file carries retain's lifecycle keys; false for a
	// branch only Lance wrote (State is then ready).
	Managed bool `json:"managed"`
	// Op is the operation that wrote the state.
	Op string `json:"operation,omitempty"`
	// Owner runs the transition (creating, deleting).
	Owner *BranchOwner `json:"owner,omitempty"`
	// Source is the recorded fork point, if any.
	Source string    `json:"source,omitempty"`
	At     time.Time `json:"at,omitzero"`
}

// ParseBranchLifecycle reads the lifecycle from a branch file's metadata.
// Without BranchStateKey the branch is ready and unmanaged (no other
// reserved key may appear then); creating and deleting need an operation
// and an owner. Anything else is ErrBranchLifecycle.
func ParseBranchLifecycle(meta map[string]string) (BranchLifecycle, error) {
	bad := func(format string, args ...any) (BranchLifecycle, error) {
		return BranchLifecycle{}, fmt.Errorf("%w: %s", ErrBranchLifecycle, fmt.Sprintf(format, args...))
	}
	st, ok := meta[BranchStateKey]
	if !ok {
		for k := range meta {
			if strings.HasPrefix(k, ReservedPrefix) {
				return bad("%q without %q", k, BranchStateKey)
			}
		}
		return BranchLifecycle{State: BranchReady}, nil
	}
	l := BranchLifecycle{State: BranchState(st), Managed: true, Op: meta[BranchOpKey], Source: meta[BranchSourceKey]}
	switch l.State {
	case BranchCreating, BranchReady, BranchDeleting:
	default:
		return bad("%s %q: want creating, ready or deleting", BranchStateKey, st)
	}
	if o, ok := meta[BranchOwnerKey]; ok {
		owner, err := ParseBranchOwner(o)
		if err != nil {
			return bad("%s: %v", BranchOwnerKey, err)
		}
		l.Owner = &owner
	}
	if l.State != BranchReady && (l.Op == "" || l.Owner == nil) {
		return bad("state %s without %s and %s", l.State, BranchOpKey, BranchOwnerKey)
	}
	if l.Source != "" {
		if _, has, err := ParseBranchFrom(l.Source); err != nil || !has {
			return bad("%s %q: want <branch>@<version>", BranchSourceKey, l.Source)
		}
	}
	if at, ok := meta[BranchAtKey]; ok {
		t, err := time.Parse(time.RFC3339Nano, at)
		if err != nil {
			return bad("%s %q: want an RFC 3339 time", BranchAtKey, at)
		}
		l.At = t
	}
	for k := range meta {
		switch k {
		case BranchStateKey, BranchOpKey, BranchOwnerKey, BranchSourceKey, BranchAtKey:
		default:
			if strings.HasPrefix(k, ReservedPrefix) {
				return bad("unknown reserved key %q", k)
			}
		}
	}
	return l, nil
}

// BranchMeta returns the metadata map of a branch file: the user metadata
// user (reserved keys in it are dropped) with the lifecycle state, its
// operation, owner (nil for none), source and the time at.
func BranchMeta(user map[string]string, state BranchState, op string, owner *BranchOwner, source BranchSource, at time.Time) map[string]string {
	m := UserMeta(user)
	m[BranchStateKey] = string(state)
	m[BranchOpKey] = op
	m[BranchSourceKey] = source.String()
	m[BranchAtKey] = at.UTC().Format(time.RFC3339Nano)
	if owner != nil {
		m[BranchOwnerKey] = owner.String()
	}
	return m
}

// UserMeta returns meta without the reserved keys.
func UserMeta(meta map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range meta {
		if !strings.HasPrefix(k, ReservedPrefix) {
			out[k] = v
		}
	}
	return out
}
