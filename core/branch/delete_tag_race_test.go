package branch

import (
	"errors"
	"strings"
	"testing"

	"github.com/retain-dev/retain/adapters/localfs"
	"github.com/retain-dev/retain/core/lance"
	"github.com/retain-dev/retain/core/refs/lifecycle"
	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/claim"
	"github.com/retain-dev/retain/core/storage/storagetest"
	"github.com/retain-dev/retain/core/tag"
)

// `retain tag create` neither takes the claim nor looks at the
// branch lifecycle. A tag created on the branch after Delete planned (no
// tags then) and before it deletes the branch file is never seen: the
// delete goes on, and the tag just created — reported as success — names
// a version of a branch that no longer exists.
func TestBranchDeleteSeesTagCreatedBeforeItsMark(t *testing.T) {
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
	other, _ := localStore(t, dir) // an agent's process: its own store
	ods, _ := lance.Open(other, "t.lance")
	tags := tag.New(ods, tag.Options{Scope: claim.ScopeFor(loc)})
	var tagErr error
	hd.Before(storagetest.Once(func(c storagetest.Call) bool {
		// markDeleting: the plan is done, the registry was read.
		return c.Op == storagetest.OpPut && strings.HasSuffix(c.Key, "_refs/branches/exp.json") && c.Put.Mode == storage.PutReplaceIfVersion
	}, func() {
		_, tagErr = tags.Create(bg, "good-run", tag.CreateOptions{Branch: "exp", Version: 3, Metadata: map[string]string{"verdict": "keep"}})
	}))
	_, err = Delete(bg, s.At(loc), "exp", Options{})
	if tagErr != nil {
		t.Fatalf("the tag create (before the mark) failed: %v", tagErr)
	}
	// The delete's second plan, after its mark, sees the tag: refused, the
	// mark rolled back, the branch listed and the tag resolving.
	if !errors.Is(err, lance.ErrBranchHasTags) {
		t.Fatalf("delete with a tag created after its first plan: %v", err)
	}
	if r, rerr := tags.Resolve(bg, "good-run"); rerr != nil || r.Branch != "exp" {
		t.Fatalf("the tag after the refused delete: %+v %v", r, rerr)
	}
	b, err := ods.ReadBranch(bg, "exp")
	if err != nil {
		t.Fatal(err)
	}
	if l, err := lifecycle.Parse(b.Metadata); err != nil || l.State != lifecycle.Ready {
		t.Fatalf("the branch after the refused delete: %+v %v", l, err)
	}
}
