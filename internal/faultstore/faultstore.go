// Package faultstore wraps a storage driver and injects the faults a real
// object store shows: requests that fail before they reach the backend,
// requests whose response is lost after the backend applied them (a
// timeout), and latency spikes. It is test tooling: the proofs that
// cleanup loses nothing pinned and stops only with typed, resumable errors
// run through it.
//
// Faults are drawn from a seeded source, so a failing seed replays the
// same sequence of decisions (goroutines may interleave differently).
package faultstore

import (
	"context"
	"io"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/retain-dev/retain/core/storage"
)

// Config sets the fault rates, each a probability per request.
type Config struct {
	Seed uint64
	// ErrorRate: the request fails before reaching the backend
	// (storage.ErrTransient); nothing was applied.
	ErrorRate float64
	// TimeoutRate: the request is applied, then its response is lost after
	// a delay (storage.ErrTransient, "timeout"): the caller cannot know.
	TimeoutRate float64
	// SpikeRate: the request is delayed by up to MaxSpike, then succeeds.
	SpikeRate float64
	MaxSpike  time.Duration
}

// Default is 5 % of requests failing, timing out or slowed down: about
// 1.7 % each.
func Default(seed uint64) Config {
	return Config{Seed: seed, ErrorRate: 0.017, TimeoutRate: 0.017, SpikeRate: 0.016, MaxSpike: 20 * time.Millisecond}
}

// Store is a faulty driver.
type Store struct {
	storage.Driver
	cfg     Config
	mu      sync.Mutex
	rng     *rand.Rand
	enabled atomic.Bool
	// Counts of injected faults.
	Errors, Timeouts, Spikes atomic.Int64
}

// Wrap wraps d; faults start enabled.
func Wrap(d storage.Driver, cfg Config) *Store {
	s := &Store{Driver: d, cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15))}
	s.enabled.Store(true)
	return s
}

// SetEnabled turns the faults on or off.
func (s *Store) SetEnabled(on bool) { s.enabled.Store(on) }

type fault int

const (
	none fault = iota
	errBefore
	timeoutAfter
	spike
)

func (s *Store) draw() (fault, time.Duration) {
	if !s.enabled.Load() {
		return none, 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	x := s.rng.Float64()
	d := time.Duration(s.rng.Int64N(int64(max(s.cfg.MaxSpike, time.Millisecond))))
	switch {
	case x < s.cfg.ErrorRate:
		s.Errors.Add(1)
		return errBefore, 0
	case x < s.cfg.ErrorRate+s.cfg.TimeoutRate:
		s.Timeouts.Add(1)
		return timeoutAfter, d
	case x < s.cfg.ErrorRate+s.cfg.TimeoutRate+s.cfg.SpikeRate:
		s.Spikes.Add(1)
		return spike, d
	}
	return none, 0
}

// do runs one request under a drawn fault.
func do[T any](s *Store, ctx context.Context, op, key string, call func() (T, error)) (T, error) {
	f, d := s.draw()
	var zero T
	switch f {
	case errBefore:
		return zero, storage.Errorf(op, key, storage.ErrTransient, "injected fault: connection reset before the request was sent")
	case spike:
		sleep(ctx, d)
	}
	v, err := call()
	if f == timeoutAfter {
		sleep(ctx, d)
		if c, ok := any(v).(*storage.Reader); ok && c != nil {
			c.Close()
		}
		return zero, storage.Errorf(op, key, storage.ErrTransient, "injected fault: timed out waiting for the response (the request may have been applied)")
	}
	return v, err
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

func (s *Store) Get(ctx context.Context, key string) (*storage.Reader, error) {
	return do(s, ctx, "get", key, func() (*storage.Reader, error) { return s.Driver.Get(ctx, key) })
}

func (s *Store) Stat(ctx context.Context, key string) (storage.Info, error) {
	return do(s, ctx, "stat", key, func() (storage.Info, error) { return s.Driver.Stat(ctx, key) })
}

func (s *Store) Put(ctx context.Context, key string, body io.Reader, opts storage.PutOptions) (storage.Info, error) {
	return do(s, ctx, "put", key, func() (storage.Info, error) { return s.Driver.Put(ctx, key, body, opts) })
}

func (s *Store) Delete(ctx context.Context, key string, opts storage.DeleteOptions) error {
	_, err := do(s, ctx, "delete", key, func() (struct{}, error) { return struct{}{}, s.Driver.Delete(ctx, key, opts) })
	return err
}

func (s *Store) DeleteMany(ctx context.Context, keys []string) ([]storage.DeleteResult, error) {
	return do(s, ctx, "delete-many", "", func() ([]storage.DeleteResult, error) { return s.Driver.DeleteMany(ctx, keys) })
}

func (s *Store) List(ctx context.Context, opts storage.ListOptions) (storage.ListPage, error) {
	return do(s, ctx, "list", opts.Prefix, func() (storage.ListPage, error) { return s.Driver.List(ctx, opts) })
}
