package storage

import (
	"context"
	"io"
	"strings"
)

// Sub returns a driver that sees only the keys under prefix of d, with the
// prefix removed: a store within a store. The conformance suite runs each
// case in a fresh sub-store so it never touches anything else. Gates and
// capabilities are those of d.
func Sub(d Driver, prefix string) (Driver, error) {
	prefix = strings.Trim(prefix, "/")
	if err := ValidateKey("sub", prefix); err != nil {
		return nil, err
	}
	return &subDriver{d: d, p: prefix + "/"}, nil
}

type subDriver struct {
	d Driver
	p string
}

func (s *subDriver) key(op, k string) (string, error) {
	// Validate before joining: "a/../b" must not become a valid full key.
	if err := ValidateKey(op, k); err != nil {
		return "", err
	}
	return s.p + k, nil
}

func (s *subDriver) info(i Info) Info { i.Key = strings.TrimPrefix(i.Key, s.p); return i }

// unkey rewrites the key an error names, so messages speak of the sub-store.
func (s *subDriver) err(err error) error {
	if e, ok := err.(*Error); ok && strings.HasPrefix(e.Key, s.p) {
		c := *e
		c.Key = strings.TrimPrefix(e.Key, s.p)
		return &c
	}
	return err
}

func (s *subDriver) Capabilities(ctx context.Context) (Capabilities, error) {
	return s.d.Capabilities(ctx)
}

func (s *subDriver) Get(ctx context.Context, key string) (*Reader, error) {
	k, err := s.key("get", key)
	if err != nil {
		return nil, err
	}
	r, err := s.d.Get(ctx, k)
	if err != nil {
		return nil, s.err(err)
	}
	r.Info = s.info(r.Info)
	return r, nil
}

func (s *subDriver) Stat(ctx context.Context, key string) (Info, error) {
	k, err := s.key("stat", key)
	if err != nil {
		return Info{}, err
	}
	i, err := s.d.Stat(ctx, k)
	return s.info(i), s.err(err)
}

func (s *subDriver) Put(ctx context.Context, key string, body io.Reader, opts PutOptions) (Info, error) {
	k, err := s.key("put", key)
	if err != nil {
		return Info{}, err
	}
	i, err := s.d.Put(ctx, k, body, opts)
	return s.info(i), s.err(err)
}

func (s *subDriver) Delete(ctx context.Context, key string, opts DeleteOptions) error {
	k, err := s.key("delete", key)
	if err != nil {
		return err
	}
	return s.err(s.d.Delete(ctx, k, opts))
}

func (s *subDriver) DeleteMany(ctx context.Context, keys []string) ([]DeleteResult, error) {
	full := make([]string, len(keys))
	for i, k := range keys {
		if err := ValidateKey("delete", k); err != nil {
			// Refuse the whole call: the portable Store never sends an
			// invalid key, so this is a caller bypassing it.
			return nil, err
		}
		full[i] = s.p + k
	}
	res, err := s.d.DeleteMany(ctx, full)
	for i := range res {
		res[i].Key = strings.TrimPrefix(res[i].Key, s.p)
		res[i].Err = s.err(res[i].Err)
	}
	return res, s.err(err)
}

func (s *subDriver) List(ctx context.Context, opts ListOptions) (ListPage, error) {
	if err := ValidatePrefix("list", opts.Prefix); err != nil {
		return ListPage{}, err
	}
	opts.Prefix = s.p + opts.Prefix
	if opts.StartAfter != "" {
		opts.StartAfter = s.p + opts.StartAfter
	}
	page, err := s.d.List(ctx, opts)
	for i := range page.Objects {
		page.Objects[i] = s.info(page.Objects[i])
	}
	for i, f := range page.Folders {
		page.Folders[i] = strings.TrimPrefix(f, s.p)
	}
	return page, s.err(err)
}

func (s *subDriver) AcquireGate(ctx context.Context, name string) (GateLease, error) {
	return s.d.AcquireGate(ctx, name)
}

func (s *subDriver) ReleaseGate(ctx context.Context, l GateLease) error {
	return s.d.ReleaseGate(ctx, l)
}

// Close does not close the parent: a sub-store borrows it.
func (s *subDriver) Close() error { return nil }

// StatMany and GetMany pass a batch to d if it has batch reads, and answer
// ErrUnsupported otherwise (the Store then reads key by key).
func (s *subDriver) StatMany(ctx context.Context, keys []string) ([]StatResult, error) {
	br, ok := s.d.(BatchReader)
	if !ok {
		return nil, Errorf("stat-many", "", ErrUnsupported, "the driver has no batch reads")
	}
	full, err := s.keys("stat", keys)
	if err != nil {
		return nil, err
	}
	res, err := br.StatMany(ctx, full)
	if err != nil {
		return nil, s.err(err)
	}
	for i := range res {
		res[i].Key = strings.TrimPrefix(res[i].Key, s.p)
		res[i].Info = s.info(res[i].Info)
		res[i].Err = s.err(res[i].Err)
	}
	return res, nil
}

func (s *subDriver) GetMany(ctx context.Context, keys []string, maxBytes int64) ([]GetResult, error) {
	br, ok := s.d.(BatchReader)
	if !ok {
		return nil, Errorf("get-many", "", ErrUnsupported, "the driver has no batch reads")
	}
	full, err := s.keys("get", keys)
	if err != nil {
		return nil, err
	}
	res, err := br.GetMany(ctx, full, maxBytes)
	if err != nil {
		return nil, s.err(err)
	}
	for i := range res {
		res[i].Key = strings.TrimPrefix(res[i].Key, s.p)
		res[i].Info = s.info(res[i].Info)
		res[i].Err = s.err(res[i].Err)
	}
	return res, nil
}

// keys are the full keys of a batch; an invalid one fails it whole (the
// Store never sends one).
func (s *subDriver) keys(op string, keys []string) ([]string, error) {
	full := make([]string, len(keys))
	for i, k := range keys {
		var err error
		if full[i], err = s.key(op, k); err != nil {
			return nil, err
		}
	}
	return full, nil
}
