package localfs

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/retain-dev/retain/core/storage"
)

// localfs reads a batch several keys at once; what it answers must still
// be what storage.GetEach answers for the same keys and byte budget: the same
// results in order, stopping before the first body that does not fit, and
// a first body too large for the whole budget answered alone as
// ErrLimitExceeded.
func TestGetManyAnswersAsGetEach(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	d, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := os.MkdirAll(filepath.Join(root, "t"), 0o755); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var all []string
	for i := range 40 {
		k := fmt.Sprintf("t/k%02d", i)
		if i%7 != 3 { // some keys are missing: an error result, no bytes
			if err := os.WriteFile(filepath.Join(root, k), make([]byte, rng.IntN(50)), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		all = append(all, k)
	}
	all = append(all, "t/../bad")
	for trial := range 300 {
		n := 1 + rng.IntN(len(all))
		keys := make([]string, n)
		for i := range keys {
			keys[i] = all[rng.IntN(len(all))]
		}
		budget := int64(rng.IntN(200))
		got, gerr := d.GetMany(ctx, keys, budget)
		want, werr := storage.GetEach(ctx, d, keys, budget)
		if (gerr == nil) != (werr == nil) {
			t.Fatalf("trial %d: GetMany error %v, GetEach error %v", trial, gerr, werr)
		}
		if len(got) != len(want) {
			t.Fatalf("trial %d (budget %d): %d results, GetEach gives %d", trial, budget, len(got), len(want))
		}
		for i := range got {
			g, w := got[i], want[i]
			if g.Key != w.Key || !reflect.DeepEqual(g.Data, w.Data) || g.Info.Size != w.Info.Size ||
				(g.Err == nil) != (w.Err == nil) || storage.KindOf(g.Err) != storage.KindOf(w.Err) ||
				errors.Is(g.Err, storage.ErrLimitExceeded) != errors.Is(w.Err, storage.ErrLimitExceeded) {
				t.Fatalf("trial %d (budget %d) result %d: got {%q %d bytes %v}, GetEach {%q %d bytes %v}",
					trial, budget, i, g.Key, len(g.Data), g.Err, w.Key, len(w.Data), w.Err)
			}
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if res, err := d.GetMany(cctx, all[:9], 1<<20); err == nil {
		t.Fatalf("a cancelled batch answered %d results and no error", len(res))
	}
}
