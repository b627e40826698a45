package daemon

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// TestShutdownStartsNoNewPass: Run's loop selects between
// ctx.Done() and ticker.C after each pass. When the signal arrives during a
// pass that outlasts the interval, both are ready and select picks one at
// random: half the time a whole new pass (reconcile, retention, deletions)
// starts after SIGTERM instead of the daemon stopping.
func TestShutdownStartsNoNewPass(t *testing.T) {
	_, s, loc := store(t, "update")
	extra := 0
	for i := 0; i < 12; i++ {
		ctx, cancel := context.WithCancel(bg)
		var calls atomic.Int64
		d := &Daemon{Store: s.At(loc), Config: cfg(t, "enabled: false\ninterval: 100ms\n"),
			Now: func() time.Time {
				if calls.Add(1) == 1 {
					cancel() // SIGTERM arrives during the first pass
				}
				time.Sleep(70 * time.Millisecond) // the pass outlasts the interval
				return time.Now()
			}}
		if err := d.Run(ctx); err != nil {
			t.Fatal(err)
		}
		if passes := calls.Load() / 2; passes > 1 {
			extra++
		}
		cancel()
	}
	if extra > 0 {
		t.Fatalf("in %d of 12 shutdowns the daemon started another pass after the signal", extra)
	}
}
