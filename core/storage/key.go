package storage

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxKeyBytes is the longest key the contract accepts, in bytes.
const MaxKeyBytes = 1024

// ValidateKey checks a key against the contract's rules: UTF-8, relative,
// '/'-separated, no empty, '.' or '..' segment, no NUL, control character or
// backslash, at most MaxKeyBytes. Both sides of the plugin boundary run it,
// so a key that passes here means the same object on every backend.
// The returned error is an *Error of kind ErrInvalidArgument naming the key
// and the rule it breaks.
func ValidateKey(op, key string) error {
	if rule := keyRule(key, false); rule != "" {
		return &Error{Op: op, Key: key, Kind: ErrInvalidArgument, Msg: "invalid key: " + rule}
	}
	return nil
}

// ValidatePrefix checks a listing prefix: the key rules, except that it may
// be empty and may end in '/'.
func ValidatePrefix(op, prefix string) error {
	if prefix == "" {
		return nil
	}
	if rule := keyRule(prefix, true); rule != "" {
		return &Error{Op: op, Key: prefix, Kind: ErrInvalidArgument, Msg: "invalid prefix: " + rule}
	}
	return nil
}

func keyRule(key string, prefix bool) string {
	switch {
	case key == "":
		return "a key must not be empty"
	case len(key) > MaxKeyBytes:
		return fmt.Sprintf("a key is at most %d bytes, this one is %d", MaxKeyBytes, len(key))
	case !utf8.ValidString(key):
		return "a key must be valid UTF-8"
	case strings.HasPrefix(key, "/"):
		return "a key is relative: remove the leading '/'"
	}
	// Every key crossing the plugin boundary is checked on both sides (a
	// batch delete's thousand keys several times over), so the common case
	// is one pass over the bytes with no allocation; a byte that may break
	// a rule goes to runeRule, which names it.
	for i := 0; i < len(key); i++ {
		if c := key[i]; c < 0x20 || c == 0x7f || c == '\\' || c >= utf8.RuneSelf {
			if rule := runeRule(key[i:], i); rule != "" {
				return rule
			}
			break
		}
	}
	segs := key
	if prefix && strings.HasSuffix(key, "/") {
		segs = key[:len(key)-1]
	}
	for {
		seg, rest, more := strings.Cut(segs, "/")
		switch seg {
		case "":
			return "empty segment ('//' or a trailing '/')"
		case ".", "..":
			return fmt.Sprintf("%q segment is not allowed", seg)
		}
		if !more {
			return ""
		}
		segs = rest
	}
}

// runeRule is the first NUL, control character or backslash in s, which
// starts at offset off of a key, as keyRule reports it; "" if none.
func runeRule(s string, off int) string {
	for i, r := range s {
		switch {
		case r == 0:
			return fmt.Sprintf("NUL byte at offset %d", off+i)
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0):
			return fmt.Sprintf("control character %U at offset %d", r, off+i)
		case r == '\\':
			return fmt.Sprintf("backslash at offset %d: use '/' to separate segments", off+i)
		}
	}
	return ""
}
