package tag

import (
	"errors"
	"strings"
	"testing"

	"github.com/retain-dev/retain/core/lance"
	"github.com/retain-dev/retain/core/storage"
)

// a tag file with a field retain does not know (a newer Lance) is
// rewritten by an update without it; branch files refuse such a rewrite
// (ErrBranchNotRewritable) but tag files silently drop the field.
func TestTagUpdateKeepsUnknownFields(t *testing.T) {
	ds, _ := tagFake(t, 2, nil)
	key, _ := ds.TagKey("m")
	body := "{\n  \"branch\": null,\n  \"version\": 2,\n  \"createdAt\": \"2026-11-30T14:11:24.450837934Z\",\n  \"updatedAt\": \"2026-11-30T14:11:24.450837934Z\",\n  \"manifestSize\": 102,\n  \"metadata\": {},\n  \"futureField\": {\"x\": 1}\n}"
	if _, err := ds.Store.PutBytes(tagCtx, key, []byte(body), storage.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	tags := New(ds, Options{})
	if _, err := tags.UpdateMeta(tagCtx, "m", MetaUpdate{Set: map[string]string{"a": "1"}}); !errors.Is(err, lance.ErrTagNotRewritable) {
		t.Fatalf("update of a tag with unknown fields: %v (want ErrTagNotRewritable)", err)
	}
	if after := string(tagBody(t, ds, "m")); !strings.Contains(after, "futureField") {
		t.Fatalf("the update dropped a field it does not know:\n%s", after)
	}
}

// On a store with replace-if-version but no delete-if-version, Delete takes
// the mark-then-delete path, which now always rewrites the tag with
// UpdateTagFile. UpdateTagFile refuses a tag carrying a field Lance 12 does
// not write (ErrTagNotRewritable), so such a tag (written by a newer Lance)
// can never be deleted by retain on that store — although deleting drops
// nothing the user would want kept.
func TestMarkedDeleteOfTagWithUnknownField(t *testing.T) {
	none := storage.Capability{Level: storage.LevelNone, Reason: "no conditional delete"}
	ds, _ := tagFake(t, 2, func(c *storage.Capabilities) { c.DeleteIfVersion = none })
	key, _ := ds.TagKey("m")
	body := "{\n  \"branch\": null,\n  \"version\": 2,\n  \"createdAt\": \"2026-11-30T14:11:24.450837934Z\",\n  \"updatedAt\": \"2026-11-30T14:11:24.450837934Z\",\n  \"manifestSize\": 102,\n  \"metadata\": {},\n  \"futureField\": {\"x\": 1}\n}"
	if _, err := ds.Store.PutBytes(tagCtx, key, []byte(body), storage.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	tags := New(ds, Options{})
	_, err := tags.Delete(tagCtx, "m", "")
	t.Logf("delete: %v", err)
	if errors.Is(err, lance.ErrTagNotRewritable) || tagBody(t, ds, "m") != nil {
		t.Fatalf("a tag with a field retain does not know cannot be deleted on a store without delete-if-version: %v", err)
	}
}
