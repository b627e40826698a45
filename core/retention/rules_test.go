package retention

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/retain-dev/retain/core/storage"
)

// TestPreviewPerReferenceWindows: a table rule replaces the window for
// its tables, a branch rule for its branches in every table (winning over
// the table rule), and every decision names the rule that made it.
func TestPreviewPerReferenceWindows(t *testing.T) {
	dir, _ := setup(t)
	s := open(t, dir, true)
	p, err := Preview(bg, s, Policy{KeepLast: 1,
		Tables:   []Rule{{Pattern: "branch-*", KeepLast: 9}, {Pattern: "*", KeepLast: 1}},
		Branches: []Rule{{Pattern: "exp", KeepLast: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		table, branch string
		v             uint64
		keep          bool
		reason        string
	}{
		{"branch-tag.lance", "main", 1, true, "window: keep-last 9 (table rule branch-*)"},
		{"branch-tag.lance", "team/x", 4, true, "window: keep-last 9 (table rule branch-*)"},
		{"branch-tag.lance", "exp", 2, false, "not among the last 1 (branch rule exp)"},
		{"branch-tag.lance", "exp", 4, true, "window: keep-last 1 (branch rule exp)"},
		// deletes.lance matches the second table rule, by its name.
		{"deletes.lance", "main", 4, false, "not among the last 1 (table rule *)"},
	} {
		d := find(t, p, c.table, c.branch, c.v)
		if d.Keep != c.keep || !strings.Contains(strings.Join(d.Reasons, "; "), c.reason) {
			t.Errorf("%s %s v%d: keep=%v %q; want keep=%v with %q", c.table, c.branch, c.v, d.Keep, d.Reasons, c.keep, c.reason)
		}
	}
	if len(p.Policy.Tables) != 2 || p.Policy.Tables[0].Pattern != "branch-*" || len(p.Policy.Branches) != 1 {
		t.Errorf("the plan echoes rules %+v / %+v", p.Policy.Tables, p.Policy.Branches)
	}
}

// TestRunPerReferenceWindows: a run removes by the rules, its boundaries
// say which rules applied, and a reviewed plan carries its rules (with
// their cut-offs) into the run that applies it.
func TestRunPerReferenceWindows(t *testing.T) {
	dir, _ := setup(t)
	s := open(t, dir, false)
	week := 7 * 24 * time.Hour
	// An older-than rule's cut-off far in the past keeps every version of
	// the branches it matches.
	pol := Policy{KeepLast: 1, Branches: []Rule{{Pattern: "team/*", OlderThan: 100000 * week}}, Tables: []Rule{{Pattern: "deletes", KeepLast: 2}}}
	rp := reviewed(t, s, pol)
	if len(rp.Policy.Branches) != 1 || rp.Policy.Branches[0].Cutoff == nil {
		t.Fatalf("the reviewed plan's rules %+v", rp.Policy.Branches)
	}
	rep, err := Run(bg, s, Policy{}, RunOptions{ConfirmWriteOutage: true, Reviewed: rp})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Failed != 0 || rep.Totals.FilesDeleted != len(listed(rp)) {
		t.Fatalf("deleted %d files, the plan listed %d: %+v", rep.Totals.FilesDeleted, len(listed(rp)), rep.Totals)
	}
	for _, b := range rep.Boundaries {
		want := "branch rule team/*: older-than="
		if b.Path == "deletes.lance" {
			want = "table rule deletes: keep-last=2"
		}
		if !strings.Contains(b.Cutoff, want) {
			t.Errorf("boundary of %s: %q, want %q in it", b.Path, b.Cutoff, want)
		}
		// Only the rules that decided a version of the table are recorded.
		if b.Path == "deletes.lance" && strings.Contains(b.Cutoff, "team/*") {
			t.Errorf("boundary of %s names a rule that matches none of its branches: %q", b.Path, b.Cutoff)
		}
	}
	if !exists(t, dir, delV4) {
		t.Error("deletes.lance v4, kept by the table rule's keep-last 2, was removed")
	}
	if !exists(t, dir, "branch-tag.lance/tree/team/x/_versions/18446744073709551611.manifest") {
		t.Error("team/x v4, kept by the branch rule, was removed")
	}

	// Once more, not reviewed: nothing the rules keep goes.
	if _, err := Run(bg, s, pol, RunOptions{ConfirmWriteOutage: true}); err != nil {
		t.Fatal(err)
	}
	if !exists(t, dir, delV4) || !exists(t, dir, "branch-tag.lance/tree/team/x/_versions/18446744073709551611.manifest") {
		t.Error("a run by the rules removed a version they keep")
	}
}

// TestRulesRefused: a rule that says nothing to keep, has a bad pattern,
// or (online) a window shorter than MinOnlineAge refuses before the claim.
func TestRulesRefused(t *testing.T) {
	dir, _ := setup(t)
	s := open(t, dir, true)
	for _, p := range []Policy{
		{KeepLast: 1, Tables: []Rule{{Pattern: "x"}}},
		{KeepLast: 1, Branches: []Rule{{Pattern: "", KeepLast: 1}}},
		{KeepLast: 1, Branches: []Rule{{Pattern: "x", KeepLast: -1}}},
	} {
		if _, err := Preview(bg, s, p); storage.KindOf(err) != storage.ErrInvalidArgument {
			t.Errorf("%+v: preview: %v", p, err)
		}
		if _, err := Run(bg, s, p, RunOptions{ConfirmWriteOutage: true}); storage.KindOf(err) != storage.ErrInvalidArgument {
			t.Errorf("%+v: run: %v", p, err)
		}
	}
	_, err := Run(bg, s, Policy{OlderThan: 30 * 24 * time.Hour, Branches: []Rule{{Pattern: "session/*", KeepLast: 2}}}, RunOptions{Online: true})
	if storage.KindOf(err) != storage.ErrInvalidArgument || !strings.Contains(err.Error(), "branch rule session/*") {
		t.Errorf("an online run with a keep-last-only branch rule: %v", err)
	}
}

func TestParseRule(t *testing.T) {
	r, err := ParseRule("session/*:older-than=7d,keep-last=2")
	if err != nil || r.Pattern != "session/*" || r.OlderThan != 7*24*time.Hour || r.KeepLast != 2 {
		t.Fatalf("%+v %v", r, err)
	}
	for _, bad := range []string{"session/*", "x:keep-last=0", "x:older-than=soon", "x:keep=2", ":keep-last=1", "x:keep-last"} {
		if _, err := ParseRule(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// TestReviewedRulesWithoutCutoffRefused: a reviewed plan whose rule has an
// older-than but no cut-off is refused, naming the command that makes a
// new one, rather than counted back from the time it runs.
func TestReviewedRulesWithoutCutoffRefused(t *testing.T) {
	rp := &ReviewedPlan{Policy: PolicyEcho{KeepLast: 1, Branches: []RuleEcho{{Pattern: "session/*", OlderThan: "168h0m0s"}}}}
	_, err := rp.policy()
	if !errors.Is(err, ErrPlanInvalid) || !strings.Contains(err.Error(), "retain cleanup preview --out") {
		t.Fatalf("%v", err)
	}
}
