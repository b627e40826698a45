package storage_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/memstore"
	"github.com/retain-dev/retain/core/storage/storagetest"
)

// roDriver declares itself read-only but, were a write to reach it, would
// perform it (counting it in writes): the portable Store must refuse first.
func roDriver(d storage.Driver, writes *int) storage.Driver {
	counted := storagetest.NewHook(d).Before(func(c storagetest.Call) error {
		switch c.Op {
		case storagetest.OpPut, storagetest.OpDelete, storagetest.OpDeleteMany, storagetest.OpGate:
			*writes++
		}
		return nil
	})
	return &storagetest.Caps{Driver: counted, Edit: func(c *storage.Capabilities) { c.ReadOnly = true }}
}

func TestStoreRefusesWritesWhenReadOnly(t *testing.T) {
	ctx := context.Background()
	mem := memstore.New()
	if _, err := mem.Put(ctx, "a", strings.NewReader("x"), storage.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	writes := 0
	s, err := storage.NewStore(ctx, "ro", roDriver(mem, &writes))
	if err != nil {
		t.Fatal(err)
	}
	if !s.ReadOnly() {
		t.Fatal("Store.ReadOnly is false for a driver that declared read-only")
	}
	ro := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, storage.ErrPermissionDenied) || !strings.Contains(err.Error(), "store opened read-only") {
			t.Errorf("%s: want permission denied (store opened read-only), got %v", what, err)
		}
	}
	_, err = s.PutBytes(ctx, "b", []byte("y"), storage.PutOptions{})
	ro("put", err)
	_, err = s.PutBytes(ctx, "b", []byte("y"), storage.PutOptions{Mode: storage.PutCreateIfAbsent})
	ro("put create-if-absent", err)
	ro("delete", s.Delete(ctx, "a", storage.DeleteOptions{}))
	res, err := s.DeleteMany(ctx, []string{"a", "c"})
	ro("delete-many", err)
	if len(res) != 2 {
		t.Fatalf("delete-many: %d results for 2 keys", len(res))
	}
	for _, r := range res {
		ro("delete-many result "+r.Key, r.Err)
	}
	caps := s.Capabilities()
	var gates []string
	for _, g := range caps.Gates {
		gates = append(gates, g.Name)
	}
	if len(gates) == 0 {
		gates = []string{"any"}
	}
	ro("gates", s.WithGates(ctx, storage.ScopeProcess, gates, func(context.Context) error {
		t.Error("gate body ran on a read-only store")
		return nil
	}))
	if writes != 0 {
		t.Errorf("%d writes reached the driver", writes)
	}
	// Reads still work.
	if b, _, err := s.ReadAll(ctx, "a"); err != nil || string(b) != "x" {
		t.Errorf("read: %q, %v", b, err)
	}
	if l, err := s.List(ctx, "", 0); err != nil || len(l) != 1 {
		t.Errorf("list: %v, %v", l, err)
	}
}

func TestLocationReadOnlyIsNotAURIOption(t *testing.T) {
	loc, err := storage.ParseLocation("s3://b/p?read_only=true")
	if err != nil {
		t.Fatal(err)
	}
	if loc.ReadOnly {
		t.Error("a query option set Location.ReadOnly")
	}
	want := loc.String()
	loc.ReadOnly = true
	if got := loc.String(); got != want {
		t.Errorf("String rendered ReadOnly: %s, want %s", got, want)
	}
}
