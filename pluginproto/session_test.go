package pluginproto

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retain-dev/retain/core/storage"
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
		if _, err := c.Put(ctx, fmt.Sprintf("s/%d", i), strings.NewReader(strings.Repeat("x", i)), storage.PutOptions{}); err != nil {
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

// A small Get comes whole on the session; one too large for it, or not
// whole at once (a body shorter than declared), comes back as "stream" and
// Get streams it, so its errors are a streamed Get's.
func TestInlineGet(t *testing.T) {
	c := launch(t, "mem")
	if !c.inlineGet {
		t.Fatal("no inline gets from a plugin whose driver has batch reads")
	}
	ctx := context.Background()
	small, large := strings.Repeat("s", 1000), strings.Repeat("l", inlineMax+1)
	for k, body := range map[string]string{"small": small, "large": large} {
		if _, err := c.Put(ctx, k, strings.NewReader(body), storage.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	r, err := c.getInline(ctx, "small")
	if err != nil || r == nil {
		t.Fatalf("inline get of 1000 bytes: %v, %v", r, err)
	}
	got, err := io.ReadAll(r)
	if err != nil || string(got) != small || r.Info.Size != 1000 {
		t.Fatalf("read %d bytes, info %+v: %v", len(got), r.Info, err)
	}
	r.Close()
	if _, err := r.Read(make([]byte, 1)); !errors.Is(err, storage.ErrInvalidArgument) {
		t.Fatalf("read after Close: %v", err)
	}
	for _, k := range []string{"large", "shortbody/x"} {
		if r, err := c.getInline(ctx, k); r != nil || err != nil {
			t.Fatalf("inline get of %s: %v, %v; want stream", k, r, err)
		}
	}
	_, err = c.getInline(ctx, "missing")
	wantKind(t, err, storage.ErrNotFound)
	// Through Get: the large one streams whole, the short one fails as a
	// streamed Get does.
	r, err = c.Get(ctx, "large")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := io.ReadAll(r); err != nil || string(got) != large {
		t.Fatalf("large: %d bytes, %v", len(got), err)
	}
	r, err = c.Get(ctx, "shortbody/x")
	if err == nil {
		_, err = io.ReadAll(r)
	}
	wantKind(t, err, storage.ErrTransient)
}
