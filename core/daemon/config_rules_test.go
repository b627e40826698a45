package daemon

import (
	"strings"
	"testing"
	"time"

	"github.com/retain-dev/retain/core/retention"
)

// TestConfigWindowRules: per-table and per-branch windows parse in the
// order written (the first match wins), and reach the cleanup policy.
func TestConfigWindowRules(t *testing.T) {
	text := `retention:
  older_than: 30d
  branches:
    "session/*": {older_than: 7d}
    "main": {older_than: 90d, keep_last: 5}
  tables:
    "scratch_*": {older_than: 2h, keep_last: 2}
`
	c, err := ParseConfig("d.yaml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	p := c.Policy()
	want := retention.Policy{OlderThan: 30 * 24 * time.Hour,
		Branches: []retention.Rule{{Pattern: "session/*", OlderThan: 7 * 24 * time.Hour}, {Pattern: "main", OlderThan: 90 * 24 * time.Hour, KeepLast: 5}},
		Tables:   []retention.Rule{{Pattern: "scratch_*", OlderThan: 2 * time.Hour, KeepLast: 2}}}
	if p.OlderThan != want.OlderThan || len(p.Branches) != 2 || p.Branches[0] != want.Branches[0] || p.Branches[1] != want.Branches[1] ||
		len(p.Tables) != 1 || p.Tables[0] != want.Tables[0] {
		t.Fatalf("policy %+v, want %+v", p, want)
	}
	// The window the daemon logs and records names the rules too.
	w := (&Daemon{Config: c}).window()
	if !strings.Contains(w, "branch rule session/*: older than 168h0m0s") || !strings.Contains(w, "table rule scratch_*: older than 2h0m0s, keep last 2") {
		t.Errorf("window %q", w)
	}
}

// TestConfigWindowRulesRefused: each refusal names the line of the rule.
func TestConfigWindowRulesRefused(t *testing.T) {
	for _, c := range []struct{ text, want string }{
		{"retention:\n  older_than: 30d\n  branches:\n    \"session/*\": {keep_last: 2}\n", "d.yaml:4: retention.branches \"session/*\": retention runs online"},
		{"retention:\n  older_than: 30d\n  tables:\n    \"x\": {}\n", "d.yaml:4: retention.tables \"x\" sets neither"},
		{"retention:\n  older_than: 30d\n  tables:\n    \"x\": {older_than: 2d}\n    \"x\": {older_than: 3d}\n", "d.yaml:5: retention.tables: pattern \"x\" again"},
		{"retention:\n  older_than: 30d\n  tables:\n    \"x\": {keep_lst: 2}\n", "d.yaml:4: unknown key \"keep_lst\" (did you mean \"keep_last\"?)"},
		{"retention:\n  tables:\n    \"x\": {older_than: 2d}\n", "d.yaml:3: retention.tables \"x\" replaces the window"},
		{"retention:\n  older_than: 30d\n  branches: [a]\n", "d.yaml:3: retention.branches must be a mapping"},
		{"retention:\n  older_than: 30d\n  branches:\n    \"\": {older_than: 2d}\n", "d.yaml:4: retention.branches \"\": an empty pattern"},
	} {
		_, err := ParseConfig("d.yaml", []byte(c.text))
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q...", c.text, err, c.want)
		}
	}
	// With the writers stopped a short or keep-last-only rule is fine.
	if _, err := ParseConfig("d.yaml", []byte("retention:\n  keep_last: 3\n  writers_stopped: true\n  branches:\n    \"session/*\": {keep_last: 1}\n")); err != nil {
		t.Error(err)
	}
}
