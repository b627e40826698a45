package retention

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/retain-dev/retain/core/duration"
	"github.com/retain-dev/retain/core/internal/glob"
	"github.com/retain-dev/retain/core/lance"
	"github.com/retain-dev/retain/core/storage"
)

// Rule is the window of the tables or branches its pattern matches: it
// replaces the policy's OlderThan and KeepLast for them, whole (a rule
// with only OlderThan keeps no last versions). Patterns are globs
// (internal/glob: `*` matches any run, '/' included; `?` one character).
//
// Which window a version is planned with: the first branch rule matching
// its branch ("main" for main), else the first table rule matching its
// table (by folder, "scratch_a.lance", or by name, "scratch_a"), else the
// policy's own. The branch is the narrower reference, so its rule wins.
// Every decision a rule makes names it ("window: keep-last 2 (table rule
// scratch_*)").
type Rule struct {
	Pattern   string
	OlderThan time.Duration
	KeepLast  int
	// cutoffAt, set from a reviewed plan, is the rule's cut-off itself.
	cutoffAt *time.Time
}

// RuleEcho is a rule as a plan records it, its cut-off fixed.
type RuleEcho struct {
	Pattern   string     `json:"pattern"`
	OlderThan string     `json:"older_than,omitempty"`
	Cutoff    *time.Time `json:"cutoff,omitempty"`
	KeepLast  int        `json:"keep_last,omitempty"`
}

// String is the rule's window ("older-than=168h0m0s,keep-last=2"), as
// ParseRule reads it after the pattern.
func (r RuleEcho) String() string {
	var parts []string
	if r.OlderThan != "" {
		parts = append(parts, "older-than="+r.OlderThan)
	}
	if r.KeepLast > 0 {
		parts = append(parts, "keep-last="+strconv.Itoa(r.KeepLast))
	}
	return strings.Join(parts, ",")
}

// ParseRule reads a rule as `--table-window` and `--branch-window` take it:
// "PATTERN:older-than=7d", "PATTERN:keep-last=2" or both, comma-separated.
// The pattern is everything before the last ':'.
func ParseRule(s string) (Rule, error) {
	i := strings.LastIndexByte(s, ':')
	if i < 0 {
		return Rule{}, fmt.Errorf("window rule %q: write PATTERN:older-than=D and/or PATTERN:keep-last=N (e.g. 'session/*:older-than=7d')", s)
	}
	r := Rule{Pattern: s[:i]}
	for _, kv := range strings.Split(s[i+1:], ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		switch {
		case !ok:
			return r, fmt.Errorf("window rule %q: %q is not key=value: write older-than=D or keep-last=N", s, kv)
		case k == "older-than":
			d, err := duration.Parse(v)
			if err != nil {
				return r, fmt.Errorf("window rule %q: older-than %q: %v", s, v, err)
			}
			r.OlderThan = d
		case k == "keep-last":
			n, err := strconv.Atoi(v)
			if err != nil {
				return r, fmt.Errorf("window rule %q: keep-last %q is not a whole number", s, v)
			}
			r.KeepLast = n
		default:
			return r, fmt.Errorf("window rule %q: unknown key %q: the keys are older-than and keep-last", s, k)
		}
	}
	return r, checkRule("window rule", r)
}

// checkRule refuses a rule that cannot be honoured: a bad pattern, a
// negative window, or one that says nothing to keep.
func checkRule(what string, r Rule) error {
	if _, err := glob.Compile(r.Pattern); err != nil {
		return storage.Errorf("cleanup-policy", "", storage.ErrInvalidArgument, "%s %q: %v", what, r.Pattern, err)
	}
	if r.OlderThan < 0 || r.KeepLast < 0 {
		return storage.Errorf("cleanup-policy", "", storage.ErrInvalidArgument, "%s %q: older-than %s / keep-last %d: neither may be negative", what, r.Pattern, r.OlderThan, r.KeepLast)
	}
	if r.OlderThan == 0 && r.KeepLast == 0 {
		return storage.Errorf("cleanup-policy", "", storage.ErrInvalidArgument, "%s %q sets neither older-than nor keep-last: say which versions it keeps (keep-last 1 keeps only the latest)", what, r.Pattern)
	}
	return nil
}

// checkRules checks every rule of p.
func (p Policy) checkRules() error {
	for _, r := range p.Tables {
		if err := checkRule("table rule", r); err != nil {
			return err
		}
	}
	for _, r := range p.Branches {
		if err := checkRule("branch rule", r); err != nil {
			return err
		}
	}
	return nil
}

// shortestWindow is the shortest older-than of the policy and its rules,
// and whether some window (the policy's or a rule's) has none: an online
// run needs every window to keep recent versions.
func (p Policy) shortestWindow() (d time.Duration, what string) {
	d, what = p.OlderThan, "the window"
	for _, r := range p.Tables {
		if r.OlderThan < d {
			d, what = r.OlderThan, "table rule "+r.Pattern
		}
	}
	for _, r := range p.Branches {
		if r.OlderThan < d {
			d, what = r.OlderThan, "branch rule "+r.Pattern
		}
	}
	return d, what
}

// echoRules fixes each rule's cut-off at now.
func echoRules(rs []Rule, now time.Time) []RuleEcho {
	var out []RuleEcho
	for _, r := range rs {
		e := RuleEcho{Pattern: r.Pattern, KeepLast: r.KeepLast}
		if r.OlderThan > 0 {
			c := now.Add(-r.OlderThan)
			if r.cutoffAt != nil {
				c = *r.cutoffAt
			}
			e.OlderThan, e.Cutoff = r.OlderThan.String(), &c
		}
		out = append(out, e)
	}
	return out
}

// rulesFrom reads rules back from a plan's echo, their cut-offs fixed.
func rulesFrom(es []RuleEcho) ([]Rule, error) {
	var out []Rule
	for _, e := range es {
		r := Rule{Pattern: e.Pattern, KeepLast: e.KeepLast}
		if e.OlderThan != "" {
			d, err := duration.Parse(e.OlderThan)
			if err != nil {
				return nil, fmt.Errorf("%w: rule %q: its older-than %q: %v", ErrPlanInvalid, e.Pattern, e.OlderThan, err)
			}
			if e.Cutoff == nil {
				return nil, fmt.Errorf("%w: rule %q has an older-than window but no cut-off: make a new plan with `retain cleanup preview --out`", ErrPlanInvalid, e.Pattern)
			}
			c := e.Cutoff.UTC()
			r.OlderThan, r.cutoffAt = d, &c
		}
		out = append(out, r)
	}
	return out, nil
}

// tableRule is the first table rule matching table ("scratch_a.lance"),
// by folder or by name. A pattern that does not compile is an error, never
// a rule passed over: the table's window would be another than written.
func tableRule(es []RuleEcho, table string) (RuleEcho, bool, error) {
	name := strings.TrimSuffix(table, ".lance")
	for _, e := range es {
		g, err := glob.Compile(e.Pattern)
		if err != nil {
			return RuleEcho{}, false, storage.Errorf("cleanup-policy", "", storage.ErrInvalidArgument, "table rule %q: %v", e.Pattern, err)
		}
		if g.Match(table) || g.Match(name) {
			return e, true, nil
		}
	}
	return RuleEcho{}, false, nil
}

// branchWindows are the Lance layer's windows for table: the branch rules
// in order, then the table's rule for every other branch.
func branchWindows(echo PolicyEcho, table string) ([]lance.BranchWindow, error) {
	var out []lance.BranchWindow
	for _, e := range echo.Branches {
		out = append(out, window(e, e.Pattern, "branch rule "+e.Pattern))
	}
	e, ok, err := tableRule(echo.Tables, table)
	if err != nil {
		return nil, err
	}
	if ok {
		out = append(out, window(e, "*", "table rule "+e.Pattern))
	}
	return out, nil
}

func window(e RuleEcho, pattern, rule string) lance.BranchWindow {
	w := lance.BranchWindow{Pattern: pattern, Rule: rule, KeepLast: e.KeepLast}
	if e.Cutoff != nil {
		w.OlderThan = *e.Cutoff
	}
	return w
}

// rulesText describes, for a boundary or an audit line, the rules that
// decided a version of the table's plan ("branch rule session/*:
// older-than=168h0m0s (cut-off ...)"): not every rule of the policy, so
// the text grows with what applied, not with the rules written.
func rulesText(echo PolicyEcho, table string, lp *lance.Plan) []string {
	used := map[string]bool{}
	if lp != nil {
		for _, v := range lp.Versions {
			used[v.Rule] = true
		}
	}
	var out []string
	line := func(kind string, e RuleEcho) string {
		s := kind + " " + e.Pattern + ": " + e.String()
		if e.Cutoff != nil {
			s += " (cut-off " + e.Cutoff.Format(time.RFC3339) + ")"
		}
		return s
	}
	if e, ok, _ := tableRule(echo.Tables, table); ok && used["table rule "+e.Pattern] {
		out = append(out, line("table rule", e))
	}
	for _, e := range echo.Branches {
		if used["branch rule "+e.Pattern] {
			out = append(out, line("branch rule", e))
		}
	}
	return out
}
