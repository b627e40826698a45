package refs

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retain-dev/retain/core"
	"github.com/retain-dev/retain/core/lance"
	"github.com/retain-dev/retain/core/memstore"
)

// mark, then delete (no delete-if-version). A delete that finds the
// tag already marked (an interrupted delete, or another deleter between its
// mark and its delete) skips the mark and deletes unconditionally. If the
// other deleter finishes and a new tag of the same name is created in
// between, the unconditional delete removes the NEW tag — a state it never
// read, created by a create that reported success.
func TestMarkedDeleteKeepsTagCreatedAfter(t *testing.T) {
	none := core.Capability{Level: core.LevelNone, Reason: "no conditional delete"}
	ds, d := tagFake(t, 2, func(c *core.Capabilities) { c.DeleteIfVersion = none })
	tags := NewTags(ds, TagOptions{})
	if _, err := tags.Create(tagCtx, "m", CreateTagOptions{Version: 1, Metadata: map[string]string{"who": "old"}}); err != nil {
		t.Fatal(err)
	}
	// An interrupted delete leaves the tag marked.
	d.failDelete = true
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
		if _, err := tags.Create(tagCtx, "m", CreateTagOptions{Version: 2, Metadata: map[string]string{"who": "new"}}); err != nil {
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

// putHookDriver runs before, once, ahead of the first put matching match.
type putHookDriver struct {
	*tagCapsDriver
	mu     sync.Mutex
	match  func(key string, o core.PutOptions) bool
	before func()
}

func (d *putHookDriver) Put(ctx context.Context, key string, body io.Reader, o core.PutOptions) (core.Info, error) {
	d.mu.Lock()
	var fn func()
	if d.match != nil && d.match(key, o) {
		fn, d.match = d.before, nil
	}
	d.mu.Unlock()
	if fn != nil {
		fn()
	}
	return d.tagCapsDriver.Put(ctx, key, body, o)
}

// a store with delete-if-version but without replace-if-version
// (at the scope asked). Update then runs under the gates (stat, compare,
// overwrite), but delete takes the native delete-if-version path WITHOUT
// the gates. A delete landing between the gated update's compare and its
// overwrite is not excluded: the overwrite re-creates the deleted tag.
func TestGatedUpdateNeverRevivesDeletedTag(t *testing.T) {
	none := core.Capability{Level: core.LevelNone, Reason: "no conditional replace"}
	d := &putHookDriver{tagCapsDriver: &tagCapsDriver{Driver: memstore.New(), edit: func(c *core.Capabilities) { c.ReplaceIfVersion = none }}}
	s, err := core.NewStore(tagCtx, "memory", d)
	if err != nil {
		t.Fatal(err)
	}
	ds, err := lance.Open(s, "t.lance")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutBytes(tagCtx, ds.Key("_versions/"+lance.ManifestName(1, lance.NamingV2)), make([]byte, 101), core.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	tags := NewTags(ds, TagOptions{Gates: []string{memstore.GateMetadata}})
	if _, err := tags.Create(tagCtx, "m", CreateTagOptions{Metadata: map[string]string{"a": "1"}}); err != nil {
		t.Fatal(err)
	}
	key, _ := ds.TagKey("m")
	var delErr error
	delDone := make(chan struct{})
	updated := make(chan struct{})
	d.match = func(k string, o core.PutOptions) bool { return k == key && o.Mode == core.PutOverwrite }
	d.before = func() {
		// Another process deletes the tag it read: it must wait for the
		// gates the update holds, so it cannot land between the update's
		// compare and its overwrite.
		go func() {
			defer close(delDone)
			_, delErr = NewTags(ds, TagOptions{Gates: []string{memstore.GateMetadata}}).Delete(tagCtx, "m", "")
		}()
		select {
		case <-delDone:
			t.Error("the delete did not wait for the gates the update holds")
		case <-time.After(200 * time.Millisecond):
		}
	}
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

// a tag file with a field retain does not know (a newer Lance) is
// rewritten by an update without it; branch files refuse such a rewrite
// (ErrBranchNotRewritable) but tag files silently drop the field.
func TestTagUpdateKeepsUnknownFields(t *testing.T) {
	ds, _ := tagFake(t, 2, nil)
	key, _ := ds.TagKey("m")
	body := "{\n  \"branch\": null,\n  \"version\": 2,\n  \"createdAt\": \"2026-11-30T14:11:24.450837934Z\",\n  \"updatedAt\": \"2026-11-30T14:11:24.450837934Z\",\n  \"manifestSize\": 102,\n  \"metadata\": {},\n  \"futureField\": {\"x\": 1}\n}"
	if _, err := ds.Store.PutBytes(tagCtx, key, []byte(body), core.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	tags := NewTags(ds, TagOptions{})
	if _, err := tags.UpdateMeta(tagCtx, "m", MetaUpdate{Set: map[string]string{"a": "1"}}); !errors.Is(err, lance.ErrTagNotRewritable) {
		t.Fatalf("update of a tag with unknown fields: %v (want ErrTagNotRewritable)", err)
	}
	if after := string(tagBody(t, ds, "m")); !strings.Contains(after, "futureField") {
		t.Fatalf("the update dropped a field it does not know:\n%s", after)
	}
}
