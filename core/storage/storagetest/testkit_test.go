package storagetest

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/memstore"
)

var bg = context.Background()

// Once runs its function ahead of the first matching call only; After's
// error replaces a put's answer.
func TestHookOnceAndAfter(t *testing.T) {
	h := NewHook(memstore.New())
	n := 0
	h.Before(Once(PutOf("a"), func() { n++ }))
	MustPut(t, h, "b", "x")
	MustPut(t, h, "a", "x")
	MustPut(t, h, "a", "y")
	if n != 1 {
		t.Fatalf("the once hook ran %d times", n)
	}
	h.After(func(c Call, err error) error {
		if c.Op == OpPut && err == nil {
			return Injected(c.Op, c.Key, storage.ErrTransient)
		}
		return err
	})
	info, err := h.Put(bg, "c", strings.NewReader("x"), storage.PutOptions{})
	WantKind(t, "lost put", err, storage.ErrTransient)
	if info.Version != "" {
		t.Fatalf("a lost put answered %+v", info)
	}
	if _, err := h.Stat(bg, "c"); err != nil {
		t.Fatalf("the put behind the lost answer did not land: %v", err)
	}
}

// A whole-batch failure deletes nothing; a per-key one deletes the rest.
func TestFailDeletes(t *testing.T) {
	mem := memstore.New()
	for _, k := range []string{"p/a", "q/b"} {
		MustPut(t, mem, k, "x")
	}
	f := &Fail{Driver: mem, Kind: storage.ErrPermissionDenied, Deletes: Prefix("p/")}
	if _, err := f.DeleteMany(bg, []string{"p/a", "q/b"}); !errors.Is(err, ErrInjected) {
		t.Fatalf("whole batch: %v", err)
	}
	if _, err := mem.Stat(bg, "q/b"); err != nil {
		t.Fatalf("a failed batch deleted q/b: %v", err)
	}
	f.PerKey = true
	res, err := f.DeleteMany(bg, []string{"p/a", "q/b"})
	if err != nil || len(res) != 2 || res[1].Err != nil {
		t.Fatalf("per key: %+v %v", res, err)
	}
	WantKind(t, "p/a", res[0].Err, storage.ErrPermissionDenied)
	if _, err := mem.Stat(bg, "p/a"); err != nil {
		t.Fatalf("p/a was deleted: %v", err)
	}
}
