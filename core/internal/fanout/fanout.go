// Package fanout runs the per-table (or per-object) steps of a store-wide
// operation side by side. It bounds goroutines, not requests: every
// request already takes a slot of its Store's limiter (storage.Store), so
// fan-outs nested inside fan-outs never put more than the store's
// parallelism in flight.
package fanout

import (
	"context"
	"errors"
	"sync"
)

// Each calls fn(ctx, i) for every i in [0, n), at most limit at a time
// (limit < 1 means 1), and waits for all of them. The first failure
// cancels the context the others see. Each returns the error of the lowest
// index that failed for a reason of its own rather than because of that
// cancellation, so the error a caller reports does not depend on timing.
func Each(ctx context.Context, limit, n int, fn func(ctx context.Context, i int) error) error {
	if n == 0 {
		return ctx.Err()
	}
	limit = max(1, min(limit, n))
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	errs := make([]error, n)
	next := make(chan int)
	var wg sync.WaitGroup
	for range limit {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := fn(ctx, i); err != nil {
					errs[i] = err
					cancel(errFailed)
				}
			}
		}()
	}
feed:
	for i := range n {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	var induced error
	for _, err := range errs {
		if err == nil {
			continue
		}
		if context.Cause(ctx) == errFailed && errors.Is(err, context.Canceled) {
			if induced == nil {
				induced = err
			}
			continue
		}
		return err
	}
	if induced != nil {
		return induced
	}
	return context.Cause(ctx)
}

var errFailed = errors.New("fanout: another step failed")

// Map is Each collecting fn's results in index order.
func Map[T any](ctx context.Context, limit, n int, fn func(ctx context.Context, i int) (T, error)) ([]T, error) {
	out := make([]T, n)
	err := Each(ctx, limit, n, func(ctx context.Context, i int) error {
		v, err := fn(ctx, i)
		out[i] = v
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
