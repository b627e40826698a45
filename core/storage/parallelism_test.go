package storage_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/memstore"
	"github.com/retain-dev/retain/core/storage/storagetest"
)

// slowDriver answers Stat after a pause, counting the calls in flight.
type slowDriver struct {
	storage.Driver
	in, peak atomic.Int64
}

func (d *slowDriver) Stat(ctx context.Context, key string) (storage.Info, error) {
	n := d.in.Add(1)
	defer d.in.Add(-1)
	for p := d.peak.Load(); n > p && !d.peak.CompareAndSwap(p, n); p = d.peak.Load() {
	}
	time.Sleep(2 * time.Millisecond)
	return d.Driver.Stat(ctx, key)
}

// However many goroutines call it, a store never has more requests in
// flight than its parallelism, and its copies (At) share the bound.
func TestStoreBoundsRequestsInFlight(t *testing.T) {
	d := &slowDriver{Driver: memstore.New()}
	s, err := storage.NewStore(context.Background(), "memory", d)
	if err != nil {
		t.Fatal(err)
	}
	s = s.WithParallelism(3)
	other := s.At(storage.Location{Scheme: "mem", Path: "x"})
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st := s
			if i%2 == 1 {
				st = other
			}
			st.Stat(context.Background(), "k")
		}()
	}
	wg.Wait()
	if p := d.peak.Load(); p != 3 {
		t.Fatalf("peak in flight %d, want 3", p)
	}
	if s.Parallelism() != 3 || other.Parallelism() != 3 {
		t.Fatalf("parallelism %d / %d", s.Parallelism(), other.Parallelism())
	}
}

// The default is what the adapter declares, else DefaultParallelism; no
// declaration or flag goes past MaxParallelism.
func TestStoreParallelismDefaults(t *testing.T) {
	open := func(declared int) *storage.Store {
		c := &storagetest.Caps{Driver: memstore.New(), Edit: func(c *storage.Capabilities) { c.Limits.Parallelism = declared }}
		s, err := storage.NewStore(context.Background(), "memory", c)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	for _, c := range []struct{ declared, flag, want int }{
		{0, 0, storage.DefaultParallelism}, {32, 0, 32}, {32, 4, 4}, {1 << 20, 0, storage.MaxParallelism}, {2, 1000, storage.MaxParallelism},
	} {
		s := open(c.declared)
		if c.flag != 0 {
			s = s.WithParallelism(c.flag)
		}
		if got := s.Parallelism(); got != c.want {
			t.Errorf("declared %d, flag %d: parallelism %d, want %d", c.declared, c.flag, got, c.want)
		}
	}
}

// A request waiting for a slot gives up when its context ends.
func TestStoreSlotHonoursContext(t *testing.T) {
	d := &blockingDriver{Driver: memstore.New(), release: make(chan struct{})}
	s, err := storage.NewStore(context.Background(), "memory", d)
	if err != nil {
		t.Fatal(err)
	}
	s = s.WithParallelism(1)
	go s.Stat(context.Background(), "k") // holds the only slot
	for d.in.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := s.Stat(ctx, "k"); err == nil || ctx.Err() == nil {
		t.Fatalf("waiting for a slot: %v", err)
	}
	close(d.release)
}

type blockingDriver struct {
	storage.Driver
	in      atomic.Int64
	release chan struct{}
}

func (d *blockingDriver) Stat(ctx context.Context, key string) (storage.Info, error) {
	d.in.Add(1)
	<-d.release
	return d.Driver.Stat(ctx, key)
}

// countingPacer lets every request through, counting them.
type countingPacer struct{ n atomic.Int64 }

func (p *countingPacer) Wait(context.Context) error { p.n.Add(1); return nil }

// Every request waits on the pacer first, and a pacer that refuses (its
// context ended) fails the request without reaching the driver.
func TestStorePacerPacesEveryRequest(t *testing.T) {
	d := &slowDriver{Driver: memstore.New()}
	s, err := storage.NewStore(context.Background(), "memory", d)
	if err != nil {
		t.Fatal(err)
	}
	p := &countingPacer{}
	paced := s.WithPacer(p)
	for range 5 {
		paced.Stat(context.Background(), "k")
	}
	if p.n.Load() != 5 {
		t.Fatalf("pacer saw %d requests, want 5", p.n.Load())
	}
	before := d.peak.Load()
	if _, err := s.WithPacer(refusingPacer{}).Stat(context.Background(), "k"); err == nil {
		t.Fatal("a refused pace let the request through")
	}
	if d.in.Load() != 0 || d.peak.Load() != before {
		t.Fatal("a refused request reached the driver")
	}
}

type refusingPacer struct{}

func (refusingPacer) Wait(ctx context.Context) error { return context.Canceled }

// deadlinePacer refuses as rate.Limiter does when the wait would pass the
// deadline: at once, with the context still live.
type deadlinePacer struct{}

func (deadlinePacer) Wait(context.Context) error {
	return errors.New("rate: Wait(n=1) would exceed context deadline")
}

// A pace that would pass the deadline is as good as a timeout: transient,
// not an unknown failure.
func TestStorePaceBeyondDeadlineIsTransient(t *testing.T) {
	s, err := storage.NewStore(context.Background(), "memory", memstore.New())
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.WithPacer(deadlinePacer{}).Stat(context.Background(), "k")
	if storage.KindOf(err) != storage.ErrTransient {
		t.Fatalf("%v: want transient", err)
	}
}

// A request whose context has ended never reaches the driver, even with a
// slot free (select would pick the free slot half the time).
func TestStoreEndedContextNeverReachesTheDriver(t *testing.T) {
	d := &slowDriver{Driver: memstore.New()}
	s, err := storage.NewStore(context.Background(), "memory", d)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for range 50 {
		if _, err := s.Stat(ctx, "k"); err == nil {
			t.Fatal("a cancelled request succeeded")
		}
	}
	if d.peak.Load() != 0 {
		t.Fatal("a cancelled request reached the driver")
	}
}
