package localfs

import (
	"context"
	"errors"
	"sync"

	"github.com/retain-dev/retain/sdk/core"
)

// localfs answers batches itself: on a local disk a batch costs what its
// keys cost, and through the plugin it is one boundary crossing instead of
// one per key (docs/performance.md).
var _ core.BatchReader = (*Driver)(nil)

// StatMany stats keys in order (core.StatEach).
func (d *Driver) StatMany(ctx context.Context, keys []string) ([]core.StatResult, error) {
	return core.StatEach(ctx, d, keys)
}

// batchWidth is how many keys of a batch are read at once: what the
// adapter declares as its parallelism, since a batch stands for that many
// single reads the host would have made side by side.
const batchWidth = 4

// GetMany reads keys within maxBytes, batchWidth at a time, and answers in
// order: the results stop before the first body that does not fit in what
// the bodies before it left (as core.GetEach's do); a read made ahead of
// that point is dropped.
func (d *Driver) GetMany(ctx context.Context, keys []string, maxBytes int64) ([]core.GetResult, error) {
	if len(keys) > core.MaxBatchKeys {
		return core.GetEach(ctx, d, keys, maxBytes) // refuses the batch
	}
	out := make([]core.GetResult, 0, len(keys))
	left := maxBytes
	for lo := 0; lo < len(keys); lo += batchWidth {
		chunk := keys[lo:min(lo+batchWidth, len(keys))]
		res := make([]core.GetResult, len(chunk))
		errs := make([]error, len(chunk))
		var wg sync.WaitGroup
		for j, k := range chunk {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r, err := core.GetEach(ctx, d, []string{k}, left)
				if err == nil && len(r) == 1 {
					res[j] = r[0]
				}
				errs[j] = err
			}()
		}
		wg.Wait()
		for j, r := range res {
			if errs[j] != nil {
				return nil, errs[j]
			}
			tooBig := errors.Is(r.Err, core.ErrLimitExceeded) || (r.Err == nil && int64(len(r.Data)) > left)
			if tooBig {
				if len(out) == 0 {
					r = core.GetResult{Key: r.Key, Err: core.Errorf("get", r.Key, core.ErrLimitExceeded,
						"the body does not fit in the %d bytes left in this batch", left)}
					out = append(out, r)
				}
				return out, nil // the caller asks again for the rest
			}
			if r.Err == nil {
				left -= int64(len(r.Data))
			}
			out = append(out, r)
		}
	}
	return out, nil
}
