package conformance

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/retain-dev/retain/sdk/claim"
	"github.com/retain-dev/retain/sdk/core"
)

// testCreateVisibility: readers racing a create-if-absent see the key
// missing or the whole body, never part of it. An adapter that opens the
// final name and writes the body in parts lets a reader read a short body
// without an error; the claim, a create-if-absent whose reader decides who
// holds the store, would read a torn record. Bounded by creates, not time.
func testCreateVisibility(t T, s *core.Store) {
	skipIfNone(t, s, core.FeatureCreateIfAbsent)
	const size, creates, readers = 1 << 20, 30, 3
	ctx := ctxT(t)
	var current atomic.Int64 // the key being created
	current.Store(-1)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, readers)
	var seen atomic.Int64 // whole bodies read
	for range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				i := current.Load()
				if i < 0 {
					continue
				}
				b, _, err := s.ReadAll(ctx, fmt.Sprintf("cv/%03d", i))
				if errors.Is(err, core.ErrNotFound) || errors.Is(err, core.ErrTransient) {
					continue // not there yet, or a torn read refused
				}
				if err != nil {
					errs <- err
					return
				}
				want := byte('a' + i%26)
				if len(b) != size || bytes.Count(b, []byte{want}) != size {
					errs <- fmt.Errorf("cv/%03d while it was created: %d bytes of %d, %d of them %q", i, len(b), size, bytes.Count(b, []byte{want}), want)
					return
				}
				seen.Add(1)
			}
		}()
	}
	for i := range creates {
		current.Store(int64(i))
		mustPut(t, s, fmt.Sprintf("cv/%03d", i), bytes.Repeat([]byte{byte('a' + i%26)}, size), core.PutOptions{Mode: core.PutCreateIfAbsent})
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if seen.Load() == 0 {
		t.Skipf("no read found a created body during %d creates: the readers never overlapped a create, so nothing was proven", creates)
	}
	// The claim is such a create: readers of the claim while it is taken
	// and given back see no claim or a whole record, never a torn one.
	if err := s.Require(core.FeatureCreateIfAbsent, core.ScopeProcess); err != nil {
		t.Logf("the claim is not raced: %v", err)
		return
	}
	const claims = 20
	stopClaims := make(chan struct{})
	claimErrs := make(chan error, readers)
	var claimsSeen atomic.Int64
	for range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stopClaims:
					return
				default:
				}
				_, _, err := claim.Read(ctx, s)
				switch {
				case err == nil:
					claimsSeen.Add(1)
				case errors.Is(err, core.ErrNotFound) || errors.Is(err, core.ErrTransient):
				default:
					claimErrs <- fmt.Errorf("reading the claim while it was taken: %w", err)
					return
				}
			}
		}()
	}
	for range claims {
		h, err := claim.Acquire(ctx, s, claim.Request{Action: "conformance", Scope: core.ScopeProcess})
		if err != nil {
			close(stopClaims)
			wg.Wait()
			t.Fatalf("acquiring the claim: %v", err)
		}
		if err := h.Release(ctx); err != nil {
			close(stopClaims)
			wg.Wait()
			t.Fatalf("releasing the claim: %v", err)
		}
	}
	close(stopClaims)
	wg.Wait()
	close(claimErrs)
	for err := range claimErrs {
		t.Fatal(err)
	}
	t.Logf("%d whole bodies read during %d creates; %d whole claims read during %d acquisitions", seen.Load(), creates, claimsSeen.Load(), claims)
}
