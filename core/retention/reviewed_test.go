package retention

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/retain-dev/retain/core/checkpoint"
	"github.com/retain-dev/retain/core/retention/runs"
	"github.com/retain-dev/retain/core/storage"
)

// files lists every file of the store outside retain's own _retain/ and
// localfs's lock folder.
func files(t *testing.T, dir string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			if rel == "_retain" || rel == ".retain-localfs" {
				return filepath.SkipDir
			}
			return nil
		}
		out[filepath.ToSlash(rel)] = true
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// reviewed saves s's plan under p and reads it back as a file would be.
func reviewed(t *testing.T, s *storage.Store, p Policy) *ReviewedPlan {
	t.Helper()
	plan, err := Preview(bg, s, p)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.MarshalIndent(NewReviewedPlan(s.Location(), plan), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	rp, err := ParseReviewedPlan("plan.json", b, "")
	if err != nil {
		t.Fatal(err)
	}
	return rp
}

func listed(rp *ReviewedPlan) map[string]bool {
	out := map[string]bool{}
	for _, tb := range rp.Tables {
		for _, k := range tb.Remove {
			out[k] = true
		}
	}
	return out
}

// TestReviewedPlanAppliedExactly: an unchanged plan is applied and removes
// exactly the objects it listed, nothing else of the tables.
func TestReviewedPlanAppliedExactly(t *testing.T) {
	dir, _ := setup(t)
	s := open(t, dir, false)
	rp := reviewed(t, s, Policy{KeepLast: 1})
	want := listed(rp)
	if len(want) == 0 {
		t.Fatal("the plan removes nothing: the test proves nothing")
	}
	before := files(t, dir)
	rep, err := Run(bg, s, Policy{}, RunOptions{ConfirmWriteOutage: true, Reviewed: rp})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Failed != 0 || rep.Totals.FilesDeleted != len(want) {
		t.Fatalf("deleted %d files, the plan listed %d: %+v", rep.Totals.FilesDeleted, len(want), rep.Totals)
	}
	after := files(t, dir)
	for k := range before {
		if want[k] == after[k] {
			t.Errorf("%s: listed %v, still there %v", k, want[k], after[k])
		}
	}
	for k := range after {
		if !before[k] {
			t.Errorf("%s appeared", k)
		}
	}
}

// TestReviewedPlanCutoffIsTheReviewed: a plan with an older-than window is
// applied at its own cut-off. Counted back from the time of the run, the
// window would take more, and the run would refuse.
func TestReviewedPlanCutoffIsTheReviewed(t *testing.T) {
	dir, _ := setup(t)
	s := open(t, dir, false)
	all, err := Preview(bg, s, Policy{KeepLast: 1})
	if err != nil {
		t.Fatal(err)
	}
	// The cut-off just after deletes.lance v1: v1 goes, v2 stays by the
	// window though a window counted from now would take it.
	v1 := find(t, all, "deletes.lance", "main", 1).Timestamp
	planned := v1.Add(time.Millisecond).Add(14 * 24 * time.Hour)
	rp := reviewed(t, s, Policy{OlderThan: 14 * 24 * time.Hour, Now: func() time.Time { return planned }})
	if len(listed(rp)) == 0 {
		t.Fatal("the plan removes nothing")
	}
	rep, err := Run(bg, s, Policy{}, RunOptions{ConfirmWriteOutage: true, Reviewed: rp})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Totals.FilesDeleted != len(listed(rp)) {
		t.Fatalf("deleted %d, listed %d", rep.Totals.FilesDeleted, len(listed(rp)))
	}
	if !exists(t, dir, "deletes.lance/_versions/18446744073709551613.manifest") {
		t.Fatal("v2, kept by the reviewed window, was removed")
	}
}

// TestReviewedPlanStale: a plan made stale is refused before anything is
// deleted, the difference named.
func TestReviewedPlanStale(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, dir, park string, s *storage.Store)
		want   []string
	}{
		{"new commit", func(t *testing.T, dir, park string, s *storage.Store) {
			// v5 lands after the plan: the head moves.
			if err := os.Rename(park, filepath.Join(dir, delV5)); err != nil {
				t.Fatal(err)
			}
		}, []string{`table "deletes.lance"`, "root gone: main v4: branch head main", "new root: main v5: branch head main"}},
		{"checkpoint deleted", func(t *testing.T, dir, park string, s *storage.Store) {
			if _, err := checkpoint.Delete(bg, s, "nightly"); err != nil {
				t.Fatal(err)
			}
		}, []string{"root gone: main v3: checkpoint nightly", "not in the reviewed plan: remove deletes.lance/"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, _ := setup(t)
			// For "new commit": v5 is not there when the plan is made.
			park := filepath.Join(t.TempDir(), "v5")
			if tc.name == "new commit" {
				if err := os.Rename(filepath.Join(dir, delV5), park); err != nil {
					t.Fatal(err)
				}
			}
			s := open(t, dir, false)
			rp := reviewed(t, s, Policy{KeepLast: 1})
			tc.change(t, dir, park, s)
			before := files(t, dir)
			_, err := Run(bg, s, Policy{}, RunOptions{ConfirmWriteOutage: true, Reviewed: rp})
			var se *PlanStaleError
			if !errors.As(err, &se) || !errors.Is(err, ErrPlanStale) || !errors.Is(err, ErrRunRefused) {
				t.Fatalf("run of a stale plan: %v", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the refusal does not say %q: %v", w, err)
				}
			}
			if after := files(t, dir); len(after) != len(before) {
				t.Fatalf("a refused run deleted %d files", len(before)-len(after))
			}
			if open, err := runs.Open(bg, s); err != nil || len(open) != 0 {
				t.Fatalf("a refused run left runs open: %v %v", open, err)
			}
		})
	}
}

// TestReviewedPlanMayRemoveLess: a listed file already gone does not make
// the plan stale; the run removes the rest.
func TestReviewedPlanMayRemoveLess(t *testing.T) {
	dir, _ := setup(t)
	s := open(t, dir, false)
	rp := reviewed(t, s, Policy{KeepLast: 1})
	var gone string
	for _, tb := range rp.Tables {
		for _, k := range tb.Remove {
			if !strings.Contains(k, "_versions/") {
				gone = k
			}
		}
	}
	if gone == "" {
		t.Fatal("no data file listed")
	}
	if err := os.Remove(filepath.Join(dir, gone)); err != nil {
		t.Fatal(err)
	}
	rep, err := Run(bg, s, Policy{}, RunOptions{ConfirmWriteOutage: true, Reviewed: rp})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Totals.FilesDeleted != len(listed(rp))-1 {
		t.Fatalf("deleted %d of %d listed, one already gone", rep.Totals.FilesDeleted, len(listed(rp)))
	}
}

// TestReviewedPlanFileChecks: a plan file edited after it was saved, of
// another digest than expected, of another store, or with a window passed
// beside it is refused before the claim is taken.
func TestReviewedPlanFileChecks(t *testing.T) {
	dir, _ := setup(t)
	s := open(t, dir, false)
	plan, err := Preview(bg, s, Policy{KeepLast: 1})
	if err != nil {
		t.Fatal(err)
	}
	rp := NewReviewedPlan(s.Location(), plan)
	b, _ := json.Marshal(rp)
	if _, err := ParseReviewedPlan("p.json", b, rp.Digest); err != nil {
		t.Fatalf("the plan as saved: %v", err)
	}
	if _, err := ParseReviewedPlan("p.json", b, "sha256:00"); !errors.Is(err, ErrPlanInvalid) || !strings.Contains(err.Error(), "not the expected sha256:00") {
		t.Fatalf("another digest expected: %v", err)
	}
	// An extra object slipped into the list.
	edited := *rp
	edited.Tables = append([]ReviewedTable(nil), rp.Tables...)
	edited.Tables[0].Remove = append(append([]string(nil), rp.Tables[0].Remove...), "deletes.lance/data/x.lance")
	sort.Strings(edited.Tables[0].Remove)
	eb, _ := json.Marshal(&edited)
	if _, err := ParseReviewedPlan("p.json", eb, ""); !errors.Is(err, ErrPlanInvalid) || !strings.Contains(err.Error(), "changed after it was saved") {
		t.Fatalf("an edited plan: %v", err)
	}
	if _, err := ParseReviewedPlan("p.json", []byte(`{"format":"x"}`), ""); !errors.Is(err, ErrPlanInvalid) {
		t.Fatalf("another format: %v", err)
	}
	other := *rp
	other.Store = "file:///elsewhere"
	if _, err := Run(bg, s, Policy{}, RunOptions{ConfirmWriteOutage: true, Reviewed: &other}); !errors.Is(err, ErrPlanInvalid) || !strings.Contains(err.Error(), "file:///elsewhere") {
		t.Fatalf("a plan of another store: %v", err)
	}
	if _, err := Run(bg, s, Policy{KeepLast: 2}, RunOptions{ConfirmWriteOutage: true, Reviewed: rp}); storage.KindOf(err) != storage.ErrInvalidArgument {
		t.Fatalf("a window beside the plan: %v", err)
	}
}
