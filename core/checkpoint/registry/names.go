package registry

import (
	"fmt"
	"strings"

	"github.com/retain-dev/retain/core/storage"
)

// MaxNameBytes is the longest checkpoint name (v1 rules), in bytes.
const MaxNameBytes = 128

// Reserved name prefixes: "__" is retain's (like __leases/), "ogcp_" is the
// prefix of retain's own pin tags.
const (
	ReservedPrefixInternal = "__"
	ReservedPrefixPin      = "ogcp_"
)

// NameRule identifies which rule of the v1 checkpoint name rules a name
// breaks. The values are stable: CLIs may print them and tests match them.
type NameRule string

const (
	RuleEmpty        NameRule = "empty"           // a name has 1 to 128 bytes
	RuleTooLong      NameRule = "too-long"        // more than 128 bytes
	RuleCharacter    NameRule = "character"       // a byte outside [A-Za-z0-9._-] and '/'
	RuleSlashEdge    NameRule = "slash-edge"      // a leading or trailing '/'
	RuleEmptySegment NameRule = "empty-segment"   // "//"
	RuleDotDot       NameRule = "dot-dot"         // ".." anywhere
	RuleLockSuffix   NameRule = "lock-suffix"     // a segment ending in ".lock"
	RuleReserved     NameRule = "reserved-prefix" // begins with "__" or "ogcp_"
)

// NameError says which name broke which rule. It matches ErrInvalidName and
// storage.ErrInvalidArgument.
type NameError struct {
	Name   string
	Rule   NameRule
	Detail string
}

func (e *NameError) Error() string {
	return fmt.Sprintf("invalid checkpoint name %s: %s (rule %s)", storage.Quote(e.Name), e.Detail, e.Rule)
}

// Unwrap matches ErrInvalidName and storage.ErrInvalidArgument.
func (e *NameError) Unwrap() []error { return []error{ErrInvalidName, storage.ErrInvalidArgument} }

// nameByte is the v1 character rule for one byte within a segment.
func nameByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-'
}

// ValidateName checks a checkpoint name against the v1 rules:
//
//   - 1 to 128 bytes, ASCII only;
//   - '/'-separated segments, each non-empty and made of [A-Za-z0-9._-];
//   - no leading or trailing '/';
//   - no ".." anywhere;
//   - no segment ending in ".lock";
//   - not beginning with the reserved prefixes "__" or "ogcp_".
//
// Names are case-sensitive and never rewritten: what is accepted is stored
// and compared byte for byte, and a refused name is never "fixed" into an
// accepted one. The error is a *NameError naming the first rule broken, in
// the order listed.
func ValidateName(name string) error {
	bad := func(rule NameRule, format string, args ...any) error {
		return &NameError{Name: name, Rule: rule, Detail: fmt.Sprintf(format, args...)}
	}
	switch {
	case name == "":
		return bad(RuleEmpty, "a checkpoint name must not be empty")
	case len(name) > MaxNameBytes:
		return bad(RuleTooLong, "a checkpoint name is at most %d bytes, this one is %d", MaxNameBytes, len(name))
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; c != '/' && !nameByte(c) {
			what := fmt.Sprintf("%q", c)
			if c >= 0x80 {
				what = fmt.Sprintf("non-ASCII byte %#02x", c)
			} else if c < 0x20 || c == 0x7f {
				what = fmt.Sprintf("control byte %#02x", c)
			}
			return bad(RuleCharacter, "%s at byte %d: only ASCII letters, digits, '.', '_', '-' and '/' between segments are allowed", what, i)
		}
	}
	switch {
	case name[0] == '/' || name[len(name)-1] == '/':
		return bad(RuleSlashEdge, "a checkpoint name must not begin or end with '/'")
	case strings.Contains(name, "//"):
		return bad(RuleEmptySegment, "a checkpoint name must not contain an empty segment (\"//\")")
	case strings.Contains(name, ".."):
		return bad(RuleDotDot, "a checkpoint name must not contain \"..\"")
	}
	for _, seg := range strings.Split(name, "/") {
		if strings.HasSuffix(seg, ".lock") {
			return bad(RuleLockSuffix, "segment %q ends in \".lock\"", seg)
		}
	}
	for _, p := range []string{ReservedPrefixInternal, ReservedPrefixPin} {
		if strings.HasPrefix(name, p) {
			return bad(RuleReserved, "the prefix %q is reserved for retain", p)
		}
	}
	return nil
}
