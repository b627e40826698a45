package core_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/retain-dev/retain/core"
	"github.com/retain-dev/retain/core/memstore"
)

// roDriver declares itself read-only but, were a write to reach it, would
// perform it: the portable Store must refuse first.
type roDriver struct {
	*memstore.Driver
	writes int
}

func (d *roDriver) Capabilities(ctx context.Context) (core.Capabilities, error) {
	c, err := d.Driver.Capabilities(ctx)
	c.ReadOnly = true
	return c, err
}

func (d *roDriver) Put(ctx context.Context, key string, body io.Reader, opts core.PutOptions) (core.Info, error) {
	d.writes++
	return d.Driver.Put(ctx, key, body, opts)
}

func (d *roDriver) Delete(ctx context.Context, key string, opts core.DeleteOptions) error {
	d.writes++
	return d.Driver.Delete(ctx, key, opts)
}

func (d *roDriver) DeleteMany(ctx context.Context, keys []string) ([]core.DeleteResult, error) {
	d.writes++
	return d.Driver.DeleteMany(ctx, keys)
}

func (d *roDriver) AcquireGate(ctx context.Context, name string) (core.GateLease, error) {
	d.writes++
	return d.Driver.AcquireGate(ctx, name)
}

func TestStoreRefusesWritesWhenReadOnly(t *testing.T) {
	ctx := context.Background()
	mem := memstore.New()
	if _, err := mem.Put(ctx, "a", strings.NewReader("x"), core.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	d := &roDriver{Driver: mem}
	s, err := core.NewStore(ctx, "ro", d)
	if err != nil {
		t.Fatal(err)
	}
	if !s.ReadOnly() {
		t.Fatal("Store.ReadOnly is false for a driver that declared read-only")
	}
	ro := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, core.ErrPermissionDenied) || !strings.Contains(err.Error(), "store opened read-only") {
			t.Errorf("%s: want permission denied (store opened read-only), got %v", what, err)
		}
	}
	_, err = s.PutBytes(ctx, "b", []byte("y"), core.PutOptions{})
	ro("put", err)
	_, err = s.PutBytes(ctx, "b", []byte("y"), core.PutOptions{Mode: core.PutCreateIfAbsent})
	ro("put create-if-absent", err)
	ro("delete", s.Delete(ctx, "a", core.DeleteOptions{}))
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
	ro("gates", s.WithGates(ctx, core.ScopeProcess, gates, func(context.Context) error {
		t.Error("gate body ran on a read-only store")
		return nil
	}))
	if d.writes != 0 {
		t.Errorf("%d writes reached the driver", d.writes)
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
	loc, err := core.ParseLocation("s3://b/p?read_only=true")
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
