package testkit

import (
	"context"
	"io"
	"sync/atomic"

	"github.com/retain-dev/retain/sdk/core"
)

// Counting wraps a driver and counts the requests that reach it, one per
// call (a DeleteMany is one request, as a batch delete is on a backend).
// Request counts are deterministic where wall time is not, so benchmarks
// and tests assert on them.
type Counting struct {
	core.Driver
	gets, stats, puts, deletes, batches, lists, gates atomic.Int64
}

// NewCounting wraps d.
func NewCounting(d core.Driver) *Counting { return &Counting{Driver: d} }

// Counts is a snapshot of the counters.
type Counts struct {
	Get, Stat, Put, Delete, DeleteMany, List, Gate int64
}

// Total is every request counted.
func (c Counts) Total() int64 {
	return c.Get + c.Stat + c.Put + c.Delete + c.DeleteMany + c.List + c.Gate
}

// Counts returns the counters so far.
func (c *Counting) Counts() Counts {
	return Counts{Get: c.gets.Load(), Stat: c.stats.Load(), Put: c.puts.Load(), Delete: c.deletes.Load(),
		DeleteMany: c.batches.Load(), List: c.lists.Load(), Gate: c.gates.Load()}
}

func (c *Counting) Get(ctx context.Context, key string) (*core.Reader, error) {
	c.gets.Add(1)
	return c.Driver.Get(ctx, key)
}

func (c *Counting) Stat(ctx context.Context, key string) (core.Info, error) {
	c.stats.Add(1)
	return c.Driver.Stat(ctx, key)
}

func (c *Counting) Put(ctx context.Context, key string, body io.Reader, opts core.PutOptions) (core.Info, error) {
	c.puts.Add(1)
	return c.Driver.Put(ctx, key, body, opts)
}

func (c *Counting) Delete(ctx context.Context, key string, opts core.DeleteOptions) error {
	c.deletes.Add(1)
	return c.Driver.Delete(ctx, key, opts)
}

func (c *Counting) DeleteMany(ctx context.Context, keys []string) ([]core.DeleteResult, error) {
	c.batches.Add(1)
	return c.Driver.DeleteMany(ctx, keys)
}

func (c *Counting) List(ctx context.Context, opts core.ListOptions) (core.ListPage, error) {
	c.lists.Add(1)
	return c.Driver.List(ctx, opts)
}

func (c *Counting) AcquireGate(ctx context.Context, name string) (core.GateLease, error) {
	c.gates.Add(1)
	return c.Driver.AcquireGate(ctx, name)
}

func (c *Counting) ReleaseGate(ctx context.Context, l core.GateLease) error {
	c.gates.Add(1)
	return c.Driver.ReleaseGate(ctx, l)
}
