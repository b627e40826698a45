package conformance

import (
	"sync"
	"sync/atomic"
)

// readRace runs readers goroutines that call read over and over until the
// returned stop is called. read answers whether it read something whole
// (counted) or an error, which ends that reader. stop waits for them all
// and returns the count and the first error.
func readRace(readers int, read func() (bool, error)) (stop func() (int64, error)) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	var whole atomic.Int64
	errs := make(chan error, readers)
	for range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				ok, err := read()
				if err != nil {
					errs <- err
					return
				}
				if ok {
					whole.Add(1)
				}
			}
		}()
	}
	return func() (int64, error) {
		close(done)
		wg.Wait()
		close(errs)
		return whole.Load(), <-errs
	}
}
