package lance

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/retain-dev/retain/core/storage"
)

// ErrInvalidName: a tag or branch name Lance's own rules refuse. Every
// *NameError matches it and storage.ErrInvalidArgument.
var ErrInvalidName = errors.New("invalid Lance ref name")

// NameError names the ref kind, the name and the rule it breaks.
type NameError struct {
	Ref  string // "tag" or "branch"
	Name string
	Rule string
}

func (e *NameError) Error() string {
	return fmt.Sprintf("invalid Lance %s name %s: %s", e.Ref, storage.Quote(e.Name), e.Rule)
}

// Unwrap lets errors.Is match both ErrInvalidName and storage.ErrInvalidArgument.
func (e *NameError) Unwrap() []error { return []error{ErrInvalidName, storage.ErrInvalidArgument} }

// refRune mirrors Lance's per-character rule: Rust's char::is_alphanumeric
// (the Unicode Alphabetic property — letters, letter numbers and
// Other_Alphabetic marks such as U+0345 or U+24B6 — or a numeric category
// Nd/Nl/No), '.', '-' or '_'. Go's tables may trail Rust's Unicode version:
// a character assigned since is refused here, never wrongly accepted.
func refRune(r rune) bool {
	switch {
	case r < utf8.RuneSelf:
		return 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '.' || r == '-' || r == '_'
	case r == utf8.RuneError:
		return false // also what an invalid UTF-8 byte decodes to
	}
	return unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.Is(unicode.Other_Alphabetic, r)
}

// badRune describes the first character refRune refuses, with its byte
// offset.
func badRune(s string) (string, int, bool) {
	for i, r := range s {
		if refRune(r) {
			continue
		}
		if r == utf8.RuneError {
			if _, n := utf8.DecodeRuneInString(s[i:]); n == 1 {
				return fmt.Sprintf("invalid UTF-8 byte %#02x", s[i]), i, true
			}
		}
		switch {
		case r < 0x20 || r == 0x7f || !unicode.IsPrint(r):
			return fmt.Sprintf("%U", r), i, true
		case r >= utf8.RuneSelf:
			return fmt.Sprintf("%q (%U)", r, r), i, true
		}
		return fmt.Sprintf("%q", r), i, true
	}
	return "", 0, false
}

// ValidateTagName checks name against Lance 12's check_valid_tag: not
// empty; only letters, digits (Rust's char::is_alphanumeric), '.', '-' and
// '_'; no leading or trailing '.'; not ending in ".lock" (case-sensitive);
// no "..". An accepted name is a single path segment: it cannot contain '/'
// and is never "." or "..". Verified against real Lance's tags.create.
//
// Lance accepts non-ASCII tag names but then cannot list them (it
// percent-encodes the file name when writing and again when reading it
// back), so CreateTag additionally refuses them; see tagFileName.
func ValidateTagName(name string) error {
	bad := func(rule string, args ...any) error {
		return &NameError{Ref: "tag", Name: name, Rule: fmt.Sprintf(rule, args...)}
	}
	if name == "" {
		return bad("a tag name must not be empty")
	}
	if r, i, ok := badRune(name); ok {
		return bad("character %s at byte %d: only letters, digits, '.', '-' and '_' are allowed", r, i)
	}
	switch {
	case strings.HasPrefix(name, "."):
		return bad("a tag name must not begin with '.'")
	case strings.HasSuffix(name, "."):
		return bad("a tag name must not end with '.'")
	case strings.HasSuffix(name, ".lock"):
		return bad("a tag name must not end with \".lock\"")
	case strings.Contains(name, ".."):
		return bad("a tag name must not contain \"..\"")
	}
	return nil
}

// ValidateBranchName checks name against what Lance 12 accepts when it
// creates a branch (check_valid_branch plus its path parsing, verified
// against real Lance's branches.create): not empty; '/'-separated segments,
// none empty (no leading, trailing or doubled '/'); no ".." and no '\'
// anywhere; each segment only letters, digits, '.', '-' and '_' and not
// "."; not ending in ".lock"; not exactly "main" ("Main" and "main/x" are
// accepted, as Lance accepts them).
func ValidateBranchName(name string) error {
	bad := func(rule string, args ...any) error {
		return &NameError{Ref: "branch", Name: name, Rule: fmt.Sprintf(rule, args...)}
	}
	switch {
	case name == "":
		return bad("a branch name must not be empty")
	case strings.HasPrefix(name, "/") || strings.HasSuffix(name, "/"):
		return bad("a branch name must not begin or end with '/'")
	case strings.Contains(name, "//"):
		return bad("a branch name must not contain an empty segment (\"//\")")
	case strings.Contains(name, ".."):
		return bad("a branch name must not contain \"..\"")
	case strings.Contains(name, `\`):
		return bad("a branch name must not contain '\\'")
	}
	for _, seg := range strings.Split(name, "/") {
		if r, i, ok := badRune(seg); ok {
			return bad("character %s in segment %s at byte %d: only letters, digits, '.', '-' and '_' are allowed", r, storage.Quote(seg), i)
		}
		if seg == "." {
			// Lance's path parser refuses a "." segment under tree/.
			return bad("a branch name must not have a \".\" segment")
		}
	}
	switch {
	case strings.HasSuffix(name, ".lock"):
		return bad("a branch name must not end with \".lock\"")
	case name == "main":
		return bad("\"main\" is the main branch and cannot be created as a branch")
	}
	return nil
}

// pathPartEncode encodes one segment the way Lance's object_store
// (Path::child, PathPart) does: bytes in its INVALID set — ASCII controls,
// '/', '\\', '{', '^', '}', '%', '`', ']', '"', '>', '[', '~', '<', '#', '|',
// '*', '?' — and every non-ASCII byte become %XX (upper-case hex); "." and
// ".." become %2E and %2E%2E.
func pathPartEncode(s string) string {
	switch s {
	case ".":
		return "%2E"
	case "..":
		return "%2E%2E"
	}
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c >= 0x7f || strings.IndexByte(`/\{^}%`+"`"+`]">[~<#|*?`, c) >= 0 {
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// pathPartDecode reverses pathPartEncode strictly: every '%' must start a
// two-digit hex escape and the result must be UTF-8.
func pathPartDecode(s string) (string, bool) {
	if !strings.Contains(s, "%") {
		return s, utf8.ValidString(s)
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+2 >= len(s) {
			return "", false
		}
		hi, ok1 := unhex(s[i+1])
		lo, ok2 := unhex(s[i+2])
		if !ok1 || !ok2 {
			return "", false
		}
		b.WriteByte(hi<<4 | lo)
		i += 2
	}
	out := b.String()
	return out, utf8.ValidString(out)
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

const (
	refsDir      = "_refs"
	tagsDir      = "_refs/tags"
	branchesDir  = "_refs/branches"
	treeDir      = "tree"
	refExt       = ".json"
	maxRefsList  = 1_000_000 // a bound on one listing of _refs/tags or _refs/branches
	refReadConns = 8         // concurrent reads of tag or branch files
)

// tagFileName is the file name Lance reads a tag from: Lance writes
// pathPartEncode(name)+".json" but lists it back as the raw file name and
// encodes that again, so only a name that encodes to itself survives
// Lance's own listing. Names that do not — every non-ASCII name, although
// Lance's validator accepts them — are refused for writing here.
func tagFileName(name string) (string, error) {
	if err := ValidateTagName(name); err != nil {
		return "", err
	}
	if enc := pathPartEncode(name); enc != name {
		return "", &NameError{Ref: "tag", Name: name, Rule: fmt.Sprintf(
			"Lance 12 accepts it but stores it as %q and then cannot list the dataset's tags: use ASCII letters, digits, '.', '-' and '_'", enc+refExt)}
	}
	return name + refExt, nil
}

// branchFileName is the file name of a branch's ref: Lance encodes the
// name as one path segment ('/' becomes %2F, non-ASCII bytes %XX) and
// decodes it when listing.
func branchFileName(name string) (string, error) {
	if err := ValidateBranchName(name); err != nil {
		return "", err
	}
	return pathPartEncode(name) + refExt, nil
}

// branchNameFromFile returns the branch a file under _refs/branches/ stands
// for, or why Lance could not read it back (it re-encodes the decoded name
// to find the file, so the encoding must round-trip exactly).
func branchNameFromFile(file string) (string, string) {
	enc, ok := strings.CutSuffix(file, refExt)
	if !ok {
		return "", "not a .json file"
	}
	name, ok := pathPartDecode(enc)
	if !ok {
		return "", "the file name is not a valid percent-encoding of a UTF-8 branch name"
	}
	if err := ValidateBranchName(name); err != nil {
		return name, err.Error()
	}
	if pathPartEncode(name)+refExt != file {
		return name, fmt.Sprintf("Lance would look for branch %q under %q, not this file", name, pathPartEncode(name)+refExt)
	}
	return name, ""
}

// tagNameFromFile is branchNameFromFile for tags, which Lance does not
// decode.
func tagNameFromFile(file string) (string, string) {
	name, ok := strings.CutSuffix(file, refExt)
	if !ok {
		return "", "not a .json file"
	}
	if err := ValidateTagName(name); err != nil {
		return name, err.Error()
	}
	if pathPartEncode(name) != name {
		return name, fmt.Sprintf("Lance would read tag %q from %q, not this file, and its tag listing fails on it", name, pathPartEncode(name)+refExt)
	}
	return name, ""
}
