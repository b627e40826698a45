package branch

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/retain-dev/retain/adapters/localfs"
	"github.com/retain-dev/retain/core/lance"
	"github.com/retain-dev/retain/core/refs/lifecycle"
	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/claim"
	"github.com/retain-dev/retain/core/storage/storagetest"
	"github.com/retain-dev/retain/core/tag"
)

// A branch left creating by a dead `branch create` (not listed; "Delete
// removes it (rolls it back)") is taken over by a delete and marked
// deleting. When the delete's SECOND plan (after the mark) is refused —
// here a tag created before the mark — rollBackDeleting puts it to READY:
// the unfinished adoption becomes a listed, ready branch nobody confirmed.
// A refusal in the first plan leaves it creating; the state the delete
// started from is lost only on the second plan's refusal.
func TestRefusedReplanKeepsCreating(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real Lance (Node)")
	}
	dir := t.TempDir()
	branchedTable(t, dir, "t", "exp")
	ld, err := localfs.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	hd := storagetest.NewHook(ld)
	s, err := storage.NewStore(bg, "localfs", hd)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	loc := storage.Location{Scheme: "file", Path: dir}
	ds, _ := lance.Open(s, "t.lance")
	exp, err := ds.ReadBranch(bg, "exp")
	if err != nil {
		t.Fatal(err)
	}
	dead := &lifecycle.Owner{Host: "elsewhere", PID: 1}
	meta := lifecycle.Meta(exp.Metadata, lifecycle.Creating, "branch-create-dead", dead,
		lifecycle.Source{Branch: exp.ParentBranch, Version: exp.ParentVersion}, time.Now())
	if _, err := ds.ReplaceBranchMetadata(bg, "exp", exp.Info.Version, meta); err != nil {
		t.Fatal(err)
	}
	other, _ := localStore(t, dir)
	ods, _ := lance.Open(other, "t.lance")
	tags := tag.New(ods, tag.Options{Scope: claim.ScopeFor(loc)})
	hd.Before(storagetest.Once(func(c storagetest.Call) bool {
		return c.Op == storagetest.OpPut && strings.HasSuffix(c.Key, "_refs/branches/exp.json") && c.Put.Mode == storage.PutReplaceIfVersion
	}, func() {
		if _, err := tags.Create(bg, "late", tag.CreateOptions{Branch: "exp", Version: 3}); err != nil {
			t.Errorf("tag create: %v", err)
		}
	}))
	_, err = Delete(bg, s.At(loc), "exp", Options{OwnerDeadAttested: "test: the creator is gone"})
	if !errors.Is(err, lance.ErrBranchHasTags) {
		t.Fatalf("delete: %v", err)
	}
	b, err := ds.ReadBranch(bg, "exp")
	if err != nil {
		t.Fatal(err)
	}
	l, err := lifecycle.Parse(b.Metadata)
	t.Logf("after the refused delete: %+v %v", l, err)
	if l.State == lifecycle.Ready {
		t.Fatalf("a branch left creating (never confirmed) is ready and listed after a refused delete: %+v", l)
	}
}
