package storage

import (
	"context"
	"errors"
	"io"
	"sync"
)

// BatchReader is optional for a Driver: it answers many small reads in one
// call. Across the plugin boundary each call costs a fixed ~0.1–0.2 ms of
// CPU whatever it carries, so a cleanup reading a thousand manifests from a
// local store spends more on crossings than on reading; a batch pays one.
//
// Implement it only where one batch costs the backend about what its keys
// cost one by one (a local filesystem): a Store counts a batch as one
// request against its limiter and pacer. A driver without it (or one that
// answers a whole call with ErrUnsupported, as a plugin client does for a
// plugin that predates batches) is read one key at a time by the Store,
// with the same results.
type BatchReader interface {
	// StatMany returns one result per key, in the order given, at most
	// MaxBatchKeys keys a call. A key's failure (ErrNotFound, ...) is its
	// result's Err; the error is for a failure of the whole call.
	StatMany(ctx context.Context, keys []string) ([]StatResult, error)
	// GetMany reads whole bodies, at most MaxBatchKeys keys a call, and
	// returns one result per key, in the order given, for as many keys as
	// fit: it stops before the first body that would take the total past
	// maxBytes, and the caller asks again for the rest. If the first key's
	// body alone is larger, its result is ErrLimitExceeded (the Store then
	// streams it with Get). A result's Data is exactly the version in its
	// Info. With keys, at least one result.
	GetMany(ctx context.Context, keys []string, maxBytes int64) ([]GetResult, error)
}

// StatResult is one key's answer in a StatMany.
type StatResult struct {
	Key  string
	Info Info
	Err  error
}

// GetResult is one key's answer in a GetMany.
type GetResult struct {
	Key  string
	Info Info
	Data []byte
	Err  error
}

// The bounds of one batch call: what a plugin's single answer may carry.
const (
	MaxBatchKeys  = 1000
	MaxBatchBytes = 16 << 20
)

// StatMany stats keys and returns one result per key in the order given.
// Through a BatchReader it takes one request per MaxBatchKeys keys; else a
// request per key, Parallelism() at a time. Invalid keys get their own
// invalid-argument result and are never sent. The error is for a failure
// of the whole call (the context, a driver that broke the contract).
func (s *Store) StatMany(ctx context.Context, keys []string) ([]StatResult, error) {
	const op = "stat-many"
	out := make([]StatResult, len(keys))
	send := s.validBatch(keys, "stat", func(i int, err error) { out[i] = StatResult{Key: keys[i], Err: err} })
	br, _ := s.d.(BatchReader)
	for br != nil && len(send) > 0 {
		n := min(MaxBatchKeys, len(send))
		chunk := pick(keys, send[:n])
		done, err := s.slot(ctx, op, "")
		if err != nil {
			return out, err
		}
		res, err := br.StatMany(ctx, chunk)
		done()
		if errors.Is(err, ErrUnsupported) {
			break // a plugin that predates batches: one by one below
		}
		if err != nil {
			return out, shape(op, "", err)
		}
		if len(res) != n {
			return out, s.lie(op, "", "returned %d results for %d keys", len(res), n)
		}
		for j, i := range send[:n] {
			r := res[j]
			if r.Key != keys[i] {
				return out, s.lie(op, keys[i], "result %d names key %q", j, r.Key)
			}
			if r.Err != nil {
				r.Err = shape("stat", keys[i], r.Err)
				r.Info = Info{}
			} else if r.Info.Key != keys[i] {
				return out, s.lie(op, keys[i], "returned info for key %q", r.Info.Key)
			}
			out[i] = r
		}
		send = send[n:]
	}
	err := s.each(ctx, send, func(ctx context.Context, i int) {
		info, err := s.Stat(ctx, keys[i])
		out[i] = StatResult{Key: keys[i], Info: info, Err: err}
	})
	return out, err
}

// GetMany reads the whole bodies of keys and returns one result per key in
// the order given: every body is in memory at once, so a caller bounds what
// it asks for (a planner's read-ahead). Through a BatchReader it takes one
// request per batch of at most MaxBatchKeys keys and MaxBatchBytes bytes
// (an object larger than that is read alone, streamed); else a request per
// key, Parallelism() at a time. Invalid keys get their own invalid-argument
// result and are never sent.
func (s *Store) GetMany(ctx context.Context, keys []string) ([]GetResult, error) {
	const op = "get-many"
	out := make([]GetResult, len(keys))
	send := s.validBatch(keys, "get", func(i int, err error) { out[i] = GetResult{Key: keys[i], Err: err} })
	var alone []int // too large for any batch
	br, _ := s.d.(BatchReader)
	for br != nil && len(send) > 0 {
		n := min(MaxBatchKeys, len(send))
		chunk := pick(keys, send[:n])
		done, err := s.slot(ctx, op, "")
		if err != nil {
			return out, err
		}
		res, err := br.GetMany(ctx, chunk, MaxBatchBytes)
		done()
		if errors.Is(err, ErrUnsupported) {
			break
		}
		if err != nil {
			return out, shape(op, "", err)
		}
		if len(res) < 1 || len(res) > n {
			return out, s.lie(op, "", "returned %d results for %d keys", len(res), n)
		}
		var total int64
		for j, i := range send[:len(res)] {
			r := res[j]
			if r.Key != keys[i] {
				return out, s.lie(op, keys[i], "result %d names key %q", j, r.Key)
			}
			switch {
			case errors.Is(r.Err, ErrLimitExceeded) && j == 0 && len(res) == 1:
				alone = append(alone, i) // larger than any batch
			case r.Err != nil:
				out[i] = GetResult{Key: keys[i], Err: shape("get", keys[i], r.Err)}
			case r.Info.Key != keys[i]:
				return out, s.lie(op, keys[i], "returned info for key %q", r.Info.Key)
			case int64(len(r.Data)) != r.Info.Size:
				return out, s.lie(op, keys[i], "returned %d bytes of a body it said is %d bytes", len(r.Data), r.Info.Size)
			default:
				total += int64(len(r.Data))
				out[i] = r
			}
		}
		if total > MaxBatchBytes {
			return out, s.lie(op, "", "returned %d bytes in one batch, over the %d asked for", total, int64(MaxBatchBytes))
		}
		send = send[len(res):]
	}
	err := s.each(ctx, append(alone, send...), func(ctx context.Context, i int) {
		data, info, err := s.ReadAll(ctx, keys[i])
		out[i] = GetResult{Key: keys[i], Info: info, Data: data, Err: err}
	})
	return out, err
}

// validBatch returns the indexes of the valid keys; bad gets the others.
func (s *Store) validBatch(keys []string, op string, bad func(i int, err error)) []int {
	send := make([]int, 0, len(keys))
	for i, k := range keys {
		if err := ValidateKey(op, k); err != nil {
			bad(i, err)
			continue
		}
		send = append(send, i)
	}
	return send
}

func pick(keys []string, idx []int) []string {
	out := make([]string, len(idx))
	for j, i := range idx {
		out[j] = keys[i]
	}
	return out
}

// each runs fn for every index, Parallelism() at a time (each call takes
// its own slot as well), and returns ctx's error if it ended first.
func (s *Store) each(ctx context.Context, idx []int, fn func(ctx context.Context, i int)) error {
	if len(idx) == 0 {
		return nil
	}
	var wg sync.WaitGroup
	next := make(chan int)
	for range min(s.Parallelism(), len(idx)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				fn(ctx, i)
			}
		}()
	}
	var err error
feed:
	for _, i := range idx {
		select {
		case next <- i:
		case <-ctx.Done():
			err = shape("batch", "", ctx.Err())
			break feed
		}
	}
	close(next)
	wg.Wait()
	if err != nil {
		return err
	}
	if cerr := ctx.Err(); cerr != nil {
		return shape("batch", "", cerr)
	}
	return nil
}

// StatEach is StatMany made of d's single Stats, one after the other: a
// BatchReader for a driver whose batch costs what its keys do (a local
// store), which still saves a plugin boundary crossing per key.
func StatEach(ctx context.Context, d Driver, keys []string) ([]StatResult, error) {
	if len(keys) > MaxBatchKeys {
		return nil, Errorf("stat-many", "", ErrInvalidArgument, "%d keys in one batch, over the limit of %d", len(keys), MaxBatchKeys)
	}
	out := make([]StatResult, len(keys))
	for i, k := range keys {
		if err := ctx.Err(); err != nil {
			return nil, shape("stat-many", "", err)
		}
		info, err := d.Stat(ctx, k)
		out[i] = StatResult{Key: k, Info: info, Err: err}
	}
	return out, nil
}

// GetEach is GetMany made of d's single Gets, one after the other (see
// StatEach).
func GetEach(ctx context.Context, d Driver, keys []string, maxBytes int64) ([]GetResult, error) {
	const op = "get-many"
	if len(keys) > MaxBatchKeys {
		return nil, Errorf(op, "", ErrInvalidArgument, "%d keys in one batch, over the limit of %d", len(keys), MaxBatchKeys)
	}
	out := make([]GetResult, 0, len(keys))
	left := maxBytes
	for _, k := range keys {
		if err := ctx.Err(); err != nil {
			return nil, shape(op, "", err)
		}
		r, fits := getOne(ctx, d, k, &left)
		if !fits && len(out) > 0 {
			break // the caller asks again for the rest
		}
		out = append(out, r)
		if !fits {
			break
		}
	}
	return out, nil
}

// getOne reads key whole if its body fits in *left; fits is false if not.
func getOne(ctx context.Context, d Driver, key string, left *int64) (_ GetResult, fits bool) {
	r, err := d.Get(ctx, key)
	if err != nil {
		return GetResult{Key: key, Err: err}, true
	}
	defer r.Close()
	if r.Info.Size > *left {
		return GetResult{Key: key, Err: Errorf("get", key, ErrLimitExceeded,
			"the body of %d bytes does not fit in the %d bytes left in this batch", r.Info.Size, *left)}, false
	}
	data := make([]byte, r.Info.Size)
	if _, err := io.ReadFull(r, data); err != nil {
		return GetResult{Key: key, Err: shape("get", key, err)}, true
	}
	// Exactly the declared size: one more byte is a body that grew.
	var one [1]byte
	if n, err := r.Read(one[:]); n > 0 || (err != nil && err != io.EOF) {
		if err == nil {
			err = Errorf("get", key, ErrUnknown, "the body is longer than its declared size of %d bytes", r.Info.Size)
		}
		return GetResult{Key: key, Err: shape("get", key, err)}, true
	}
	*left -= r.Info.Size
	return GetResult{Key: key, Info: r.Info, Data: data}, true
}
