package claim

import (
	"context"
	"sync"
)

// checks coalesces concurrent Verify calls. A cleanup run checks the claim
// right before each table's deletions, 64 tables at once on an object
// store: one read each would be a request per table. Instead a call joins
// the next check that has not started yet (starting it when none is on
// the wire), so every caller's answer still comes from a read that began
// after it called — what a read of its own would prove — and at most two
// checks are in flight or queued at a time.
type checks struct {
	mu      sync.Mutex
	running bool
	next    *check // the check callers join; it starts when running ends
}

// check is one read of the claim, shared by the callers that joined it
// before it started.
type check struct {
	done    chan struct{}
	err     error
	waiting int                // callers still waiting on it
	ctx     context.Context    // the read's: not any one caller's
	cancel  context.CancelFunc // when every caller has given up
}

func (cs *checks) do(ctx context.Context, read func(context.Context) error) error {
	cs.mu.Lock()
	c := cs.next
	if c == nil {
		// The read outlives the caller that made it (others may join), so
		// it keeps the values of the first caller's context but ends only
		// when every caller that joined has gone.
		rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		c = &check{done: make(chan struct{}), ctx: rctx, cancel: cancel}
		cs.next = c
		if !cs.running {
			cs.start(read)
		}
	}
	c.waiting++
	cs.mu.Unlock()

	select {
	case <-c.done:
		return c.err
	case <-ctx.Done():
		cs.mu.Lock()
		c.waiting--
		if c.waiting == 0 {
			// No one wants this check any more: drop it if it has not
			// started (a later caller starts a fresh one), stop it if it has.
			if cs.next == c {
				cs.next = nil
			}
			c.cancel()
		}
		cs.mu.Unlock()
		return &LostError{Why: "the claim object cannot be read", Err: context.Cause(ctx)}
	}
}

// start runs cs.next; cs.mu is held.
func (cs *checks) start(read func(context.Context) error) {
	c := cs.next
	cs.next, cs.running = nil, true
	go func() {
		err := read(c.ctx)
		c.cancel()
		cs.mu.Lock()
		c.err = err
		close(c.done)
		cs.running = false
		if cs.next != nil {
			cs.start(read)
		}
		cs.mu.Unlock()
	}()
}
