package tag

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retain-dev/retain/core/lance"
	"github.com/retain-dev/retain/core/refs/refmeta"
	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/memstore"
	"github.com/retain-dev/retain/core/storage/storagetest"
)

var tagCtx = context.Background()

// failNextDelete makes the next single delete through d fail (a crash
// between a delete's mark and its delete).
func failNextDelete(d *storagetest.Hook) {
	var once sync.Once
	d.Before(func(c storagetest.Call) error {
		var err error
		if c.Op == storagetest.OpDelete {
			once.Do(func() { err = storage.Errorf("delete", c.Key, storage.ErrTransient, "injected: the process died here") })
		}
		return err
	})
}

// tagFake is a dataset "t.lance" with manifests of versions 1..n (V2
// names, sizes 100+i) on memstore declaring the capabilities of another
// store (caps edited by edit): the core refuses what the declaration lacks,
// as it would on that store.
func tagFake(t *testing.T, n int, edit func(*storage.Capabilities)) (*lance.Dataset, *storagetest.Hook) {
	t.Helper()
	d := storagetest.NewHook(&storagetest.Caps{Driver: memstore.New(), Edit: edit})
	s, err := storage.NewStore(tagCtx, "memory", d)
	if err != nil {
		t.Fatal(err)
	}
	ds, err := lance.Open(s, "t.lance")
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= n; i++ {
		if _, err := s.PutBytes(tagCtx, ds.Key("_versions/"+lance.ManifestName(uint64(i), lance.NamingV2)), make([]byte, 100+i), storage.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return ds, d
}

func tagWantIs(t *testing.T, what string, err error, targets ...error) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: no error, want %v", what, targets)
	}
	for _, target := range targets {
		if !errors.Is(err, target) {
			t.Fatalf("%s: %v does not match %v", what, err, target)
		}
	}
}

func tagBody(t *testing.T, ds *lance.Dataset, name string) []byte {
	t.Helper()
	key, err := ds.TagKey(name)
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := ds.Store.ReadAll(tagCtx, key)
	if errors.Is(err, storage.ErrNotFound) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestTagLifecycle(t *testing.T) {
	ds, _ := tagFake(t, 3, nil)
	tags := New(ds, Options{})
	res, err := tags.Create(tagCtx, "mem-1", CreateOptions{Metadata: map[string]string{"session": "s1", "agent": "a"}})
	if err != nil {
		t.Fatal(err)
	}
	if tg := res.Tag; tg.Version != 3 || tg.Branch != "main" || tg.ManifestSize != 103 || tg.Metadata["session"] != "s1" ||
		tg.CreatedAt == nil || !tg.CreatedAt.Equal(*tg.UpdatedAt) || tg.Token == "" || !strings.Contains(res.CAS, "create-if-absent native") {
		t.Fatalf("create (head of main) = %+v", res)
	}
	if _, err := tags.Create(tagCtx, "mem-2", CreateOptions{Version: 1, Metadata: map[string]string{"session": "s2"}}); err != nil {
		t.Fatal(err)
	}
	before := tagBody(t, ds, "mem-1")
	_, err = tags.Create(tagCtx, "mem-1", CreateOptions{Version: 1})
	tagWantIs(t, "create of an existing tag", err, ErrTagExists, storage.ErrAlreadyExists)
	if !bytes.Equal(before, tagBody(t, ds, "mem-1")) {
		t.Fatal("a refused create rewrote the tag")
	}
	_, err = tags.Create(tagCtx, "mem-9", CreateOptions{Version: 9})
	tagWantIs(t, "create of a missing version", err, storage.ErrNotFound)
	_, err = tags.Create(tagCtx, "mem-9", CreateOptions{Metadata: map[string]string{"retain.x": "1"}})
	tagWantIs(t, "reserved metadata key", err, storage.ErrInvalidArgument)
	if tagBody(t, ds, "mem-9") != nil {
		t.Fatal("a refused create wrote a tag")
	}

	// List with a filter.
	all, err := tags.List(tagCtx, nil)
	if err != nil || len(all) != 2 || all[0].Name != "mem-1" || all[1].Name != "mem-2" {
		t.Fatalf("List = %+v, %v", all, err)
	}
	sel, err := tags.List(tagCtx, refmeta.Filter{"session": "s2"})
	if err != nil || len(sel) != 1 || sel[0].Name != "mem-2" || sel[0].Version != 1 {
		t.Fatalf("List(session=s2) = %+v, %v", sel, err)
	}

	// Update: set, unset; createdAt kept, updatedAt later.
	old, _ := tags.Show(tagCtx, "mem-1")
	time.Sleep(2 * time.Millisecond)
	up, err := tags.UpdateMeta(tagCtx, "mem-1", MetaUpdate{Set: map[string]string{"purpose": "debug"}, Unset: []string{"agent"}})
	if err != nil {
		t.Fatal(err)
	}
	got := up.Tag
	if len(got.Metadata) != 2 || got.Metadata["purpose"] != "debug" || got.Metadata["session"] != "s1" ||
		!got.CreatedAt.Equal(*old.CreatedAt) || !got.UpdatedAt.After(*old.UpdatedAt) || got.Version != 3 || got.ManifestSize != 103 || got.Token == old.Token {
		t.Fatalf("update: %+v (was %+v)", got, old)
	}
	shown, err := tags.Show(tagCtx, "mem-1")
	if err != nil || shown.Token != got.Token || !shown.UpdatedAt.Equal(*got.UpdatedAt) || shown.Metadata["purpose"] != "debug" {
		t.Fatalf("show after update = %+v, %v", shown, err)
	}
	// Replace.
	up, err = tags.UpdateMeta(tagCtx, "mem-1", MetaUpdate{Set: map[string]string{"only": "this"}, Replace: true})
	if err != nil || len(up.Tag.Metadata) != 1 || up.Tag.Metadata["only"] != "this" {
		t.Fatalf("replace = %+v, %v", up, err)
	}
	_, err = tags.UpdateMeta(tagCtx, "mem-1", MetaUpdate{})
	tagWantIs(t, "empty update", err, storage.ErrInvalidArgument)

	// A stale token: refused, nothing written.
	before = tagBody(t, ds, "mem-1")
	_, err = tags.UpdateMeta(tagCtx, "mem-1", MetaUpdate{Set: map[string]string{"x": "1"}, IfToken: old.Token})
	tagWantIs(t, "update with a stale token", err, ErrTagChanged, storage.ErrPreconditionFailed)
	_, err = tags.Delete(tagCtx, "mem-1", old.Token)
	tagWantIs(t, "delete with a stale token", err, ErrTagChanged, storage.ErrPreconditionFailed)
	if !bytes.Equal(before, tagBody(t, ds, "mem-1")) {
		t.Fatal("a refused update or delete changed the tag")
	}

	// Resolve.
	r, err := tags.Resolve(tagCtx, "mem-2")
	if err != nil || r.Branch != "main" || r.Version != 1 || !r.SizeMatches || r.ManifestSize != 101 ||
		r.ManifestKey != "_versions/"+lance.ManifestName(1, lance.NamingV2) {
		t.Fatalf("resolve = %+v, %v", r, err)
	}
	if err := ds.Store.Delete(tagCtx, ds.Key(r.ManifestKey), storage.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err = tags.Resolve(tagCtx, "mem-2")
	tagWantIs(t, "resolve of a dangling tag", err, ErrTagDangling, storage.ErrNotFound)

	// Delete, then nothing brings it back.
	cur, _ := tags.Show(tagCtx, "mem-1")
	del, err := tags.Delete(tagCtx, "mem-1", cur.Token)
	if err != nil || del.Tag.Token != cur.Token || !strings.Contains(del.CAS, "delete-if-version native") {
		t.Fatalf("delete = %+v, %v", del, err)
	}
	_, err = tags.UpdateMeta(tagCtx, "mem-1", MetaUpdate{Set: map[string]string{"x": "1"}})
	tagWantIs(t, "update after delete", err, ErrTagNotFound, storage.ErrNotFound)
	_, err = ds.UpdateTagFile(tagCtx, cur.Lance(), map[string]string{"x": "1"}, lance.UpdateTagOptions{})
	tagWantIs(t, "UpdateTagFile of the deleted state", err, ErrTagNotFound, storage.ErrNotFound)
	_, err = tags.Delete(tagCtx, "mem-1", "")
	tagWantIs(t, "second delete", err, ErrTagNotFound, storage.ErrNotFound)
	if tagBody(t, ds, "mem-1") != nil {
		t.Fatal("the deleted tag came back")
	}
}

// Tags on branches: the head of a branch, a version of it; resolve names
// the branch's manifest.
func TestTagOnBranch(t *testing.T) {
	ds, _ := tagFake(t, 2, nil)
	br, _ := ds.Branch("exp")
	for i := 3; i <= 4; i++ {
		if _, err := ds.Store.PutBytes(tagCtx, br.Key("_versions/"+lance.ManifestName(uint64(i), lance.NamingV2)), make([]byte, 200+i), storage.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Lance's branch file (a branch has one; a tag create on a branch
	// whose file is gone is refused, see TestTagOnGoingBranchRefused).
	if _, err := ds.Store.PutBytes(tagCtx, ds.Key("_refs/branches/exp.json"),
		[]byte(`{"parentBranch":null,"parentVersion":2,"createAt":1796047721,"manifestSize":102,"metadata":{}}`), storage.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	tags := New(ds, Options{})
	res, err := tags.Create(tagCtx, "b-head", CreateOptions{Branch: "exp"})
	if err != nil || res.Tag.Branch != "exp" || res.Tag.Version != 4 || res.Tag.ManifestSize != 204 {
		t.Fatalf("create at the branch head = %+v, %v", res, err)
	}
	r, err := tags.Resolve(tagCtx, "b-head")
	if err != nil || r.Branch != "exp" || r.ManifestKey != "tree/exp/_versions/"+lance.ManifestName(4, lance.NamingV2) {
		t.Fatalf("resolve = %+v, %v", r, err)
	}
	if _, err := tags.Create(tagCtx, "b-3", CreateOptions{Branch: "exp", Version: 3}); err != nil {
		t.Fatal(err)
	}
	_, err = tags.Create(tagCtx, "b-9", CreateOptions{Branch: "nope"})
	tagWantIs(t, "create on a missing branch", err, lance.ErrNotDataset)
}

// ogcp_ tags are checkpoint pins: shown and listed, never written here.
func TestTagReservedRefused(t *testing.T) {
	ds, _ := tagFake(t, 2, nil)
	pin := "ogcp_v1_x"
	if _, err := ds.CreateTag(tagCtx, pin, 1, map[string]string{"k": "v"}); err != nil {
		t.Fatal(err)
	}
	tags := New(ds, Options{})
	before := tagBody(t, ds, pin)
	_, err := tags.Create(tagCtx, "ogcp_new", CreateOptions{})
	tagWantIs(t, "create", err, ErrReservedTag, storage.ErrInvalidArgument)
	_, err = tags.UpdateMeta(tagCtx, pin, MetaUpdate{Set: map[string]string{"k": "w"}})
	tagWantIs(t, "update", err, ErrReservedTag, storage.ErrInvalidArgument)
	_, err = tags.Delete(tagCtx, pin, "")
	tagWantIs(t, "delete", err, ErrReservedTag, storage.ErrInvalidArgument)
	if !bytes.Equal(before, tagBody(t, ds, pin)) || tagBody(t, ds, "ogcp_new") != nil {
		t.Fatal("a reserved tag was written")
	}
	shown, err := tags.Show(tagCtx, pin)
	if err != nil || !shown.Reserved {
		t.Fatalf("show of a pin = %+v, %v", shown, err)
	}
	if _, err := tags.Resolve(tagCtx, pin); err != nil {
		t.Fatal(err)
	}
}

// Every capability level: what update and delete use, or refuse.
func TestTagCASLevels(t *testing.T) {
	none := storage.Capability{Level: storage.LevelNone, Reason: "not on this store"}
	seed := func(t *testing.T, edit func(*storage.Capabilities), o Options) (*Tags, *lance.Dataset, *storagetest.Hook, Ref) {
		t.Helper()
		ds, d := tagFake(t, 2, edit)
		tags := New(ds, o)
		res, err := tags.Create(tagCtx, "m", CreateOptions{Metadata: map[string]string{"a": "1"}})
		if err != nil {
			t.Fatal(err)
		}
		return tags, ds, d, res.Tag
	}

	t.Run("neither, no gates: refused, nothing written", func(t *testing.T) {
		tags, ds, _, _ := seed(t, func(c *storage.Capabilities) { c.ReplaceIfVersion, c.DeleteIfVersion = none, none }, Options{})
		before := tagBody(t, ds, "m")
		_, err := tags.UpdateMeta(tagCtx, "m", MetaUpdate{Set: map[string]string{"a": "2"}})
		tagWantIs(t, "update", err, storage.ErrUnsupported)
		if !strings.Contains(err.Error(), "replace-if-version") || !strings.Contains(err.Error(), "check-then-put") {
			t.Fatalf("the refusal does not say what is missing: %v", err)
		}
		_, err = tags.Delete(tagCtx, "m", "")
		tagWantIs(t, "delete", err, storage.ErrUnsupported)
		if !bytes.Equal(before, tagBody(t, ds, "m")) {
			t.Fatal("a refused write changed the tag")
		}
	})

	t.Run("host reach where global is needed: refused", func(t *testing.T) {
		host := storage.Capability{Level: storage.LevelGated, Gate: "stripe", Scope: storage.ScopeHost}
		tags, _, _, _ := seed(t, func(c *storage.Capabilities) { c.ReplaceIfVersion, c.DeleteIfVersion = host, host }, Options{Scope: storage.ScopeGlobal})
		_, err := tags.UpdateMeta(tagCtx, "m", MetaUpdate{Set: map[string]string{"a": "2"}})
		tagWantIs(t, "update", err, storage.ErrUnsupported)
		// The same store for writers of one host only: fine.
		tags = New(tags.Dataset(), Options{Scope: storage.ScopeHost})
		res, err := tags.UpdateMeta(tagCtx, "m", MetaUpdate{Set: map[string]string{"a": "2"}})
		if err != nil || !strings.Contains(res.CAS, "gated(stripe, host)") {
			t.Fatalf("update at host scope = %+v, %v", res, err)
		}
	})

	t.Run("neither, with gates: read-compare-write under the gate", func(t *testing.T) {
		tags, ds, _, first := seed(t, func(c *storage.Capabilities) { c.ReplaceIfVersion, c.DeleteIfVersion = none, none },
			Options{Gates: []string{memstore.GateMetadata}})
		res, err := tags.UpdateMeta(tagCtx, "m", MetaUpdate{Set: map[string]string{"a": "2"}})
		if err != nil || res.Tag.Metadata["a"] != "2" || !strings.Contains(res.CAS, "gates") {
			t.Fatalf("gated update = %+v, %v", res, err)
		}
		before := tagBody(t, ds, "m")
		_, err = tags.UpdateMeta(tagCtx, "m", MetaUpdate{Set: map[string]string{"a": "3"}, IfToken: first.Token})
		tagWantIs(t, "gated update with a stale token", err, ErrTagChanged)
		_, err = ds.UpdateTagFile(tagCtx, first.Lance(), map[string]string{"a": "3"}, lance.UpdateTagOptions{Gated: true})
		tagWantIs(t, "gated UpdateTagFile of a stale state", err, ErrTagChanged, storage.ErrPreconditionFailed)
		_, err = tags.Delete(tagCtx, "m", first.Token)
		tagWantIs(t, "gated delete with a stale token", err, ErrTagChanged)
		if !bytes.Equal(before, tagBody(t, ds, "m")) {
			t.Fatal("a refused gated write changed the tag")
		}
		del, err := tags.Delete(tagCtx, "m", "")
		if err != nil || !strings.Contains(del.CAS, "gates") || tagBody(t, ds, "m") != nil {
			t.Fatalf("gated delete = %+v, %v", del, err)
		}
		_, err = tags.UpdateMeta(tagCtx, "m", MetaUpdate{Set: map[string]string{"a": "4"}})
		tagWantIs(t, "gated update after delete", err, ErrTagNotFound)
		if tagBody(t, ds, "m") != nil {
			t.Fatal("a gated update revived the tag")
		}
		_, err = New(ds, Options{Gates: []string{"no-such-gate"}}).UpdateMeta(tagCtx, "m", MetaUpdate{Set: map[string]string{"a": "5"}})
		tagWantIs(t, "an undeclared gate", err, storage.ErrUnsupported)
	})

	t.Run("replace-if-version only: mark, then delete; an interrupted delete is finished", func(t *testing.T) {
		tags, ds, d, first := seed(t, func(c *storage.Capabilities) { c.DeleteIfVersion = none }, Options{})
		before := tagBody(t, ds, "m")
		_, err := tags.Delete(tagCtx, "m", "stale-token")
		tagWantIs(t, "delete with a stale token", err, ErrTagChanged)
		if !bytes.Equal(before, tagBody(t, ds, "m")) {
			t.Fatal("a refused delete marked the tag")
		}
		failNextDelete(d)
		_, err = tags.Delete(tagCtx, "m", first.Token)
		if err == nil {
			t.Fatal("the injected failure did not stop the delete")
		}
		shown, err := tags.Show(tagCtx, "m")
		if err != nil || !shown.Deleting || shown.Metadata["a"] != "1" {
			t.Fatalf("after the interrupted delete: %+v, %v", shown, err)
		}
		marked := tagBody(t, ds, "m")
		_, err = tags.UpdateMeta(tagCtx, "m", MetaUpdate{Set: map[string]string{"a": "2"}})
		tagWantIs(t, "update of a tag being deleted", err, ErrTagNotFound, storage.ErrNotFound)
		_, err = tags.Resolve(tagCtx, "m")
		tagWantIs(t, "resolve of a tag being deleted", err, ErrTagNotFound)
		if !bytes.Equal(marked, tagBody(t, ds, "m")) {
			t.Fatal("an update rewrote a marked tag")
		}
		del, err := tags.Delete(tagCtx, "m", "")
		if err != nil || !strings.Contains(del.CAS, "mark, then delete") || tagBody(t, ds, "m") != nil {
			t.Fatalf("finishing the delete = %+v, %v", del, err)
		}
		_, err = tags.UpdateMeta(tagCtx, "m", MetaUpdate{Set: map[string]string{"a": "3"}})
		tagWantIs(t, "update after delete", err, ErrTagNotFound)
	})
}

// Concurrent updates in one process through every CAS path: each update
// reads, increments a counter and writes with CAS; the counter ends equal
// to the number of successful updates (no lost update).
func TestTagConcurrentCounterInProcess(t *testing.T) {
	none := storage.Capability{Level: storage.LevelNone}
	for _, c := range []struct {
		name string
		edit func(*storage.Capabilities)
		o    Options
	}{
		{"native", nil, Options{}},
		{"gates", func(c *storage.Capabilities) { c.ReplaceIfVersion, c.DeleteIfVersion = none, none }, Options{Gates: []string{memstore.GateMetadata}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ds, _ := tagFake(t, 1, c.edit)
			tags := New(ds, c.o)
			if _, err := tags.Create(tagCtx, "ctr", CreateOptions{Metadata: map[string]string{"counter": "0"}}); err != nil {
				t.Fatal(err)
			}
			var wins, conflicts int
			var mu sync.Mutex
			var wg sync.WaitGroup
			for w := 0; w < 4; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < 50; i++ {
						err := tagIncrement(tags, "ctr")
						mu.Lock()
						switch {
						case err == nil:
							wins++
						case errors.Is(err, ErrTagChanged):
							conflicts++
						default:
							t.Error(err)
						}
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			final, err := tags.Show(tagCtx, "ctr")
			if err != nil {
				t.Fatal(err)
			}
			if got := final.Metadata["counter"]; got != tagItoa(wins) {
				t.Fatalf("counter %s after %d wins (%d conflicts): a lost update", got, wins, conflicts)
			}
		})
	}
}

// tagIncrement reads the tag and writes counter+1 conditional on what it
// read.
func tagIncrement(tags *Tags, name string) error {
	cur, err := tags.Show(tagCtx, name)
	if err != nil {
		return err
	}
	n := tagAtoi(cur.Metadata["counter"])
	_, err = tags.UpdateMeta(tagCtx, name, MetaUpdate{Set: map[string]string{"counter": tagItoa(n + 1)}, IfToken: cur.Token})
	return err
}

func tagItoa(n int) string { return strconv.Itoa(n) }

func tagAtoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		return -1 << 30 // a corrupt counter fails the checks
	}
	return n
}

// A tag create on a branch whose branch file is gone (a delete in
// progress) or marked deleting is refused and leaves no tag.
func TestTagOnGoingBranchRefused(t *testing.T) {
	ds, _ := tagFake(t, 2, nil)
	br, _ := ds.Branch("exp")
	if _, err := ds.Store.PutBytes(tagCtx, br.Key("_versions/"+lance.ManifestName(3, lance.NamingV2)), make([]byte, 203), storage.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	tags := New(ds, Options{})
	_, err := tags.Create(tagCtx, "orphan", CreateOptions{Branch: "exp"})
	tagWantIs(t, "a tag on a branch without its file", err, ErrBranchBeingDeleted, storage.ErrPreconditionFailed)
	if tagBody(t, ds, "orphan") != nil {
		t.Fatal("the refused tag was left behind")
	}
	if _, err := ds.Store.PutBytes(tagCtx, ds.Key("_refs/branches/exp.json"),
		[]byte(`{"parentBranch":null,"parentVersion":2,"createAt":1796047721,"manifestSize":102,"metadata":{"retain.state":"deleting","retain.op":"branch-delete-x","retain.source":"main@2","retain.at":"2026-11-30T00:00:00Z","retain.owner":"h/1/b/1"}}`), storage.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err = tags.Create(tagCtx, "late", CreateOptions{Branch: "exp"})
	tagWantIs(t, "a tag on a branch marked deleting", err, ErrBranchBeingDeleted)
	if tagBody(t, ds, "late") != nil {
		t.Fatal("the refused tag was left behind")
	}
}
