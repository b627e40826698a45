package lance

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/retain-dev/retain/core/storage"
)

func keysOf(infos []storage.Info) []string {
	out := make([]string, len(infos))
	for i, o := range infos {
		out[i] = o.Key
	}
	return out
}

func listKeys(t testing.TB, s *storage.Store, prefix string) []string {
	t.Helper()
	objs, err := s.List(bg, prefix, 0)
	if err != nil {
		t.Fatal(err)
	}
	return keysOf(objs)
}

// The branch-tag fixture: exp has child team/x and tag exp-tag; team/x is
// a leaf. A delete of team/x that stops after the branch file resumes.
func TestBranchDeleteFixture(t *testing.T) {
	d, _ := openFixture(t, "branch-tag")
	s := d.Store
	expFiles := listKeys(t, s, "branch-tag.lance/tree/exp/")

	_, err := d.PlanBranchDelete(bg, "exp")
	refWantIs(t, "exp", err, ErrBranchHasChildren, ErrBranchHasTags, storage.ErrPreconditionFailed)
	var be *BranchDeleteError
	if !errors.As(err, &be) || !reflect.DeepEqual(be.Children, []BranchRef{{"team/x", 4}}) || !reflect.DeepEqual(be.Tags, []BranchRef{{"exp-tag", 3}}) {
		t.Fatalf("exp refusal: %+v", err)
	}
	if errors.Is(err, ErrBranchOverlap) || errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("exp refusal matches too much: %v", err)
	}
	_, err = d.PlanBranchDelete(bg, "main")
	refWantIs(t, "main", err, ErrInvalidName, storage.ErrInvalidArgument)
	if !strings.Contains(err.Error(), "can never be deleted") {
		t.Fatalf("main: %v", err)
	}
	_, err = d.PlanBranchDelete(bg, "main/x")
	refWantIs(t, "main/x", err, ErrBranchDeleteUnsafe, storage.ErrUnsupported)
	_, err = d.PlanBranchDelete(bg, "a//b")
	refWantIs(t, "a//b", err, ErrInvalidName, storage.ErrInvalidArgument)
	_, err = d.PlanBranchDelete(bg, "nope")
	refWantIs(t, "nope", err, ErrBranchNotFound, storage.ErrNotFound)
	_, err = d.PlanBranchDelete(bg, "team")
	refWantIs(t, "team (only a nested branch's folder)", err, ErrBranchNotFound, storage.ErrNotFound)

	p, err := d.PlanBranchDelete(bg, "team/x")
	if err != nil {
		t.Fatal(err)
	}
	want := listKeys(t, s, "branch-tag.lance/tree/team/x/")
	got := keysOf(p.Files)
	if p.Ref == nil || p.RefKey != "branch-tag.lance/_refs/branches/team%2Fx.json" || p.Tree != "branch-tag.lance/tree/team/x" || len(got) != len(want) || len(want) != 6 {
		t.Fatalf("plan %+v files %v, want %v", p, got, want)
	}
	for i, k := range got {
		if isManifest := strings.Contains(k, "/_versions/"); isManifest != (i < 3) {
			t.Fatalf("manifests must come first: %v", got)
		}
	}
	if p.Bytes() <= 0 {
		t.Fatal("no bytes")
	}

	// Stop after the branch file: the branch is gone for Lance and retain,
	// and the folder is found again and finished.
	deleted, err := d.DeleteBranchRef(bg, p)
	if err != nil || !deleted {
		t.Fatalf("DeleteBranchRef: %v %v", deleted, err)
	}
	if bs, err := d.ListBranches(bg); err != nil || len(bs) != 1 || bs[0].Name != "exp" {
		t.Fatalf("branches after the ref delete: %+v %v", bs, err)
	}
	again, err := d.PlanBranchDelete(bg, "team/x")
	if err != nil || again.Ref != nil || !reflect.DeepEqual(keysOf(again.Files), got) {
		t.Fatalf("resumed plan: %+v %v", again, err)
	}
	if deleted, err := d.DeleteBranchRef(bg, again); deleted || err != nil {
		t.Fatalf("no branch file to delete: %v %v", deleted, err)
	}
	res, err := d.DeleteBranchTree(bg, again)
	if err != nil || res.FilesDeleted != 6 || res.BytesDeleted != p.Bytes() || len(res.Failed) != 0 {
		t.Fatalf("DeleteBranchTree: %+v %v", res, err)
	}
	if left := listKeys(t, s, "branch-tag.lance/tree/team/"); len(left) != 0 {
		t.Fatalf("left: %v", left)
	}
	if !reflect.DeepEqual(listKeys(t, s, "branch-tag.lance/tree/exp/"), expFiles) {
		t.Fatal("exp's folder changed")
	}
	_, err = d.PlanBranchDelete(bg, "team/x")
	refWantIs(t, "team/x after the delete", err, ErrBranchNotFound, storage.ErrNotFound)

	// exp now only has its tag.
	_, err = d.PlanBranchDelete(bg, "exp")
	refWantIs(t, "exp after team/x", err, ErrBranchHasTags)
	if errors.Is(err, ErrBranchHasChildren) {
		t.Fatalf("exp has no child any more: %v", err)
	}
	if err := d.DeleteTag(bg, "exp-tag", ""); err != nil {
		t.Fatal(err)
	}
	p, err = d.PlanBranchDelete(bg, "exp")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.DeleteBranchRef(bg, p); err != nil {
		t.Fatal(err)
	}
	if _, err := d.DeleteBranchTree(bg, p); err != nil {
		t.Fatal(err)
	}
	if left := listKeys(t, s, "branch-tag.lance/tree/"); len(left) != 0 {
		t.Fatalf("left: %v", left)
	}
	if vs, err := d.Versions(bg); err != nil || len(vs) != 3 {
		t.Fatalf("main: %v %v", vs, err)
	}
}

// Nested names: a nested branch whose folder is not one of Lance's is
// kept; one inside a Lance folder (data/, _x/, tree/) refuses both.
func TestBranchDeleteNested(t *testing.T) {
	s := refMemStore(t)
	d := refFakeDataset(t, s, "db/t.lance", 10, 20)
	for _, b := range []string{"x", "x%2Fy", "x%2Fdata", "q%2Fr", "w"} {
		refPut(t, s, "db/t.lance/_refs/branches/"+b+".json", lanceBranchFileMain)
	}
	for _, root := range []string{"x", "x/y", "x/data", "q/r", "w"} {
		refFakeDataset(t, s, "db/t.lance/tree/"+root, 0, 30, 40)
		refPut(t, s, "db/t.lance/tree/"+root+"/data/f.lance", "data")
	}
	refPut(t, s, "db/t.lance/tree/x/_transactions/1-a.txn", "txn")
	refPut(t, s, "db/t.lance/tree/z/_versions/"+ManifestName(3, NamingV2), "debris") // a create Lance refused
	refPut(t, s, "db/t.lance/tree/w/_deletions/0-1-2.arrow", "del")

	_, err := d.PlanBranchDelete(bg, "x")
	refWantIs(t, "x with x/data", err, ErrBranchOverlap, storage.ErrPreconditionFailed)
	if !strings.Contains(err.Error(), `"x/data"`) || strings.Contains(err.Error(), `"x/y"`) {
		t.Fatalf("x: %v", err)
	}
	_, err = d.PlanBranchDelete(bg, "x/data")
	refWantIs(t, "x/data inside x's data folder", err, ErrBranchOverlap)
	_, err = d.PlanBranchDelete(bg, "q")
	refWantIs(t, "q: only q/r's folder", err, ErrBranchNotFound, storage.ErrNotFound)

	// Without x/data's branch file, x is deletable and x/y is kept; the
	// objects under tree/x/data/ are x's own data files now.
	if err := s.Delete(bg, "db/t.lance/_refs/branches/x%2Fdata.json", storage.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err = d.PlanBranchDelete(bg, "x/data")
	refWantIs(t, "x/data without a branch file: its folder is x's data", err, ErrBranchNotFound)
	p, err := d.PlanBranchDelete(bg, "x")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(p.Excluded, []string{"db/t.lance/tree/x/y/"}) {
		t.Fatalf("excluded %v", p.Excluded)
	}
	for _, k := range keysOf(p.Files) {
		if strings.HasPrefix(k, "db/t.lance/tree/x/y/") || !strings.HasPrefix(k, "db/t.lance/tree/x/") {
			t.Fatalf("x's plan deletes %s", k)
		}
	}
	yFiles := listKeys(t, s, "db/t.lance/tree/x/y/")
	if _, err := d.DeleteBranchRef(bg, p); err != nil {
		t.Fatal(err)
	}
	if _, err := d.DeleteBranchTree(bg, p); err != nil {
		t.Fatal(err)
	}
	if left := listKeys(t, s, "db/t.lance/tree/x/"); !reflect.DeepEqual(left, yFiles) {
		t.Fatalf("after x: %v, want x/y's %v", left, yFiles)
	}
	// x/y under a deleted x: deletable on its own.
	if p, err = d.PlanBranchDelete(bg, "x/y"); err != nil || len(p.Files) != len(yFiles) {
		t.Fatalf("x/y: %+v %v", p, err)
	}

	// Debris without a branch file is the branch's own folder.
	p, err = d.PlanBranchDelete(bg, "z")
	if err != nil || p.Ref != nil || len(p.Files) != 1 {
		t.Fatalf("z: %+v %v", p, err)
	}

	// A branch file rewritten after planning is kept.
	p, err = d.PlanBranchDelete(bg, "w")
	if err != nil {
		t.Fatal(err)
	}
	refPut(t, s, "db/t.lance/_refs/branches/w.json", lanceBranchFileMain)
	_, err = d.DeleteBranchRef(bg, p)
	refWantIs(t, "rewritten branch file", err, ErrBranchChanged, storage.ErrPreconditionFailed)
	if _, err := s.Stat(bg, "db/t.lance/_refs/branches/w.json"); err != nil {
		t.Fatal("the rewritten branch file was deleted")
	}

	// Child branches, tags and malformed refs.
	refPut(t, s, "db/t.lance/_refs/branches/kid.json", `{"parentBranch":"w","parentVersion":2,"createAt":5,"manifestSize":40}`)
	refPut(t, s, "db/t.lance/_refs/tags/wt.json", `{"branch":"w","version":1,"manifestSize":30}`)
	_, err = d.PlanBranchDelete(bg, "w")
	refWantIs(t, "w", err, ErrBranchHasChildren, ErrBranchHasTags)
	refPut(t, s, "db/t.lance/_refs/tags/bad.json", `{`)
	_, err = d.PlanBranchDelete(bg, "w")
	refWantIs(t, "malformed tag", err, ErrMalformedTag)
	refPut(t, s, "db/t.lance/_refs/branches/bad.json", `{`)
	_, err = d.PlanBranchDelete(bg, "w")
	refWantIs(t, "malformed branch", err, ErrMalformedBranch)
	// A branch that is nowhere is not found, whatever else is malformed;
	// a malformed file of the branch itself refuses.
	_, err = d.PlanBranchDelete(bg, "elsewhere")
	refWantIs(t, "missing branch next to malformed refs", err, ErrBranchNotFound, storage.ErrNotFound)
	_, err = d.PlanBranchDelete(bg, "bad")
	refWantIs(t, "the branch's own malformed file", err, ErrMalformedBranch)
	if errors.Is(err, ErrBranchNotFound) {
		t.Fatalf("bad: %v", err)
	}
}
