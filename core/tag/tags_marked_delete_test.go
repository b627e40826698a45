package tag

import (
	"testing"

	"github.com/retain-dev/retain/core/storage"
)

// mark, then delete (no delete-if-version). A delete that finds the
// tag already marked (an interrupted delete, or another deleter between its
// mark and its delete) skips the mark and deletes unconditionally. If the
// other deleter finishes and a new tag of the same name is created in
// between, the unconditional delete removes the NEW tag — a state it never
// read, created by a create that reported success.
func TestMarkedDeleteKeepsTagCreatedAfter(t *testing.T) {
	none := storage.Capability{Level: storage.LevelNone, Reason: "no conditional delete"}
	ds, d := tagFake(t, 2, func(c *storage.Capabilities) { c.DeleteIfVersion = none })
	tags := New(ds, Options{})
	if _, err := tags.Create(tagCtx, "m", CreateOptions{Version: 1, Metadata: map[string]string{"who": "old"}}); err != nil {
		t.Fatal(err)
	}
	// An interrupted delete leaves the tag marked.
	failNextDelete(d)
	if _, err := tags.Delete(tagCtx, "m", ""); err == nil {
		t.Fatal("the injected failure did not stop the delete")
	}
	fired := false
	tagHookAfterRead = func(op string) {
		if fired || op != "delete-tag" {
			return
		}
		fired = true
		// Meanwhile another deleter finishes the marked tag ...
		if _, err := tags.Delete(tagCtx, "m", ""); err != nil {
			t.Errorf("the other delete: %v", err)
		}
		// ... and an agent creates a fresh tag of the same name.
		if _, err := tags.Create(tagCtx, "m", CreateOptions{Version: 2, Metadata: map[string]string{"who": "new"}}); err != nil {
			t.Errorf("the new create: %v", err)
		}
	}
	defer func() { tagHookAfterRead = nil }()
	res, err := tags.Delete(tagCtx, "m", "")
	t.Logf("slow delete: %+v, %v", res.Tag.Metadata, err)
	if tagBody(t, ds, "m") == nil {
		t.Fatal("a delete of the marked (old) state removed a tag created after it: the new tag's create succeeded and the tag is gone")
	}
}
