package pluginproto

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retain-dev/retain/sdk/core"
)

// Calls share the session and answer out of order: one that blocks in the
// driver holds up none of the others, and cancelling it ends it alone.
func TestSessionCallsInFlight(t *testing.T) {
	c := launch(t, "mem")
	if c.sess == nil {
		t.Fatal("no session with a plugin that offers one")
	}
	ctx := context.Background()
	for i := range 10 {
		if _, err := c.Put(ctx, fmt.Sprintf("s/%d", i), strings.NewReader(strings.Repeat("x", i)), core.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	bctx, cancel := context.WithCancel(ctx)
	blocked := make(chan error, 1)
	go func() { _, err := c.Stat(bctx, "block/x"); blocked <- err }()

	var wg sync.WaitGroup
	errs := make(chan error, 200)
	start := time.Now()
	for g := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 10 {
				k := fmt.Sprintf("s/%d", (g+i)%10)
				info, err := c.Stat(ctx, k)
				if err == nil && (info.Key != k || info.Size != int64((g+i)%10)) {
					err = fmt.Errorf("stat %s answered %+v", k, info)
				}
				if err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("200 stats beside a blocked one took %v", el)
	}
	select {
	case err := <-blocked:
		t.Fatalf("the blocked call ended by itself: %v", err)
	default:
	}
	cancel()
	select {
	case err := <-blocked:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("the cancelled call: %v", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("cancelling the blocked call did not end it")
	}
	waitUnblocked(t, c, 1) // the driver saw its ctx end
	if c.sess.broken() {
		t.Fatal("the session broke")
	}
}
