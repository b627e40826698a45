package conformance

import (
	"bytes"
	"fmt"

	"github.com/retain-dev/retain/core/storage"
)

// largestRoundTrip bounds the object the limits case writes: a declared
// maximum above it is checked up to it, and the report says so.
const largestRoundTrip = 16 << 20

// caseDeclaredLimits: the limits an adapter declares are real. A batch
// delete of exactly the declared batch is one call the driver accepts, and
// one key more goes through the Store (which splits it); a page of the
// declared page size is served, and a larger page size is clamped, not
// refused; an object of the declared maximum size (up to 16 MiB) round
// trips. Retention sizes its batches and pages by these numbers, so a
// declared limit the backend refuses fails every cleanup at scale.
func caseDeclaredLimits(t T, e *Env) {
	lim := e.Store.Capabilities().Limits
	s, d, ctx := e.Store, e.Store.Driver(), e.Ctx
	checked := 0
	batch := lim.MaxDeleteBatch
	if batch > 0 {
		checked++
		keys := putMany(t, e, "lim/del/", batch+1)
		res, err := d.DeleteMany(ctx, keys[:batch])
		if err != nil {
			t.Fatalf("a batch delete of the declared batch (%d keys) in one call: %v", batch, err)
		}
		if len(res) != batch {
			t.Fatalf("a batch delete of %d keys answered %d results", batch, len(res))
		}
		for i, r := range res {
			if r.Err != nil || r.Key != keys[i] {
				t.Fatalf("a batch delete of the declared batch (%d keys): key %d (%s) answered %q: %v", batch, i, keys[i], r.Key, r.Err)
			}
		}
		if left, err := s.List(ctx, "lim/del/", 0); err != nil || len(left) != 1 {
			t.Fatalf("after a batch delete of %d of %d keys, %d are left (%v), want 1", batch, batch+1, len(left), err)
		}
		more := putMany(t, e, "lim/del2/", batch+1)
		res, err = s.DeleteMany(ctx, more)
		if err != nil || len(res) != batch+1 {
			t.Fatalf("Store.DeleteMany of the declared batch + 1 (%d keys): %d results, %v", batch+1, len(res), err)
		}
		for _, r := range res {
			if r.Err != nil {
				t.Fatalf("Store.DeleteMany of %d keys: %s: %v", batch+1, r.Key, r.Err)
			}
		}
		if left, err := s.List(ctx, "lim/del2/", 0); err != nil || len(left) != 0 {
			t.Fatalf("after Store.DeleteMany of %d keys, %d are left (%v)", batch+1, len(left), err)
		}
	}
	if page := lim.MaxListPage; page > 0 {
		checked++
		keys := putMany(t, e, "lim/list/", page+1)
		for _, size := range []int{page, page + 1, 0} {
			got, err := d.List(ctx, storage.ListOptions{Prefix: "lim/list/", PageSize: size})
			if err != nil {
				t.Fatalf("a listing of page size %d (declared maximum %d): %v", size, page, err)
			}
			if len(got.Objects) > page || len(got.Objects) == 0 || !got.More {
				t.Fatalf("a listing of page size %d over %d keys (declared maximum page %d): %d objects, more=%v", size, len(keys), page, len(got.Objects), got.More)
			}
			if size == page && len(got.Objects) != page {
				t.Logf("page size %d answered %d objects (fewer is allowed)", page, len(got.Objects))
			}
		}
	}
	if max := lim.MaxObjectSize; max > 0 {
		checked++
		n := min(max, largestRoundTrip)
		body := make([]byte, n)
		for i := range body {
			body[i] = byte(i*31 + i>>11)
		}
		mustPut(t, s, "lim/largest", body, storage.PutOptions{})
		got, _ := mustRead(t, s, "lim/largest")
		if !bytes.Equal(got, body) {
			t.Fatalf("an object of %d bytes did not round-trip (read %d bytes)", n, len(got))
		}
		if n < max {
			t.Logf("declared maximum object size %d bytes: round-tripped %d (the case writes at most %d)", max, n, largestRoundTrip)
		}
	}
	if checked == 0 {
		t.Skip("adapter declares no limits")
	}
}

// putMany writes n empty objects under prefix, side by side through the
// store's limiter, and returns their keys in order.
func putMany(t T, e *Env, prefix string, n int) []string {
	t.Helper()
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("%s%05d", prefix, i)
	}
	errs := make(chan error, n)
	sem := make(chan struct{}, max(1, e.Store.Parallelism()))
	for _, k := range keys {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			_, err := e.Store.PutBytes(e.Ctx, k, nil, storage.PutOptions{})
			errs <- err
		}()
	}
	for range keys {
		if err := <-errs; err != nil {
			t.Fatalf("writing %d objects under %s: %v", n, prefix, err)
		}
	}
	return keys
}
