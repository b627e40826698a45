package storagetest

import (
	"context"
	"errors"
	"io"
	"sync/atomic"

	"github.com/retain-dev/retain/core/storage"
)

// Counting wraps a driver and counts the requests that reach it, one per
// call (a DeleteMany is one request, as a batch delete is on a backend).
// Request counts are deterministic where wall time is not, so benchmarks
// and tests assert on them.
type Counting struct {
	storage.Driver
	gets, stats, puts, deletes, batches, lists, gates, batchReads atomic.Int64
}

var _ storage.BatchReader = (*Counting)(nil)

// NewCounting wraps d.
func NewCounting(d storage.Driver) *Counting { return &Counting{Driver: d} }

// Counts is a snapshot of the counters.
type Counts struct {
	Get, Stat, Put, Delete, DeleteMany, List, Gate int64
	// BatchRead counts StatMany and GetMany calls that reached a driver
	// with batch reads, one request each.
	BatchRead int64
}

// Total is every request counted.
func (c Counts) Total() int64 {
	return c.Get + c.Stat + c.Put + c.Delete + c.DeleteMany + c.List + c.Gate + c.BatchRead
}

// Counts returns the counters so far.
func (c *Counting) Counts() Counts {
	return Counts{Get: c.gets.Load(), Stat: c.stats.Load(), Put: c.puts.Load(), Delete: c.deletes.Load(),
		DeleteMany: c.batches.Load(), List: c.lists.Load(), Gate: c.gates.Load(),
		BatchRead: c.batchReads.Load()}
}

func (c *Counting) Get(ctx context.Context, key string) (*storage.Reader, error) {
	c.gets.Add(1)
	return c.Driver.Get(ctx, key)
}

func (c *Counting) Stat(ctx context.Context, key string) (storage.Info, error) {
	c.stats.Add(1)
	return c.Driver.Stat(ctx, key)
}

func (c *Counting) Put(ctx context.Context, key string, body io.Reader, opts storage.PutOptions) (storage.Info, error) {
	c.puts.Add(1)
	return c.Driver.Put(ctx, key, body, opts)
}

func (c *Counting) Delete(ctx context.Context, key string, opts storage.DeleteOptions) error {
	c.deletes.Add(1)
	return c.Driver.Delete(ctx, key, opts)
}

func (c *Counting) DeleteMany(ctx context.Context, keys []string) ([]storage.DeleteResult, error) {
	c.batches.Add(1)
	return c.Driver.DeleteMany(ctx, keys)
}

func (c *Counting) List(ctx context.Context, opts storage.ListOptions) (storage.ListPage, error) {
	c.lists.Add(1)
	return c.Driver.List(ctx, opts)
}

func (c *Counting) AcquireGate(ctx context.Context, name string) (storage.GateLease, error) {
	c.gates.Add(1)
	return c.Driver.AcquireGate(ctx, name)
}

func (c *Counting) ReleaseGate(ctx context.Context, l storage.GateLease) error {
	c.gates.Add(1)
	return c.Driver.ReleaseGate(ctx, l)
}

// StatMany and GetMany pass a batch to a driver that has batch reads, and
// answer ErrUnsupported for one that has none (the Store then reads key by
// key, each key counted as its own request). A batch the driver refuses
// as unsupported (a plugin client whose plugin has none, which answers
// without a request) is not counted.
func (c *Counting) StatMany(ctx context.Context, keys []string) ([]storage.StatResult, error) {
	br, ok := c.Driver.(storage.BatchReader)
	if !ok {
		return nil, storage.Errorf("stat-many", "", storage.ErrUnsupported, "the driver has no batch reads")
	}
	res, err := br.StatMany(ctx, keys)
	c.countBatch(err)
	return res, err
}

func (c *Counting) GetMany(ctx context.Context, keys []string, maxBytes int64) ([]storage.GetResult, error) {
	br, ok := c.Driver.(storage.BatchReader)
	if !ok {
		return nil, storage.Errorf("get-many", "", storage.ErrUnsupported, "the driver has no batch reads")
	}
	res, err := br.GetMany(ctx, keys, maxBytes)
	c.countBatch(err)
	return res, err
}

func (c *Counting) countBatch(err error) {
	if !errors.Is(err, storage.ErrUnsupported) {
		c.batchReads.Add(1)
	}
}
