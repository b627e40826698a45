package refs

import (
	"errors"
	"testing"

	"github.com/retain-dev/retain/core"
	"github.com/retain-dev/retain/core/lance"
)

// On a store with replace-if-version but no delete-if-version, Delete takes
// the mark-then-delete path, which now always rewrites the tag with
// UpdateTagFile. UpdateTagFile refuses a tag carrying a field Lance 12 does
// not write (ErrTagNotRewritable), so such a tag (written by a newer Lance)
// can never be deleted by retain on that store — although deleting drops
// nothing the user would want kept.
func TestMarkedDeleteOfTagWithUnknownField(t *testing.T) {
	none := core.Capability{Level: core.LevelNone, Reason: "no conditional delete"}
	ds, _ := tagFake(t, 2, func(c *core.Capabilities) { c.DeleteIfVersion = none })
	key, _ := ds.TagKey("m")
	body := "{\n  \"branch\": null,\n  \"version\": 2,\n  \"createdAt\": \"2026-11-30T14:11:24.450837934Z\",\n  \"updatedAt\": \"2026-11-30T14:11:24.450837934Z\",\n  \"manifestSize\": 102,\n  \"metadata\": {},\n  \"futureField\": {\"x\": 1}\n}"
	if _, err := ds.Store.PutBytes(tagCtx, key, []byte(body), core.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	tags := NewTags(ds, TagOptions{})
	_, err := tags.Delete(tagCtx, "m", "")
	t.Logf("delete: %v", err)
	if errors.Is(err, lance.ErrTagNotRewritable) || tagBody(t, ds, "m") != nil {
		t.Fatalf("a tag with a field retain does not know cannot be deleted on a store without delete-if-version: %v", err)
	}
}

// A store with delete-if-version but no replace-if-version, and a --gate
// the store cannot provide at the scope: updates are refused (casVia), so
// no gated update can race a delete; yet Delete now holds the gates and
// fails on them, where the native delete-if-version needs no gate at all.
func TestDeleteWithUnusableGate(t *testing.T) {
	none := core.Capability{Level: core.LevelNone, Reason: "no conditional replace"}
	ds, _ := tagFake(t, 2, func(c *core.Capabilities) { c.ReplaceIfVersion = none })
	if _, err := NewTags(ds, TagOptions{}).Create(tagCtx, "m", CreateTagOptions{Version: 1}); err != nil {
		t.Fatal(err)
	}
	tags := NewTags(ds, TagOptions{Gates: []string{"no-such-gate"}})
	_, uerr := tags.UpdateMeta(tagCtx, "m", MetaUpdate{Set: map[string]string{"a": "1"}})
	t.Logf("update with the gate: %v", uerr)
	_, err := tags.Delete(tagCtx, "m", "")
	if err != nil {
		t.Fatalf("delete-if-version delete refused because of a gate it does not need: %v", err)
	}
}
