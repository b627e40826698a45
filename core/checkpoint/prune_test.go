package checkpoint

import (
	"errors"
	"testing"
	"time"

	"github.com/retain-dev/retain/core/checkpoint/registry"
	"github.com/retain-dev/retain/core/rotation"
	"github.com/retain-dev/retain/core/storage"
)

// pruneSeries creates, in order, hourly/m1..m4 on main, hourly/e1..e3 on
// exp and release-1 on main, in a store holding branch-tag.
func pruneSeries(t *testing.T) *storage.Store {
	t.Helper()
	s, _ := memStore(t, "branch-tag")
	for _, c := range []struct{ name, branch string }{
		{"hourly/m1", ""}, {"hourly/m2", ""}, {"hourly/m3", ""}, {"hourly/m4", ""},
		{"hourly/e1", "exp"}, {"hourly/e2", "exp"}, {"hourly/e3", "exp"},
		{"release-1", ""},
	} {
		if _, err := Create(bg, s, c.name, c.branch); err != nil {
			t.Fatal(c.name, err)
		}
		time.Sleep(2 * time.Millisecond) // distinct creation times
	}
	return s
}

func liveNames(t *testing.T, s *storage.Store) map[string]bool {
	t.Helper()
	_, snap := head(t, s)
	out := map[string]bool{}
	for _, cp := range snap.Live() {
		out[cp.Name] = true
	}
	return out
}

func TestPruneKeepsPerBranchAndNeverJudgesUnmatched(t *testing.T) {
	s := pruneSeries(t)
	v0, _ := head(t, s)
	req := PruneRequest{Match: []string{"hourly/*"}, Policy: rotation.Policy{Last: 2}, DryRun: true}
	dry, err := Options{}.Prune(bg, s, req)
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := head(t, s); v != v0 || dry.Kept != 4 || dry.Removed != 3 || dry.OperationID != "" {
		t.Fatalf("dry run: registry v%d→v%d, kept %d removed %d op %q", v0, v, dry.Kept, dry.Removed, dry.OperationID)
	}
	req.DryRun = false
	res, err := Options{}.Prune(bg, s, req)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"hourly/m3": true, "hourly/m4": true, "hourly/e2": true, "hourly/e3": true, "release-1": true}
	got := liveNames(t, s)
	if len(got) != len(want) {
		t.Fatalf("live after prune: %v, want %v", got, want)
	}
	for n := range want {
		if !got[n] {
			t.Fatalf("live after prune: %v, want %v", got, want)
		}
	}
	for i, d := range res.Decisions {
		if d.Keep != want[d.Name] || (d.Keep && len(d.Reasons) == 0) || (!d.Keep && len(d.Reasons) != 0) {
			t.Errorf("decision %d: %+v", i, d)
		}
	}
	if res.Removed != 3 || res.OperationID == "" || len(res.TagErrors) != 0 || len(res.TagsDeleted) != 6 { // a table pin and a registry pin each
		t.Fatalf("result: %+v", res)
	}
	// The removed checkpoints' pins are gone; the kept ones' remain.
	_, snap := head(t, s)
	pinned := map[registry.ID]int{}
	for tag := range pinTags(t, s, "branch-tag.lance") {
		pt, err := registry.ParsePinTag(tag)
		if err != nil {
			t.Fatal(tag, err)
		}
		pinned[pt.CheckpointID]++
	}
	for _, d := range res.Decisions {
		if (pinned[d.ID] > 0) != d.Keep {
			t.Errorf("%s (keep %v) has %d pins", d.Name, d.Keep, pinned[d.ID])
		}
	}
	if len(snap.Live()) != 5 {
		t.Fatalf("live %d", len(snap.Live()))
	}
	// Pruning again is a no-op: nothing more to remove, no commit.
	v1, _ := head(t, s)
	again, err := Options{}.Prune(bg, s, req)
	if err != nil || again.Removed != 0 || again.OperationID != "" {
		t.Fatalf("second prune: %+v %v", again, err)
	}
	if v2, _ := head(t, s); v2 != v1 {
		t.Fatalf("a no-op prune committed: v%d→v%d", v1, v2)
	}
	noSidecars(t, s)
}

func TestPruneGroupByNone(t *testing.T) {
	s := pruneSeries(t)
	res, err := Options{}.Prune(bg, s, PruneRequest{Match: []string{"hourly/*"}, Policy: rotation.Policy{Last: 2}, GroupBy: GroupByNone})
	if err != nil {
		t.Fatal(err)
	}
	got := liveNames(t, s)
	if res.Removed != 5 || len(got) != 3 || !got["hourly/e2"] || !got["hourly/e3"] || !got["release-1"] {
		t.Fatalf("group-by none: removed %d, live %v", res.Removed, got)
	}
}

// A checkpoint created after the pruner's clock is always kept: a host
// whose clock runs behind never rotates away what it cannot place.
func TestPruneKeepsCheckpointsFromTheFuture(t *testing.T) {
	s := pruneSeries(t)
	res, err := Options{}.Prune(bg, s, PruneRequest{Match: []string{"*"}, Policy: rotation.Policy{Last: 1}, Now: time.Now().Add(-time.Hour)})
	if err != nil || res.Removed != 0 || len(liveNames(t, s)) != 8 {
		t.Fatalf("clock behind: %+v %v", res, err)
	}
}

func TestPruneRefusesBadRequests(t *testing.T) {
	s := pruneSeries(t)
	v0, _ := head(t, s)
	for name, req := range map[string]PruneRequest{
		"no match":     {Policy: rotation.Policy{Last: 1}},
		"empty policy": {Match: []string{"*"}},
		"bad group-by": {Match: []string{"*"}, Policy: rotation.Policy{Last: 1}, GroupBy: "table"},
		"bad pattern":  {Match: []string{""}, Policy: rotation.Policy{Last: 1}},
	} {
		if _, err := (Options{}).Prune(bg, s, req); !errors.Is(err, storage.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", name, err)
		}
	}
	if v, _ := head(t, s); v != v0 {
		t.Fatalf("a refused prune committed")
	}
}
