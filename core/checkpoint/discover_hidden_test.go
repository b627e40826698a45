package checkpoint

import (
	"context"
	"testing"

	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/memstore"
	"github.com/retain-dev/retain/core/storage/storagetest"
)

// hidingDriver hides one key from listings, as an adapter hides its own
// probe objects, without reading on: a page that held only that key comes
// back empty, claiming more.
type hidingDriver struct {
	storage.Driver
	hide string
}

func (h hidingDriver) List(ctx context.Context, opts storage.ListOptions) (storage.ListPage, error) {
	p, err := h.Driver.List(ctx, opts)
	var kept []storage.Info
	for _, o := range p.Objects {
		if o.Key != h.hide {
			kept = append(kept, o)
		}
	}
	p.Objects = kept
	return p, err
}

// Discovery never stops short: a listing page of nothing that claims more
// is refused, so no table after it is silently left out of a checkpoint
// (and then out of the cleanup's roots).
func TestDiscoveryRefusesAnEmptyPageThatClaimsMore(t *testing.T) {
	mem := memstore.New()
	for _, k := range []string{"a.lance/_versions/1.manifest", "b.probe", "c.lance/_versions/1.manifest"} {
		storagetest.MustPut(t, mem, k, "x")
	}
	d := &storagetest.Caps{Driver: hidingDriver{Driver: mem, hide: "b.probe"}, Edit: func(c *storage.Capabilities) { c.ListDelimiter = false }}
	s, err := storage.NewStore(context.Background(), "memory", d)
	if err != nil {
		t.Fatal(err)
	}
	tables, err := DiscoverTables(context.Background(), s)
	if err == nil {
		t.Fatalf("discovery returned %v after a page of nothing that claims more; want a refusal", tables)
	}
	t.Log(err)
}
