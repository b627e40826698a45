package lance

import (
	"context"
	"testing"
	"time"

	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/memstore"
)

// A planning step whose context ends (another table of a store-wide
// cleanup failed, so the fan-out cancels the rest) returns, rather than
// wait for a manifest read the read-ahead never started.
func TestReadAheadEndsWithItsContext(t *testing.T) {
	s, err := storage.NewStore(context.Background(), "memory", memstore.New())
	if err != nil {
		t.Fatal(err)
	}
	d, err := Open(s.WithParallelism(2), "t.lance")
	if err != nil {
		t.Fatal(err)
	}
	vs := make([]Version, 50)
	for i := range vs {
		vs[i] = Version{N: uint64(i + 1), Key: "t.lance/_versions/" + string(rune('a'+i%26)) + ".manifest"}
	}
	ctx, cancel := context.WithCancel(context.Background())
	next := readAhead(ctx, d, vs, 0)
	cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range vs {
			next()
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the read-ahead's consumer hung after its context ended")
	}
}
