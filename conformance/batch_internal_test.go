package conformance

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/memstore"
)

// batchMem is memstore with batch reads made of its single calls, and a
// way to make them lie.
type batchMem struct {
	*memstore.Driver
	lie func(stats []storage.StatResult, gets []storage.GetResult) ([]storage.StatResult, []storage.GetResult)
}

func (d *batchMem) StatMany(ctx context.Context, keys []string) ([]storage.StatResult, error) {
	res, err := storage.StatEach(ctx, d, keys)
	if err == nil && d.lie != nil {
		res, _ = d.lie(res, nil)
	}
	return res, err
}

func (d *batchMem) GetMany(ctx context.Context, keys []string, maxBytes int64) ([]storage.GetResult, error) {
	res, err := storage.GetEach(ctx, d, keys, maxBytes)
	if err == nil && d.lie != nil {
		_, res = d.lie(nil, res)
	}
	return res, err
}

func runBatchCase(t *testing.T, d storage.Driver) (failed bool, reason string) {
	t.Helper()
	s, err := storage.NewStore(context.Background(), "batchmem", d)
	if err != nil {
		t.Fatal(err)
	}
	ct := &caseT{}
	ct.run(func(inner T) { testBatchReads(inner, s) })
	return ct.failed, ct.reason
}

func TestBatchReadsCase(t *testing.T) {
	if failed, reason := runBatchCase(t, memstore.New()); failed {
		t.Fatalf("memstore without batch reads (the store's fallback): %s", reason)
	}
	if failed, reason := runBatchCase(t, &batchMem{Driver: memstore.New()}); failed {
		t.Fatalf("honest batch reads: %s", reason)
	}
	lies := map[string]func([]storage.StatResult, []storage.GetResult) ([]storage.StatResult, []storage.GetResult){
		"a stale version": func(st []storage.StatResult, g []storage.GetResult) ([]storage.StatResult, []storage.GetResult) {
			for i := range st {
				if st[i].Err == nil {
					st[i].Info.Version += "-stale"
				}
			}
			return st, g
		},
		"a missing key found": func(st []storage.StatResult, g []storage.GetResult) ([]storage.StatResult, []storage.GetResult) {
			for i := range g {
				if strings.HasSuffix(g[i].Key, "missing") {
					g[i] = storage.GetResult{Key: g[i].Key, Info: storage.Info{Key: g[i].Key, Version: "v"}, Data: []byte{}}
				}
			}
			return st, g
		},
		"a body unlike the object's": func(st []storage.StatResult, g []storage.GetResult) ([]storage.StatResult, []storage.GetResult) {
			for i := range g {
				if len(g[i].Data) > 0 {
					g[i].Data = bytes.Repeat([]byte{'z'}, len(g[i].Data)) // right size, wrong bytes
				}
			}
			return st, g
		},
		"past the byte bound": func(st []storage.StatResult, g []storage.GetResult) ([]storage.StatResult, []storage.GetResult) {
			// Answering every key of a bounded call: the bound ignored.
			return st, g
		},
	}
	for name, lie := range lies {
		t.Run(name, func(t *testing.T) {
			d := &batchMem{Driver: memstore.New(), lie: lie}
			if name == "past the byte bound" {
				d.lie = nil
				d2 := &boundless{batchMem: d}
				failed, reason := runBatchCase(t, d2)
				if !failed {
					t.Fatal("the case passed a GetMany that ignores its byte bound")
				}
				t.Log(reason)
				return
			}
			failed, reason := runBatchCase(t, d)
			if !failed {
				t.Fatalf("the case passed batch reads that lie with %s", name)
			}
			t.Log(reason)
		})
	}
}

// boundless answers every key of a GetMany, whatever its bound.
type boundless struct{ *batchMem }

func (d *boundless) GetMany(ctx context.Context, keys []string, _ int64) ([]storage.GetResult, error) {
	return storage.GetEach(ctx, d, keys, 1<<40)
}
