package registry

import (
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/retain-dev/retain/core/storage"
)

func TestValidateNameAccepts(t *testing.T) {
	for _, name := range []string{
		"a", "A", "0", "nightly", "Nightly", "release-1.2.3", "team/x", "team/sub/x_y-z.1",
		"a.b", "a_", "_a", "-a", "a-", ".a", "a.", "a/.b", "x/.", // '.' alone is a valid segment per v1
		"ogcp", "ogcp-x", "OGCP_x", "Ogcp_x", "x/ogcp_y", "_", "_x", "x__y", "a/__b",
		"a.lock.b", "a.LOCK", "lock", ".lock.x", "a/locks",
		strings.Repeat("a", MaxNameBytes),
		strings.Repeat("ab/", 42) + "ab", // 128 bytes with slashes
	} {
		if err := ValidateName(name); err != nil {
			t.Errorf("ValidateName(%q) = %v, want accepted", name, err)
		}
	}
}

func TestValidateNameRefuses(t *testing.T) {
	for name, rule := range map[string]NameRule{
		"":                                  RuleEmpty,
		strings.Repeat("a", MaxNameBytes+1): RuleTooLong,
		strings.Repeat("é", 100):            RuleTooLong, // bytes, not characters
		"a b":                               RuleCharacter,
		"a\x00b":                            RuleCharacter,
		"a\tb":                              RuleCharacter,
		"a\x7f":                             RuleCharacter,
		"café":                              RuleCharacter,
		"日本":                                RuleCharacter,
		`a\b`:                               RuleCharacter,
		"a:b":                               RuleCharacter,
		"a@{b":                              RuleCharacter,
		"a*":                                RuleCharacter,
		"a~1":                               RuleCharacter,
		"a+b":                               RuleCharacter,
		"a%2Fb":                             RuleCharacter,
		"/a":                                RuleSlashEdge,
		"a/":                                RuleSlashEdge,
		"/":                                 RuleSlashEdge,
		"a//b":                              RuleEmptySegment,
		"..":                                RuleDotDot,
		"a..b":                              RuleDotDot,
		"a/../b":                            RuleDotDot,
		"a/..":                              RuleDotDot,
		"...":                               RuleDotDot,
		"a.lock":                            RuleLockSuffix,
		"x/a.lock/y":                        RuleLockSuffix,
		".lock":                             RuleLockSuffix,
		"a/b.lock":                          RuleLockSuffix,
		"__x":                               RuleReserved,
		"__":                                RuleReserved,
		"__leases":                          RuleReserved,
		"ogcp_":                             RuleReserved,
		"ogcp_v1_x":                         RuleReserved,
		"ogcp_/x":                           RuleReserved,
	} {
		err := ValidateName(name)
		var ne *NameError
		if !errors.As(err, &ne) {
			t.Errorf("ValidateName(%q) = %v, want a *NameError with rule %s", name, err, rule)
			continue
		}
		if ne.Rule != rule {
			t.Errorf("ValidateName(%q): rule %s (%v), want %s", name, ne.Rule, err, rule)
		}
		if !errors.Is(err, ErrInvalidName) || !errors.Is(err, storage.ErrInvalidArgument) || storage.KindOf(err) != storage.ErrInvalidArgument {
			t.Errorf("ValidateName(%q) = %v: does not match ErrInvalidName and core.ErrInvalidArgument", name, err)
		}
		if !strings.Contains(err.Error(), string(rule)) {
			t.Errorf("ValidateName(%q): message %q does not name the rule %s", name, err, rule)
		}
	}
}

// Names are never rewritten: the validator is a pure predicate, case
// matters, and nothing trims or folds.
func TestNamesAreCaseSensitiveAndNotRewritten(t *testing.T) {
	s := newDraft(t)
	a := reserveT(t, s, "Nightly")
	b := reserveT(t, s, "nightly")
	if a.ID == b.ID {
		t.Fatal("Nightly and nightly got the same checkpoint")
	}
	if _, err := s.ByName("NIGHTLY"); !errors.Is(err, ErrCheckpointNotFound) {
		t.Fatalf("NIGHTLY: %v", err)
	}
	for _, bad := range []string{" nightly", "nightly ", "nightly\n"} {
		if err := ValidateName(bad); err == nil {
			t.Errorf("%q accepted: whitespace must be refused, never trimmed", bad)
		}
	}
}

// oracle restates the v1 rules independently of ValidateName.
var oracleSegment = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)

func oracleValid(name string) bool {
	if len(name) < 1 || len(name) > 128 {
		return false
	}
	if strings.HasPrefix(name, "/") || strings.HasSuffix(name, "/") || strings.Contains(name, "..") {
		return false
	}
	if strings.HasPrefix(name, "__") || strings.HasPrefix(name, "ogcp_") {
		return false
	}
	for _, seg := range strings.Split(name, "/") {
		if !oracleSegment.MatchString(seg) || strings.HasSuffix(seg, ".lock") {
			return false
		}
	}
	return true
}

func FuzzValidateName(f *testing.F) {
	for _, s := range []string{"a", "team/x", "a.lock", "__x", "ogcp_x", "a//b", "/a", "a/", "a..b", "é", "a b",
		strings.Repeat("x", 129), "x/.", "a/b.lock/c", "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		err := ValidateName(name)
		if want := oracleValid(name); (err == nil) != want {
			t.Fatalf("ValidateName(%q) = %v, oracle says valid=%v", name, err, want)
		}
		if err != nil {
			var ne *NameError
			if !errors.As(err, &ne) || ne.Rule == "" || !errors.Is(err, ErrInvalidName) {
				t.Fatalf("ValidateName(%q) = %v: not a *NameError with a rule", name, err)
			}
			return
		}
		// Every accepted name is ASCII, 1-128 bytes, and obeys each rule.
		for i := 0; i < len(name); i++ {
			if name[i] >= 0x80 {
				t.Fatalf("accepted non-ASCII %q", name)
			}
		}
		if strings.HasSuffix(name, ".lock") || strings.Contains(name, ".lock/") {
			t.Fatalf("accepted a .lock segment: %q", name)
		}
	})
}
