package tag

import (
	"testing"
	"time"

	"github.com/retain-dev/retain/core/lance"
	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/memstore"
	"github.com/retain-dev/retain/core/storage/storagetest"
)

// a store with delete-if-version but without replace-if-version
// (at the scope asked). Update then runs under the gates (stat, compare,
// overwrite), but delete takes the native delete-if-version path WITHOUT
// the gates. A delete landing between the gated update's compare and its
// overwrite is not excluded: the overwrite re-creates the deleted tag.
func TestGatedUpdateNeverRevivesDeletedTag(t *testing.T) {
	none := storage.Capability{Level: storage.LevelNone, Reason: "no conditional replace"}
	d := storagetest.NewHook(&storagetest.Caps{Driver: memstore.New(), Edit: func(c *storage.Capabilities) { c.ReplaceIfVersion = none }})
	s, err := storage.NewStore(tagCtx, "memory", d)
	if err != nil {
		t.Fatal(err)
	}
	ds, err := lance.Open(s, "t.lance")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutBytes(tagCtx, ds.Key("_versions/"+lance.ManifestName(1, lance.NamingV2)), make([]byte, 101), storage.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	tags := New(ds, Options{Gates: []string{memstore.GateMetadata}})
	if _, err := tags.Create(tagCtx, "m", CreateOptions{Metadata: map[string]string{"a": "1"}}); err != nil {
		t.Fatal(err)
	}
	key, _ := ds.TagKey("m")
	var delErr error
	delDone := make(chan struct{})
	updated := make(chan struct{})
	d.Before(storagetest.Once(func(c storagetest.Call) bool {
		return c.Op == storagetest.OpPut && c.Key == key && c.Put.Mode == storage.PutOverwrite
	}, func() {
		// Another process deletes the tag it read: it must wait for the
		// gates the update holds, so it cannot land between the update's
		// compare and its overwrite.
		go func() {
			defer close(delDone)
			_, delErr = New(ds, Options{Gates: []string{memstore.GateMetadata}}).Delete(tagCtx, "m", "")
		}()
		select {
		case <-delDone:
			t.Error("the delete did not wait for the gates the update holds")
		case <-time.After(200 * time.Millisecond):
		}
	}))
	res, err := tags.UpdateMeta(tagCtx, "m", MetaUpdate{Set: map[string]string{"a": "2"}})
	close(updated)
	<-delDone
	t.Logf("update: cas=%q err=%v; concurrent delete err=%v", res.CAS, err, delErr)
	if err != nil {
		t.Fatalf("update: %v", err)
	}
	if delErr == nil && tagBody(t, ds, "m") != nil {
		t.Fatal("the delete succeeded, yet the tag exists: an update revived a deleted tag")
	}
}

// A store with delete-if-version but no replace-if-version, and a --gate
// the store cannot provide at the scope: updates are refused (casVia), so
// no gated update can race a delete; yet Delete now holds the gates and
// fails on them, where the native delete-if-version needs no gate at all.
func TestDeleteWithUnusableGate(t *testing.T) {
	none := storage.Capability{Level: storage.LevelNone, Reason: "no conditional replace"}
	ds, _ := tagFake(t, 2, func(c *storage.Capabilities) { c.ReplaceIfVersion = none })
	if _, err := New(ds, Options{}).Create(tagCtx, "m", CreateOptions{Version: 1}); err != nil {
		t.Fatal(err)
	}
	tags := New(ds, Options{Gates: []string{"no-such-gate"}})
	_, uerr := tags.UpdateMeta(tagCtx, "m", MetaUpdate{Set: map[string]string{"a": "1"}})
	t.Logf("update with the gate: %v", uerr)
	_, err := tags.Delete(tagCtx, "m", "")
	if err != nil {
		t.Fatalf("delete-if-version delete refused because of a gate it does not need: %v", err)
	}
}
