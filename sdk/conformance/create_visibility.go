package conformance

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

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
	t.Logf("%d whole bodies read during %d creates", seen.Load(), creates)
}
