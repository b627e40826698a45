package lance

import (
	"strings"
	"testing"
	"time"

	"github.com/retain-dev/retain/core/storage"
)

// TestPlanCleanupBranchWindows: a branch window replaces the policy's
// window for the branches it matches (the first match wins, "main" names
// main), and every decision it makes says which rule made it.
func TestPlanCleanupBranchWindows(t *testing.T) {
	d, _ := openFixture(t, "branch-tag")
	future := time.Now().Add(time.Hour)
	plan, err := d.PlanCleanup(bg, Policy{KeepLast: 1, Branches: []BranchWindow{
		{Pattern: "team/*", OlderThan: future},
		{Pattern: "e?p", KeepLast: 9},
		{Pattern: "*", KeepLast: 1}, // never reached by the two above
	}})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		branch  string
		n       uint64
		keep    bool
		reasons string
	}{
		{"", 1, false, "removed: not among the last 1 (branch rule *); not the latest, tagged, a fork point or an extra root"},
		{"", 2, true, "tag v2-tag; fork point of branch exp"},
		{"", 3, true, "latest; keep-last 1 (branch rule *)"},
		{"exp", 2, true, "keep-last 9 (branch rule e?p)"},
		{"exp", 3, true, "keep-last 9 (branch rule e?p); tag exp-tag"},
		{"exp", 4, true, "latest; keep-last 9 (branch rule e?p); fork point of branch team/x"},
		{"team/x", 4, true, "not older than the cut-off " + future.UTC().Format(time.RFC3339Nano) + " (branch rule team/*)"},
		{"team/x", 5, true, "latest; not older than the cut-off " + future.UTC().Format(time.RFC3339Nano) + " (branch rule team/*)"},
	}
	if len(plan.Versions) != len(want) {
		t.Fatalf("the plan lists %d versions, want %d: %+v", len(plan.Versions), len(want), plan.Versions)
	}
	for i, w := range want {
		v := plan.Versions[i]
		if v.Branch != w.branch || v.Version != w.n || v.Keep != w.keep || strings.Join(v.Reasons, "; ") != w.reasons {
			t.Errorf("version %d: %s keep=%v %q; want %s keep=%v %q", i, VersionID{v.Branch, v.Version}, v.Keep,
				strings.Join(v.Reasons, "; "), VersionID{w.branch, w.n}, w.keep, w.reasons)
		}
	}
	if len(plan.Policy.Branches) != 3 || plan.Policy.Branches[1].Pattern != "e?p" {
		t.Errorf("the plan echoes branch windows %+v", plan.Policy.Branches)
	}

	// A window only for the branches: main keeps the policy's own.
	plan, err = d.PlanCleanup(bg, Policy{KeepLast: 9, Branches: []BranchWindow{{Pattern: "exp", KeepLast: 1, Rule: "session rule"}}})
	if err != nil {
		t.Fatal(err)
	}
	if v := versionOf(t, plan, "", 1); !v.Keep || strings.Join(v.Reasons, "; ") != "keep-last 9" {
		t.Errorf("main v1: keep=%v %q", v.Keep, v.Reasons)
	}
	if v := versionOf(t, plan, "exp", 2); v.Keep || !strings.Contains(v.Reasons[0], "not among the last 1 (session rule)") {
		t.Errorf("exp v2: keep=%v %q", v.Keep, v.Reasons)
	}
}

// TestPlanCleanupBranchWindowInvalid: a window must say what it keeps and
// its pattern must be one.
func TestPlanCleanupBranchWindowInvalid(t *testing.T) {
	d, _ := openFixture(t, "branch-tag")
	for _, bw := range []BranchWindow{{Pattern: "exp"}, {Pattern: "", KeepLast: 1}, {Pattern: "exp", KeepLast: -2}} {
		_, err := d.PlanCleanup(bg, Policy{KeepLast: 1, Branches: []BranchWindow{bw}})
		if storage.KindOf(err) != storage.ErrInvalidArgument {
			t.Errorf("%+v: %v", bw, err)
		}
	}
}
