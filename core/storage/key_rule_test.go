package storage

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

// keyRuleSplit is keyRule as it was before its one-pass form: the reference
// its answers must equal, rule and offset alike.
func keyRuleSplit(key string, prefix bool) string {
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
	for i, r := range key {
		switch {
		case r == 0:
			return fmt.Sprintf("NUL byte at offset %d", i)
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0):
			return fmt.Sprintf("control character %U at offset %d", r, i)
		case r == '\\':
			return fmt.Sprintf("backslash at offset %d: use '/' to separate segments", i)
		}
	}
	segs := strings.Split(key, "/")
	if prefix && strings.HasSuffix(key, "/") {
		segs = segs[:len(segs)-1]
	}
	for _, s := range segs {
		switch s {
		case "":
			return "empty segment ('//' or a trailing '/')"
		case ".", "..":
			return fmt.Sprintf("%q segment is not allowed", s)
		}
	}
	return ""
}

func TestKeyRuleMatchesSplitForm(t *testing.T) {
	keys := []string{"a", "a/", "a//", "a//b", "/a", ".", "..", "./a", "a/.", "a/..", "a/.../b", "a/.b", "é/ü",
		"a\x00b", "a\nb", "a\u0085b", "é\u0085", `a\b`, "é\\", "a\x7fb", "\xff", "a/\xc3", "é//", "_versions/1.manifest",
		strings.Repeat("k", MaxKeyBytes), strings.Repeat("k", MaxKeyBytes+1)}
	// Random keys over the characters that matter, so every rule meets
	// every other at every position.
	alphabet := []string{"a", "b", "/", ".", "\\", "\x00", "\n", "\x7f", "é", "\u0085", "\u00a0", "\xff", "_"}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		var b strings.Builder
		for range rng.IntN(8) + 1 {
			b.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		keys = append(keys, b.String())
	}
	for _, k := range keys {
		for _, prefix := range []bool{false, true} {
			if got, want := keyRule(k, prefix), keyRuleSplit(k, prefix); got != want {
				t.Fatalf("keyRule(%q, %v) = %q, want %q", k, prefix, got, want)
			}
		}
	}
}

// TestValidateKeyAllocatesNothing: a valid key costs no allocation (every
// key of a batch delete through a plugin is checked on both sides).
func TestValidateKeyAllocatesNothing(t *testing.T) {
	key := "db/t.lance/_versions/18446744073709550613.manifest"
	if n := testing.AllocsPerRun(100, func() {
		if ValidateKey("delete", key) != nil || ValidatePrefix("list", "db/t.lance/") != nil {
			t.Fatal("valid key refused")
		}
	}); n != 0 {
		t.Fatalf("ValidateKey of a valid key: %v allocations, want 0", n)
	}
}

func BenchmarkValidateKey(b *testing.B) {
	key := "db/t.lance/_versions/18446744073709550613.manifest"
	for b.Loop() {
		_ = ValidateKey("delete", key)
	}
}
