package storage

import (
	"fmt"
	"sort"
	"strings"
)

// Level says how an adapter provides a conditional operation.
type Level uint8

const (
	// LevelNone: not provided. The operation returns ErrUnsupported and
	// writes nothing; it never degrades to a plain write.
	LevelNone Level = iota
	// LevelGated: provided by the adapter holding a gate (a mutual exclusion)
	// around a compare and a write. Only as strong as the gate's Scope: a
	// writer outside that scope can slip between compare and write.
	LevelGated
	// LevelNative: the backend performs the condition atomically itself.
	LevelNative
)

func (l Level) String() string {
	switch l {
	case LevelNone:
		return "none"
	case LevelGated:
		return "gated"
	case LevelNative:
		return "native"
	}
	return fmt.Sprintf("level(%d)", uint8(l))
}

// MarshalText lets capability reports read "native" rather than 2.
func (l Level) MarshalText() ([]byte, error) { return []byte(l.String()), nil }

// UnmarshalText parses a level name.
func (l *Level) UnmarshalText(b []byte) error {
	for _, c := range []Level{LevelNone, LevelGated, LevelNative} {
		if c.String() == string(b) {
			*l = c
			return nil
		}
	}
	return fmt.Errorf("unknown capability level %q", b)
}

// Scope is how far a gate's exclusion reaches: which writers of the store it
// keeps out. Larger is wider.
type Scope uint8

const (
	ScopeNone    Scope = iota // no exclusion
	ScopeProcess              // goroutines of one adapter process
	ScopeHost                 // every process on one host
	ScopeGlobal               // every writer of the store, anywhere
)

func (s Scope) String() string {
	switch s {
	case ScopeNone:
		return "none"
	case ScopeProcess:
		return "process"
	case ScopeHost:
		return "host"
	case ScopeGlobal:
		return "global"
	}
	return fmt.Sprintf("scope(%d)", uint8(s))
}

// MarshalText lets capability reports read "host" rather than 2.
func (s Scope) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText parses a scope name.
func (s *Scope) UnmarshalText(b []byte) error {
	for _, c := range []Scope{ScopeNone, ScopeProcess, ScopeHost, ScopeGlobal} {
		if c.String() == string(b) {
			*s = c
			return nil
		}
	}
	return fmt.Errorf("unknown scope %q", b)
}

// Capability describes how one conditional operation is provided.
type Capability struct {
	Level Level `json:"level"`
	// Gate names the gate the adapter holds internally when Level is gated.
	Gate string `json:"gate,omitempty"`
	// Scope is how far the guarantee reaches: global for native, the
	// gate's scope for gated, none for none.
	Scope Scope `json:"scope"`
	// Reason says why, especially why a capability is none.
	Reason string `json:"reason,omitempty"`
}

// Reach is the scope of writers the capability protects against.
func (c Capability) Reach() Scope {
	switch c.Level {
	case LevelNative:
		return ScopeGlobal
	case LevelGated:
		return c.Scope
	}
	return ScopeNone
}

func (c Capability) String() string {
	switch c.Level {
	case LevelGated:
		return fmt.Sprintf("gated(%s, %s)", c.Gate, c.Scope)
	default:
		return c.Level.String()
	}
}

// GateSpec is one named mutual exclusion an adapter offers the core, for
// multi-object writes the backend cannot make atomic by itself.
type GateSpec struct {
	Name  string `json:"name"`
	Scope Scope  `json:"scope"`
	// Covers says, for people, what the gate is meant to serialise.
	Covers string `json:"covers,omitempty"`
}

// Limits an adapter declares. Zero means no declared limit.
type Limits struct {
	MaxObjectSize  int64 `json:"max_object_size,omitempty"`
	MaxDeleteBatch int   `json:"max_delete_batch,omitempty"`
	MaxListPage    int   `json:"max_list_page,omitempty"`
	// Parallelism is how many requests the backend serves well at once:
	// the default bound of a Store's limiter (small for a local disk,
	// 32–64 for an object store). 0 means DefaultParallelism.
	Parallelism int `json:"parallelism,omitempty"`
}

// Capabilities is what an adapter declares about itself. The conformance
// suite proves each declaration; the core refuses operations that need more.
type Capabilities struct {
	CreateIfAbsent   Capability `json:"create_if_absent"`
	ReplaceIfVersion Capability `json:"replace_if_version"`
	DeleteIfVersion  Capability `json:"delete_if_version"`
	Gates            []GateSpec `json:"gates,omitempty"`
	Limits           Limits     `json:"limits"`
	// OrderedList: List returns keys in byte order with working StartAfter.
	OrderedList bool `json:"ordered_list"`
	// ListAfterWrite: a completed write is visible to the next List.
	ListAfterWrite bool `json:"list_after_write"`
	// ListDelimiter: List honours ListOptions.Delimiter natively (one
	// request lists a level of up to a page of folders). Without it the
	// Store lists a level one folder per request.
	ListDelimiter bool `json:"list_delimiter,omitempty"`
	// UniqueVersions: every write yields a version token never seen before
	// for its key, even when the bytes are identical. Without it (S3 ETags
	// are content hashes) a compare-and-swap cannot tell a rewrite of the
	// same bytes from no write, so callers that need that make every body
	// unique (the retention claim carries a random token).
	UniqueVersions bool `json:"unique_versions"`
	// ReadOnly: the instance was opened read-only (Location.ReadOnly). It
	// declares every conditional capability none and no gates, and refuses
	// every write; the portable Store refuses writes before reaching it.
	ReadOnly bool `json:"read_only"`
	// Notes are free-form facts about this instance (filesystem type, ...).
	Notes []string `json:"notes,omitempty"`
}

// Gate returns the declared gate with that name.
func (c Capabilities) Gate(name string) (GateSpec, bool) {
	for _, g := range c.Gates {
		if g.Name == name {
			return g, true
		}
	}
	return GateSpec{}, false
}

// Feature names a conditional operation, for Require and for error messages.
type Feature string

const (
	FeatureCreateIfAbsent   Feature = "create-if-absent"
	FeatureReplaceIfVersion Feature = "replace-if-version"
	FeatureDeleteIfVersion  Feature = "delete-if-version"
)

// Of returns the capability declared for f.
func (c Capabilities) Of(f Feature) (Capability, bool) {
	switch f {
	case FeatureCreateIfAbsent:
		return c.CreateIfAbsent, true
	case FeatureReplaceIfVersion:
		return c.ReplaceIfVersion, true
	case FeatureDeleteIfVersion:
		return c.DeleteIfVersion, true
	}
	return Capability{}, false
}

// Require checks that feature f is provided with a reach of at least scope.
// The error is ErrUnsupported and names the feature, what is needed and what
// the adapter declares.
func (c Capabilities) Require(adapter string, f Feature, scope Scope) error {
	capab, ok := c.Of(f)
	if !ok {
		return Errorf("require", "", ErrInvalidArgument, "unknown feature %q", f)
	}
	if capab.Level == LevelNone || capab.Reach() < scope {
		msg := fmt.Sprintf("%s with %s reach is required, adapter %q declares %s", f, scope, adapter, capab)
		if capab.Reason != "" {
			msg += " (" + capab.Reason + ")"
		}
		return &Error{Op: "require", Kind: ErrUnsupported, Msg: msg}
	}
	return nil
}

// RequireGates checks that every named gate is declared with at least scope
// and returns the names in canonical (sorted, de-duplicated) order, the
// order in which they must be acquired.
func (c Capabilities) RequireGates(adapter string, scope Scope, names ...string) ([]string, error) {
	sorted := append([]string(nil), names...)
	sort.Strings(sorted)
	out := sorted[:0]
	var missing []string
	for i, n := range sorted {
		if i > 0 && n == sorted[i-1] {
			continue
		}
		out = append(out, n)
		g, ok := c.Gate(n)
		if !ok || g.Scope < scope {
			have := "not declared"
			if ok {
				have = "declared with " + g.Scope.String() + " scope"
			}
			missing = append(missing, fmt.Sprintf("gate %q (%s)", n, have))
		}
	}
	if len(missing) > 0 {
		return nil, &Error{Op: "require", Kind: ErrUnsupported, Msg: fmt.Sprintf(
			"adapter %q cannot provide %s scope for %s", adapter, scope, strings.Join(missing, ", "))}
	}
	return out, nil
}
