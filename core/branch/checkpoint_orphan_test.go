package branch

import (
	"errors"
	"testing"
	"time"

	"github.com/retain-dev/retain/core/checkpoint"
	"github.com/retain-dev/retain/core/lance"
	"github.com/retain-dev/retain/core/refs/lifecycle"
	"github.com/retain-dev/retain/core/storage"
)

// the children rule only sees child branches through their branch
// files. A child whose branch file is gone (its own delete stopped after
// the ref: `branch-delete/after-refs`, the documented crash window) still
// has its folder, whose manifests read the parent's data files; a
// checkpoint can then pin it (checkpoint create only reads tree/<b>/
// _versions/). Deleting the parent is not refused by children, tags (the
// pin tags name the child) or pins (rows on the child, not on the parent):
// the parent's folder goes, and the checkpoint-pinned version loses files.
func TestCheckpointRefusesOrphanOrDeletingBranch(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real Lance (Node)")
	}
	dir := t.TempDir()
	branchedTable(t, dir, "t", "exp")
	lanceOps(t, dir, "t", op{"op": "branchCreate", "name": "kid", "from": "exp", "version": 3}, op{"op": "add", "rows": 1, "on": "kid"})
	s, _ := localStore(t, dir)
	ds, _ := lance.Open(s, "t.lance")
	// What `branch delete kid` killed at branch-delete/after-refs leaves.
	kid, err := ds.ReadBranch(bg, "kid")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(bg, kid.Info.Key, storage.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// A checkpoint never pins a branch without its file, so the parent's
	// delete cannot take files a pin holds.
	if _, err := checkpoint.Create(bg, s, "cp", "kid"); !errors.Is(err, checkpoint.ErrMissingTarget) {
		t.Fatalf("checkpoint of the orphaned child: %v (want ErrMissingTarget)", err)
	}
	// Nor one marked deleting.
	exp, err := ds.ReadBranch(bg, "exp")
	if err != nil {
		t.Fatal(err)
	}
	meta := lifecycle.Meta(exp.Metadata, lifecycle.Deleting, "branch-delete-x", nil,
		lifecycle.Source{Branch: exp.ParentBranch, Version: exp.ParentVersion}, time.Now())
	if _, err := ds.ReplaceBranchMetadata(bg, "exp", exp.Info.Version, meta); err != nil {
		t.Fatal(err)
	}
	if _, err := checkpoint.Create(bg, s, "cp2", "exp"); !errors.Is(err, checkpoint.ErrMissingTarget) {
		t.Fatalf("checkpoint of a branch marked deleting: %v (want ErrMissingTarget)", err)
	}
}
