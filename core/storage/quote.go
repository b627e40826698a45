package storage

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxEcho is how much of a caller's string an error message repeats, in
// bytes. A pasted 20 KB name must not turn into a 20 KB message; its first
// bytes and its length are enough to recognise it.
const MaxEcho = 64

// Quote renders s for a message as %q does; a string longer than MaxEcho
// bytes is cut to its first MaxEcho bytes (never inside a UTF-8 sequence)
// and followed by its length: "aaaa…"… (20000 bytes). Use it wherever an
// error repeats a name, key or URI the user gave.
func Quote(s string) string {
	if len(s) <= MaxEcho {
		return strconv.Quote(s)
	}
	cut := MaxEcho
	if utf8.ValidString(s) {
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
	}
	return fmt.Sprintf("%s… (%d bytes)", strconv.Quote(s[:cut]), len(s))
}

// quoteKey renders an *Error's key. A key that is refused (invalid
// argument) or longer than any store accepts is the caller's input and is
// capped like Quote; any other key names a real object, at most
// MaxKeyBytes long, and is shown in full because that is what an operator
// needs to find it.
func quoteKey(kind Kind, key string) string {
	if kind == ErrInvalidArgument || len(key) > MaxKeyBytes {
		return Quote(key)
	}
	return strconv.Quote(key)
}

// ShellWord renders s as one word of a POSIX shell command line, quoted
// only when it needs it, so a command a message names can be pasted as
// it is (paths with spaces, S3 ETags with double quotes).
func ShellWord(s string) string {
	if s == "" {
		return "''"
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("/._-+:@%,=", r)) {
			return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
		}
	}
	return s
}
