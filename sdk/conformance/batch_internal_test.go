package conformance

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/retain-dev/retain/sdk/core"
	"github.com/retain-dev/retain/sdk/memstore"
)

// batchMem is memstore with batch reads made of its single calls, and a
// way to make them lie.
type batchMem struct {
	*memstore.Driver
	lie func(stats []core.StatResult, gets []core.GetResult) ([]core.StatResult, []core.GetResult)
}

func (d *batchMem) StatMany(ctx context.Context, keys []string) ([]core.StatResult, error) {
	res, err := core.StatEach(ctx, d, keys)
	if err == nil && d.lie != nil {
		res, _ = d.lie(res, nil)
	}
	return res, err
}

func (d *batchMem) GetMany(ctx context.Context, keys []string, maxBytes int64) ([]core.GetResult, error) {
	res, err := core.GetEach(ctx, d, keys, maxBytes)
	if err == nil && d.lie != nil {
		_, res = d.lie(nil, res)
	}
	return res, err
}

func runBatchCase(t *testing.T, d core.Driver) (failed bool, reason string) {
	t.Helper()
	s, err := core.NewStore(context.Background(), "batchmem", d)
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
	lies := map[string]func([]core.StatResult, []core.GetResult) ([]core.StatResult, []core.GetResult){
		"a stale version": func(st []core.StatResult, g []core.GetResult) ([]core.StatResult, []core.GetResult) {
			for i := range st {
				if st[i].Err == nil {
					st[i].Info.Version += "-stale"
				}
			}
			return st, g
		},
		"a missing key found": func(st []core.StatResult, g []core.GetResult) ([]core.StatResult, []core.GetResult) {
			for i := range g {
				if strings.HasSuffix(g[i].Key, "missing") {
					g[i] = core.GetResult{Key: g[i].Key, Info: core.Info{Key: g[i].Key, Version: "v"}, Data: []byte{}}
				}
			}
			return st, g
		},
		"a body unlike the object's": func(st []core.StatResult, g []core.GetResult) ([]core.StatResult, []core.GetResult) {
			for i := range g {
				if len(g[i].Data) > 0 {
					g[i].Data = bytes.Repeat([]byte{'z'}, len(g[i].Data)) // right size, wrong bytes
				}
			}
			return st, g
		},
		"past the byte bound": func(st []core.StatResult, g []core.GetResult) ([]core.StatResult, []core.GetResult) {
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

func (d *boundless) GetMany(ctx context.Context, keys []string, _ int64) ([]core.GetResult, error) {
	return core.GetEach(ctx, d, keys, 1<<40)
}
