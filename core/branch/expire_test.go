package branch

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/retain-dev/retain/core/authz"
	"github.com/retain-dev/retain/core/checkpoint"
	"github.com/retain-dev/retain/core/lance"
	"github.com/retain-dev/retain/core/refs/refmeta"
)

// A branch created with an expiry keeps it through its lifecycle; past
// it, the reaper deletes it through the delete protocol — refused (kept)
// while a checkpoint pins it, deleted once the checkpoint is gone, as
// real Lance then lists.
func TestExpiredBranchDeletedThroughTheProtocol(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real Lance (Node)")
	}
	dir := t.TempDir()
	branchedTable(t, dir, "t", "exp")
	s, _ := localStore(t, dir)
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, err := Create(bg, s, "exp", CreateOptions{Table: "t", From: "main@2", Expires: t0}); err != nil {
		t.Fatal(err)
	}
	ds, _ := lance.Open(s, "t.lance")
	b, err := ds.ReadBranch(bg, "exp")
	if at, ok, err2 := refmeta.Expiry(b.Metadata); err != nil || err2 != nil || !ok || !at.Equal(t0) {
		t.Fatalf("expiry recorded: %v %v %v %v", at, ok, err, err2)
	}
	if _, err := Create(bg, s, "exp", CreateOptions{Table: "t", From: "main@2", Expires: t0.Add(time.Hour)}); err == nil {
		t.Fatal("a ready branch given another expiry: accepted")
	}
	if _, err := checkpoint.Create(bg, s, "on-exp", "exp"); err != nil {
		t.Fatal(err)
	}
	at := func(d time.Duration) func() time.Time { return func() time.Time { return t0.Add(d) } }
	if r, err := ReapExpired(bg, s, ReapOptions{Now: at(time.Minute)}); err != nil || r.Deleted != 0 || !strings.HasPrefix(r.Branches[0].Why, "kept: expires") {
		t.Fatalf("within the margin: %+v %v", r, err)
	}
	r, err := ReapExpired(bg, s, ReapOptions{Now: at(time.Hour)})
	if err != nil || r.Deleted != 0 || len(r.Branches) != 1 || !strings.Contains(r.Branches[0].Why, "on-exp") {
		t.Fatalf("pinned by a checkpoint: %+v %v", r, err)
	}
	if _, err := checkpoint.Delete(bg, s, "on-exp"); err != nil {
		t.Fatal(err)
	}
	if r, err := ReapExpired(bg, s, ReapOptions{Now: at(time.Hour), DryRun: true}); err != nil || r.Deleted != 1 {
		t.Fatalf("dry run: %+v %v", r, err)
	}
	if got := lanceBranches(t, dir, "t"); !slices.Contains(got, "exp") {
		t.Fatalf("a dry run deleted the branch: %v", got)
	}
	// A policy tells the reaper's deletes from an operator's: forbidden as
	// "branch expire", the branch stays.
	pol, err := authz.Parse("p.cedar", []byte(`permit(principal, action, resource);
forbid(principal, action == Retain::Action::"branch delete", resource) when { context.command == "branch expire" };`))
	if err != nil {
		t.Fatal(err)
	}
	gated := authz.WithGate(bg, authz.NewGate(pol, "ops", nil))
	if r, err := ReapExpired(gated, s, ReapOptions{Now: at(time.Hour)}); r == nil || r.Deleted != 0 || err == nil {
		t.Fatalf("the reaper under a forbid of branch expire: %+v %v", r, err)
	}
	if got := lanceBranches(t, dir, "t"); !slices.Contains(got, "exp") {
		t.Fatalf("a forbidden reap deleted the branch: %v", got)
	}
	if r, err := ReapExpired(bg, s, ReapOptions{Now: at(time.Hour)}); err != nil || r.Deleted != 1 {
		t.Fatalf("after the checkpoint went: %+v %v", r, err)
	}
	if got := lanceBranches(t, dir, "t"); slices.Contains(got, "exp") {
		t.Fatalf("Lance still lists the expired branch: %v", got)
	}
}

// A delete whose StillDue says no under the claim refuses with
// ErrBranchChanged and deletes nothing.
func TestDeleteStillDueRefuses(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real Lance (Node)")
	}
	dir := t.TempDir()
	branchedTable(t, dir, "t", "exp")
	s, _ := localStore(t, dir)
	_, err := Options{Table: "t", StillDue: func(map[string]string) bool { return false }}.Delete(bg, s, "exp")
	if !errors.Is(err, ErrBranchChanged) || !errors.Is(err, ErrRefused) {
		t.Fatalf("not due under the claim: %v", err)
	}
	if got := lanceBranches(t, dir, "t"); !slices.Contains(got, "exp") {
		t.Fatalf("the branch was deleted: %v", got)
	}
}
