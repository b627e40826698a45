package checkpoint

import (
	"testing"

	"github.com/retain-dev/retain/core/lance"
)

// TestReconcileRefsOnlyWhereUntouched: reconcile hands on a table's refs
// (Report.Refs, what cleanup run plans from) only where it changed
// nothing: a table where it reclaimed or repaired a pin gets nil, so the
// plan reads the refs as they are now.
func TestReconcileRefsOnlyWhereUntouched(t *testing.T) {
	s, _, _ := localStore(t, "v2-appends", "branch-tag")
	c, err := Create(bg, s, "a", "")
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Reconcile(bg, s)
	if err != nil {
		t.Fatal(err)
	}
	for _, root := range []string{"v2-appends.lance", "branch-tag.lance"} {
		refs := rep.Refs(root)
		if refs == nil || refs.Dataset != root {
			t.Fatalf("a settled store: no refs of %s from reconcile (%+v)", root, refs)
		}
		if len(refs.Tags) == 0 {
			t.Errorf("%s: reconcile read no tags, want the checkpoint's pin", root)
		}
	}
	// A pin deleted behind retain's back: reconcile repairs it, so the
	// refs it read of that table are not the table's any more.
	ds, _ := lance.Open(s, "branch-tag.lance")
	for _, ct := range c.Tables {
		if ct.Path == "branch-tag.lance" {
			if err := ds.DeleteTag(bg, ct.Tag, ""); err != nil {
				t.Fatal(err)
			}
		}
	}
	rep, err = Reconcile(bg, s)
	if err != nil || len(rep.Repaired) != 1 {
		t.Fatalf("%v, %+v", err, rep)
	}
	if refs := rep.Refs("branch-tag.lance"); refs != nil {
		t.Errorf("reconcile repaired a pin of branch-tag.lance and still handed on the refs it read before: %+v", refs)
	}
	if rep.Refs("v2-appends.lance") == nil {
		t.Error("the untouched table's refs were not handed on")
	}
	if rep.Refs("absent.lance") != nil {
		t.Error("refs of a table reconcile never read")
	}
}
