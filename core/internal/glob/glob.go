// Package glob matches reference names (checkpoints, branches, tables)
// against the patterns prune and the daemon's per-reference rules take.
// `*` matches any run of characters, '/' included, so "hourly/*" and
// "session/*" mean what they say and "*" means every name; `?` matches one
// character; everything else is literal. There are no classes or escapes:
// reference names do not need them, and a pattern that means less than
// the operator thinks would keep or remove the wrong refs.
package glob

import (
	"fmt"
	"regexp"
	"strings"
)

// Pattern is a compiled pattern.
type Pattern struct {
	src string
	re  *regexp.Regexp
}

// Compile checks and compiles p.
func Compile(p string) (*Pattern, error) {
	if p == "" {
		return nil, fmt.Errorf("an empty pattern matches nothing: write a name, or * for every name")
	}
	var b strings.Builder
	b.WriteString(`^`)
	for _, r := range p {
		switch r {
		case '*':
			b.WriteString(`.*`)
		case '?':
			b.WriteString(`.`)
		default:
			b.WriteString(regexp.QuoteMeta(string(r)))
		}
	}
	b.WriteString(`$`)
	return &Pattern{src: p, re: regexp.MustCompile(b.String())}, nil
}

// Match reports whether name matches.
func (p *Pattern) Match(name string) bool { return p.re.MatchString(name) }

// String is the pattern as written.
func (p *Pattern) String() string { return p.src }

// Set is patterns ORed: a name matches if any pattern does.
type Set []*Pattern

// CompileSet compiles every pattern.
func CompileSet(ps []string) (Set, error) {
	var out Set
	for _, p := range ps {
		c, err := Compile(p)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// Match returns the first pattern that matches name, or nil.
func (s Set) Match(name string) *Pattern {
	for _, p := range s {
		if p.Match(name) {
			return p
		}
	}
	return nil
}
