package claim_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/claim"
	"github.com/retain-dev/retain/core/storage/memstore"
)

// heldGets is a memstore whose reads of the claim object, once armed, wait
// for release after the store answered: a check that has read the claim
// but not yet returned, as on a slow round trip.
type heldGets struct {
	*memstore.Driver
	armed   atomic.Bool
	reads   atomic.Int64
	read    chan struct{} // one send per held read, after the store answered
	release chan struct{}
}

func (h *heldGets) Get(ctx context.Context, key string) (*storage.Reader, error) {
	r, err := h.Driver.Get(ctx, key)
	if key == claim.Key && h.armed.Load() {
		h.reads.Add(1)
		h.read <- struct{}{}
		<-h.release
	}
	return r, err
}

func heldStore(t *testing.T) (*storage.Store, *heldGets) {
	d := &heldGets{Driver: memstore.New(), read: make(chan struct{}, 64), release: make(chan struct{})}
	s, err := storage.NewStore(context.Background(), "memory", d)
	if err != nil {
		t.Fatal(err)
	}
	return s, d
}

// TestVerifySharesOneCheck: callers that arrive while a check is on the
// wire share the next one: 32 concurrent Verify calls cost at most two
// reads, and all of them succeed.
func TestVerifySharesOneCheck(t *testing.T) {
	ctx := context.Background()
	s, d := heldStore(t)
	h, err := claim.Acquire(ctx, s, claim.Request{Action: "cleanup", Actor: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	d.armed.Store(true)
	first := make(chan error, 1)
	go func() { first <- h.Verify(ctx) }()
	<-d.read // the first check has read the claim and is on its way back
	var wg sync.WaitGroup
	errs := make([]error, 32)
	for i := range errs {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = h.Verify(ctx) }()
	}
	time.Sleep(50 * time.Millisecond) // let them all queue behind the first
	close(d.release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("caller %d: %v", i, err)
		}
	}
	if n := d.reads.Load(); n > 2 {
		t.Errorf("33 concurrent checks read the claim %d times, want at most 2", n)
	}
}

// TestVerifyNeverAnswersFromAnEarlierRead: a caller arriving while a check
// is on the wire is not answered by that check: the claim lost after the
// check read it is reported to the later caller, while the earlier one
// (whose read began before the loss) is told it holds.
func TestVerifyNeverAnswersFromAnEarlierRead(t *testing.T) {
	ctx := context.Background()
	s, d := heldStore(t)
	h, err := claim.Acquire(ctx, s, claim.Request{Action: "cleanup", Actor: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	d.armed.Store(true)
	first := make(chan error, 1)
	go func() { first <- h.Verify(ctx) }()
	<-d.read
	// The claim is lost after the first check read it.
	if err := d.Driver.Delete(ctx, claim.Key, storage.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	later := make(chan error, 1)
	go func() { later <- h.Verify(ctx) }()
	time.Sleep(20 * time.Millisecond)
	close(d.release)
	if err := <-first; err != nil {
		t.Fatalf("the check that read the claim before it was lost: %v", err)
	}
	if err := <-later; !errors.Is(err, claim.ErrLost) {
		t.Fatalf("a check asked for after the claim was lost said %v, want ErrLost", err)
	}
}

// TestVerifyCallerGivingUp: a caller whose context ends stops waiting; the
// check it queued is dropped, and the next caller gets a fresh answer.
func TestVerifyCallerGivingUp(t *testing.T) {
	ctx := context.Background()
	s, d := heldStore(t)
	h, err := claim.Acquire(ctx, s, claim.Request{Action: "cleanup", Actor: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	d.armed.Store(true)
	first := make(chan error, 1)
	go func() { first <- h.Verify(ctx) }()
	<-d.read
	cctx, cancel := context.WithCancel(ctx)
	gaveUp := make(chan error, 1)
	go func() { gaveUp <- h.Verify(cctx) }()
	time.Sleep(20 * time.Millisecond)
	cancel()
	if err := <-gaveUp; !errors.Is(err, context.Canceled) || !errors.Is(err, claim.ErrLost) {
		t.Fatalf("a caller that gave up: %v", err)
	}
	close(d.release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	d.armed.Store(false)
	if err := h.Verify(ctx); err != nil {
		t.Fatalf("after a caller gave up: %v", err)
	}
}
