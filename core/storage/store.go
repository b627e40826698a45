package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Store is the portable type the rest of retain uses, over any Driver. It
// validates keys and options before they reach the driver, refuses modes the
// adapter declared none, splits batches to the adapter's limits, checks that
// what the driver returns is well-formed (a plugin that lies is caught here,
// not trusted), and makes every error an *Error with a kind.
type Store struct {
	adapter string
	d       Driver
	caps    Capabilities
	loc     Location
	// slots bounds the requests in flight through this store and every
	// copy of it (At): each driver call holds one while it waits for its
	// answer, so fan-outs nested in fan-outs never put more than
	// Parallelism() in flight.
	slots chan struct{}
	// pacer, if set, paces the requests (the operator's request-rate cap).
	pacer Pacer
}

// Pacer paces a store's requests: Wait blocks until one more may start, or
// fails when ctx ends. golang.org/x/time/rate's *Limiter is one.
type Pacer interface {
	Wait(ctx context.Context) error
}

// WithPacer returns a copy of s (sharing its limiter) whose every request
// first waits on p: a request-rate cap for a bucket other workloads share,
// as Lance's delete_rate_limit is for its deletes.
func (s *Store) WithPacer(p Pacer) *Store {
	c := *s
	c.pacer = p
	return &c
}

// DefaultParallelism bounds a store whose adapter declares no
// Limits.Parallelism; MaxParallelism bounds any store.
const (
	DefaultParallelism = 8
	MaxParallelism     = 256
)

// NewStore wraps d, reading its capabilities once. The store's limiter
// starts at the adapter's declared Limits.Parallelism.
func NewStore(ctx context.Context, adapter string, d Driver) (*Store, error) {
	caps, err := d.Capabilities(ctx)
	if err != nil {
		return nil, shape("capabilities", "", err)
	}
	s := &Store{adapter: adapter, d: d, caps: caps}
	return s.WithParallelism(caps.Limits.Parallelism), nil
}

// WithParallelism returns a copy of s whose requests (its own and its
// copies') have a limiter of their own allowing n in flight: the
// operator's --parallelism. n < 1 means the adapter's declared default
// (DefaultParallelism if it declares none); n is at most MaxParallelism.
// Call it once, right after opening, before handing the store out.
func (s *Store) WithParallelism(n int) *Store {
	if n < 1 {
		n = s.caps.Limits.Parallelism
	}
	if n < 1 {
		n = DefaultParallelism
	}
	c := *s
	c.slots = make(chan struct{}, min(n, MaxParallelism))
	return &c
}

// Parallelism is how many requests the store lets be in flight at once:
// the width a store-wide operation fans out to.
func (s *Store) Parallelism() int { return cap(s.slots) }

// slot waits for room for one more request in flight; done gives it back.
func (s *Store) slot(ctx context.Context, op, key string) (done func(), err error) {
	if err := ctx.Err(); err != nil {
		return nil, shape(op, key, err) // select would pick a free slot half the time
	}
	select {
	case s.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, shape(op, key, ctx.Err())
	}
	if s.pacer != nil {
		if err := s.pacer.Wait(ctx); err != nil {
			<-s.slots
			if ctx.Err() == nil {
				// The pace would pass ctx's deadline: as good as timed out.
				return nil, &Error{Op: op, Key: key, Kind: ErrTransient, Err: err, Msg: "the request-rate cap (--max-rps) leaves no time before the deadline"}
			}
			return nil, shape(op, key, err)
		}
	}
	return func() { <-s.slots }, nil
}

// At returns a copy of s that knows it lives at loc. Operations that scope
// their claim and gates, or name the store in messages, by where it lives
// (checkpoint, retention, branch) read s.Location(), so their signatures
// carry the store alone and a caller cannot pair a store with another
// store's location. A method rather than a NewStore parameter because every
// opener already has its Location in hand after NewStore, and tests aim a
// store opened one way at the location they mean. The copy shares s's
// driver: close one of the two, not both.
func (s *Store) At(loc Location) *Store {
	c := *s
	c.loc = loc
	return &c
}

// Location is where the store lives, as its opener set it with At; zero
// for a store built with NewStore alone (claim.ScopeFor gives such a store
// the global scope, as a caller passing a zero Location got before).
func (s *Store) Location() Location { return s.loc }

// Adapter is the adapter's name.
func (s *Store) Adapter() string { return s.adapter }

// Capabilities returns what the adapter declared.
func (s *Store) Capabilities() Capabilities { return s.caps }

// Driver exposes the underlying driver, for conformance tests that must
// reach past the portable checks.
func (s *Store) Driver() Driver { return s.d }

// Close releases the driver (and, through the plugin, its process).
func (s *Store) Close() error { return s.d.Close() }

// Require checks that feature f reaches at least scope on this store.
func (s *Store) Require(f Feature, scope Scope) error {
	return s.caps.Require(s.adapter, f, scope)
}

// Get opens key for reading. The reader fails, rather than ending early,
// if the body is shorter or longer than Info.Size.
func (s *Store) Get(ctx context.Context, key string) (*Reader, error) {
	if err := ValidateKey("get", key); err != nil {
		return nil, err
	}
	done, err := s.slot(ctx, "get", key)
	if err != nil {
		return nil, err
	}
	// The slot is held until the answer, not while the body streams: a
	// caller may hold a reader open while it makes other requests.
	r, err := s.d.Get(ctx, key)
	done()
	if err != nil {
		return nil, shape("get", key, err)
	}
	if r.Info.Key != key {
		r.Close()
		return nil, s.lie("get", key, "returned info for key %q", r.Info.Key)
	}
	r.ReadCloser = &sizedReader{rc: r.ReadCloser, left: r.Info.Size, key: key}
	return r, nil
}

// ReadAll reads the whole object.
func (s *Store) ReadAll(ctx context.Context, key string) ([]byte, Info, error) {
	r, err := s.Get(ctx, key)
	if err != nil {
		return nil, Info{}, err
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, Info{}, shape("get", key, err)
	}
	return b, r.Info, nil
}

// Stat returns the object's info.
func (s *Store) Stat(ctx context.Context, key string) (Info, error) {
	if err := ValidateKey("stat", key); err != nil {
		return Info{}, err
	}
	done, err := s.slot(ctx, "stat", key)
	if err != nil {
		return Info{}, err
	}
	info, err := s.d.Stat(ctx, key)
	done()
	if err != nil {
		return Info{}, shape("stat", key, err)
	}
	return info, nil
}

// ReadOnly reports whether the adapter declared the store opened read-only.
func (s *Store) ReadOnly() bool { return s.caps.ReadOnly }

// refuseReadOnly is the portable refusal of a write on a store whose driver
// declared itself read-only: defense in depth, so a write never reaches a
// driver that promised not to write.
func (s *Store) refuseReadOnly(op, key string) error {
	if !s.caps.ReadOnly {
		return nil
	}
	return ReadOnlyError(op, key)
}

// ReadOnlyError is the error a write on a store opened read-only returns.
// Adapters use it too, so the message is the same on either side.
func ReadOnlyError(op, key string) error {
	return Errorf(op, key, ErrPermissionDenied, "store opened read-only")
}

// Put writes body under key per opts.
func (s *Store) Put(ctx context.Context, key string, body io.Reader, opts PutOptions) (Info, error) {
	if err := ValidateKey("put", key); err != nil {
		return Info{}, err
	}
	if err := s.refuseReadOnly("put", key); err != nil {
		return Info{}, err
	}
	var f Feature
	switch opts.Mode {
	case PutOverwrite:
		if opts.IfVersion != "" {
			return Info{}, Errorf("put", key, ErrInvalidArgument, "IfVersion is only meaningful with replace-if-version")
		}
	case PutCreateIfAbsent:
		f = FeatureCreateIfAbsent
		if opts.IfVersion != "" {
			return Info{}, Errorf("put", key, ErrInvalidArgument, "IfVersion is only meaningful with replace-if-version")
		}
	case PutReplaceIfVersion:
		f = FeatureReplaceIfVersion
		if opts.IfVersion == "" {
			return Info{}, Errorf("put", key, ErrInvalidArgument, "replace-if-version needs the expected version")
		}
	default:
		return Info{}, Errorf("put", key, ErrInvalidArgument, "unknown put mode %d", opts.Mode)
	}
	if f != "" {
		if err := s.Require(f, ScopeProcess); err != nil {
			return Info{}, &Error{Op: "put", Key: key, Kind: ErrUnsupported, Err: err}
		}
	}
	if max := s.caps.Limits.MaxObjectSize; max > 0 {
		if l, ok := body.(interface{ Len() int }); ok && int64(l.Len()) > max {
			return Info{}, Errorf("put", key, ErrLimitExceeded, "%d bytes exceeds the adapter's object size limit of %d", l.Len(), max)
		}
	}
	done, err := s.slot(ctx, "put", key)
	if err != nil {
		return Info{}, err
	}
	info, err := s.d.Put(ctx, key, body, opts)
	done()
	if err != nil {
		return Info{}, shape("put", key, err)
	}
	if info.Key != key || info.Version == "" {
		return Info{}, s.lie("put", key, "returned info for key %q with version %q", info.Key, info.Version)
	}
	return info, nil
}

// PutBytes is Put of an in-memory body.
func (s *Store) PutBytes(ctx context.Context, key string, body []byte, opts PutOptions) (Info, error) {
	return s.Put(ctx, key, bytes.NewReader(body), opts)
}

// Delete removes key per opts.
func (s *Store) Delete(ctx context.Context, key string, opts DeleteOptions) error {
	if err := ValidateKey("delete", key); err != nil {
		return err
	}
	if err := s.refuseReadOnly("delete", key); err != nil {
		return err
	}
	if opts.IfVersion != "" {
		if err := s.Require(FeatureDeleteIfVersion, ScopeProcess); err != nil {
			return &Error{Op: "delete", Key: key, Kind: ErrUnsupported, Err: err}
		}
	}
	done, err := s.slot(ctx, "delete", key)
	if err != nil {
		return err
	}
	err = s.d.Delete(ctx, key, opts)
	done()
	if err != nil {
		return shape("delete", key, err)
	}
	return nil
}

// DeleteMany deletes keys unconditionally, in batches no larger than the
// adapter allows, and returns one result per key in the order given. Invalid
// keys get their own invalid-argument result and are never sent.
func (s *Store) DeleteMany(ctx context.Context, keys []string) ([]DeleteResult, error) {
	out := make([]DeleteResult, len(keys))
	if err := s.refuseReadOnly("delete-many", ""); err != nil {
		for i, k := range keys {
			out[i] = DeleteResult{Key: k, Err: ReadOnlyError("delete", k)}
		}
		return out, err
	}
	var send []int
	for i, k := range keys {
		out[i].Key = k
		if err := ValidateKey("delete", k); err != nil {
			out[i].Err = err
			continue
		}
		send = append(send, i)
	}
	batch := s.caps.Limits.MaxDeleteBatch
	if batch <= 0 {
		batch = 1000
	}
	for len(send) > 0 {
		n := min(batch, len(send))
		chunk := make([]string, n)
		for j, i := range send[:n] {
			chunk[j] = keys[i]
		}
		done, err := s.slot(ctx, "delete-many", "")
		if err != nil {
			return out, err
		}
		res, err := s.d.DeleteMany(ctx, chunk)
		done()
		if err != nil {
			return out, shape("delete-many", "", err)
		}
		if len(res) != n {
			return out, s.lie("delete-many", "", "returned %d results for %d keys", len(res), n)
		}
		for j, i := range send[:n] {
			if res[j].Key != keys[i] {
				return out, s.lie("delete-many", keys[i], "result %d names key %q", j, res[j].Key)
			}
			if res[j].Err != nil {
				out[i].Err = shape("delete", keys[i], res[j].Err)
			}
		}
		send = send[n:]
	}
	return out, nil
}

// ListPage returns one page, checked: in strictly increasing order, under
// the prefix, after StartAfter.
func (s *Store) ListPage(ctx context.Context, opts ListOptions) (ListPage, error) {
	if err := ValidatePrefix("list", opts.Prefix); err != nil {
		return ListPage{}, err
	}
	if opts.PageSize < 0 {
		return ListPage{}, Errorf("list", opts.Prefix, ErrInvalidArgument, "negative page size %d", opts.PageSize)
	}
	if max := s.caps.Limits.MaxListPage; max > 0 && (opts.PageSize == 0 || opts.PageSize > max) {
		opts.PageSize = max
	}
	switch {
	case opts.Delimiter == "":
	case opts.Delimiter != Delimiter:
		return ListPage{}, Errorf("list", opts.Prefix, ErrInvalidArgument, "delimiter %q: only %q is supported", opts.Delimiter, Delimiter)
	case !s.caps.ListDelimiter:
		return s.listLevel(ctx, opts)
	default:
		return s.listNativeLevel(ctx, opts)
	}
	done, err := s.slot(ctx, "list", opts.Prefix)
	if err != nil {
		return ListPage{}, err
	}
	page, err := s.d.List(ctx, opts)
	done()
	if err != nil {
		return ListPage{}, shape("list", opts.Prefix, err)
	}
	prev := opts.StartAfter
	for i, o := range page.Objects {
		switch {
		case !strings.HasPrefix(o.Key, opts.Prefix):
			return ListPage{}, s.lie("list", opts.Prefix, "returned key %q outside the prefix", o.Key)
		case (i > 0 || prev != "") && o.Key <= prev:
			return ListPage{}, s.lie("list", opts.Prefix, "returned key %q after %q: not in strictly increasing order", o.Key, prev)
		case opts.PageSize > 0 && i >= opts.PageSize:
			return ListPage{}, s.lie("list", opts.Prefix, "returned more than the page size %d", opts.PageSize)
		}
		prev = o.Key
	}
	if page.More && len(page.Objects) == 0 {
		// Nothing to continue after: a caller paging on would stop short
		// (and a discovery, say, leave tables out) rather than fail.
		return ListPage{}, s.lie("list", opts.Prefix, "returned an empty page that claims more")
	}
	return page, nil
}

// List returns every object under prefix, in order, paging as needed. If
// more than max objects exist it fails with ErrLimitExceeded rather than
// return a silently truncated result. max <= 0 means no limit.
func (s *Store) List(ctx context.Context, prefix string, max int) ([]Info, error) {
	var out []Info
	opts := ListOptions{Prefix: prefix}
	for {
		page, err := s.ListPage(ctx, opts)
		if err != nil {
			return nil, err
		}
		out = append(out, page.Objects...)
		if max > 0 && len(out) > max {
			return nil, Errorf("list", prefix, ErrLimitExceeded, "more than %d objects under the prefix: narrow the prefix or raise the limit", max)
		}
		if !page.More {
			return out, nil
		}
		if len(page.Objects) == 0 {
			return nil, s.lie("list", prefix, "returned an empty page that claims more")
		}
		opts.StartAfter = page.Objects[len(page.Objects)-1].Key
	}
}

// WithGates holds the named gates, each with at least scope, while fn runs.
// Gates are taken in canonical order (sorted by name) and released in
// reverse, so two callers needing overlapping sets cannot deadlock. If any
// gate is not declared with enough scope nothing is taken and the error is
// ErrUnsupported naming it.
func (s *Store) WithGates(ctx context.Context, scope Scope, names []string, fn func(context.Context) error) (err error) {
	if rerr := s.refuseReadOnly("acquire-gate", strings.Join(names, ",")); rerr != nil {
		return rerr
	}
	order, err := s.caps.RequireGates(s.adapter, scope, names...)
	if err != nil {
		return err
	}
	held := make([]GateLease, 0, len(order))
	defer func() {
		for i := len(held) - 1; i >= 0; i-- {
			// Release even if ctx is done: a gate must not outlive its holder.
			if rerr := s.d.ReleaseGate(context.WithoutCancel(ctx), held[i]); rerr != nil && err == nil {
				err = shape("release-gate", held[i].Name, rerr)
			}
		}
	}()
	for _, n := range order {
		l, aerr := s.d.AcquireGate(ctx, n)
		if aerr != nil {
			return shape("acquire-gate", n, aerr)
		}
		held = append(held, l)
	}
	return fn(ctx)
}

// lie reports a driver that broke the contract. It is ErrUnknown: nothing
// it returned can be trusted, so callers must keep rather than act.
func (s *Store) lie(op, key, format string, args ...any) error {
	return &Error{Op: op, Key: key, Kind: ErrUnknown,
		Msg: fmt.Sprintf("adapter %q broke the storage contract: ", s.adapter) + fmt.Sprintf(format, args...) +
			"; run `conformance run --adapter " + s.adapter + "` and report it to the adapter's author"}
}

// shape makes err an *Error for op and key, keeping its kind.
func shape(op, key string, err error) error {
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return &Error{Op: op, Key: key, Kind: ErrTransient, Err: err}
	}
	return Wrap(op, key, ErrUnknown, err)
}

// sizedReader fails a read that ends before, or runs past, the declared size.
type sizedReader struct {
	rc   io.ReadCloser
	left int64
	key  string
}

func (r *sizedReader) Read(p []byte) (int, error) {
	n, err := r.rc.Read(p)
	r.left -= int64(n)
	if r.left < 0 {
		return n, Errorf("get", r.key, ErrUnknown, "body is longer than its declared size")
	}
	if err == io.EOF && r.left > 0 {
		return n, Errorf("get", r.key, ErrTransient, "body ended %d bytes short of its declared size", r.left)
	}
	return n, err
}

func (r *sizedReader) Close() error { return r.rc.Close() }
