package fanout

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

func TestEachBoundsAndCompletes(t *testing.T) {
	var running, peak, done atomic.Int64
	err := Each(context.Background(), 3, 20, func(ctx context.Context, i int) error {
		n := running.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		time.Sleep(5 * time.Millisecond)
		running.Add(-1)
		done.Add(1)
		return nil
	})
	if err != nil || done.Load() != 20 || peak.Load() != 3 {
		t.Fatalf("err %v, done %d, peak %d: want nil, 20, 3", err, done.Load(), peak.Load())
	}
}

// The error reported is the lowest index's own failure, never the
// cancellation that failure caused in a step with a lower index.
func TestEachReportsTheRealFailure(t *testing.T) {
	for range 20 {
		err := Each(context.Background(), 8, 8, func(ctx context.Context, i int) error {
			if i == 5 {
				return fmt.Errorf("step %d broke", i)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Second):
				return nil
			}
		})
		if err == nil || err.Error() != "step 5 broke" {
			t.Fatalf("got %v, want step 5's own error", err)
		}
	}
}

func TestEachLowestIndexWins(t *testing.T) {
	err := Each(context.Background(), 8, 8, func(ctx context.Context, i int) error {
		time.Sleep(time.Duration(8-i) * time.Millisecond) // higher indexes fail first
		return fmt.Errorf("step %d", i)
	})
	if err == nil || err.Error() != "step 0" {
		t.Fatalf("got %v, want step 0", err)
	}
}

func TestEachParentCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var ran atomic.Int64
	err := Each(ctx, 1, 100, func(ctx context.Context, i int) error {
		if ran.Add(1) == 3 {
			cancel()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) || ran.Load() >= 100 {
		t.Fatalf("err %v after %d steps: want context.Canceled, early", err, ran.Load())
	}
}

func TestMapKeepsOrder(t *testing.T) {
	out, err := Map(context.Background(), 4, 10, func(ctx context.Context, i int) (int, error) {
		time.Sleep(time.Duration(10-i) * time.Millisecond)
		return i * i, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range out {
		if v != i*i {
			t.Fatalf("out[%d] = %d", i, v)
		}
	}
}
