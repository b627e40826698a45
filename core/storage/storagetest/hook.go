package storagetest

import (
	"context"
	"io"
	"sync"

	"github.com/retain-dev/retain/core/storage"
)

// Op names a driver operation that a Hook sees or a Fail selects.
type Op string

const (
	OpGet        Op = "get"
	OpStat       Op = "stat"
	OpList       Op = "list"
	OpPut        Op = "put"
	OpDelete     Op = "delete"
	OpDeleteMany Op = "delete-many"
	OpGate       Op = "acquire-gate"
	OpRelease    Op = "release-gate"
)

// Call is one driver operation as a hook sees it.
type Call struct {
	Op   Op
	Key  string              // the key; the prefix for list; the gate for acquire-gate; empty for delete-many
	Keys []string            // delete-many's keys
	Put  storage.PutOptions  // put's options
	List storage.ListOptions // list's options
}

// Hook wraps a driver and runs the functions set with Before and After
// around its data operations (get, stat, list, put, delete, delete-many,
// acquire-gate, release-gate); the rest pass through. Set them before the store is
// shared with goroutines or set them through the methods, which lock.
type Hook struct {
	storage.Driver
	mu     sync.Mutex
	before func(Call) error
	after  func(Call, error) error
}

// NewHook wraps d with no hooks yet.
func NewHook(d storage.Driver) *Hook { return &Hook{Driver: d} }

// Before sets fn to run ahead of every operation; a non-nil error fails the
// operation without reaching the driver.
func (h *Hook) Before(fn func(Call) error) *Hook {
	h.mu.Lock()
	h.before = fn
	h.mu.Unlock()
	return h
}

// After sets fn to run once an operation returns; what it returns replaces
// the operation's error (a put then answers a zero Info, as a lost
// response does).
func (h *Hook) After(fn func(Call, error) error) *Hook {
	h.mu.Lock()
	h.after = fn
	h.mu.Unlock()
	return h
}

func (h *Hook) fns() (func(Call) error, func(Call, error) error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.before, h.after
}

func (h *Hook) pre(c Call) error {
	if b, _ := h.fns(); b != nil {
		return b(c)
	}
	return nil
}

func (h *Hook) post(c Call, err error) error {
	if _, a := h.fns(); a != nil {
		return a(c, err)
	}
	return err
}

func (h *Hook) Get(ctx context.Context, key string) (*storage.Reader, error) {
	c := Call{Op: OpGet, Key: key}
	if err := h.pre(c); err != nil {
		return nil, err
	}
	r, err := h.Driver.Get(ctx, key)
	if perr := h.post(c, err); perr != err {
		if r != nil {
			r.Close()
		}
		return nil, perr
	}
	return r, err
}

func (h *Hook) Stat(ctx context.Context, key string) (storage.Info, error) {
	c := Call{Op: OpStat, Key: key}
	if err := h.pre(c); err != nil {
		return storage.Info{}, err
	}
	info, err := h.Driver.Stat(ctx, key)
	if perr := h.post(c, err); perr != err {
		return storage.Info{}, perr
	}
	return info, err
}

func (h *Hook) List(ctx context.Context, o storage.ListOptions) (storage.ListPage, error) {
	c := Call{Op: OpList, Key: o.Prefix, List: o}
	if err := h.pre(c); err != nil {
		return storage.ListPage{}, err
	}
	p, err := h.Driver.List(ctx, o)
	if perr := h.post(c, err); perr != err {
		return storage.ListPage{}, perr
	}
	return p, err
}

func (h *Hook) Put(ctx context.Context, key string, body io.Reader, o storage.PutOptions) (storage.Info, error) {
	c := Call{Op: OpPut, Key: key, Put: o}
	if err := h.pre(c); err != nil {
		return storage.Info{}, err
	}
	info, err := h.Driver.Put(ctx, key, body, o)
	if perr := h.post(c, err); perr != err {
		return storage.Info{}, perr
	}
	return info, err
}

func (h *Hook) Delete(ctx context.Context, key string, o storage.DeleteOptions) error {
	c := Call{Op: OpDelete, Key: key}
	if err := h.pre(c); err != nil {
		return err
	}
	return h.post(c, h.Driver.Delete(ctx, key, o))
}

func (h *Hook) DeleteMany(ctx context.Context, keys []string) ([]storage.DeleteResult, error) {
	c := Call{Op: OpDeleteMany, Keys: keys}
	if err := h.pre(c); err != nil {
		return nil, err
	}
	res, err := h.Driver.DeleteMany(ctx, keys)
	if perr := h.post(c, err); perr != err {
		return nil, perr
	}
	return res, err
}

func (h *Hook) AcquireGate(ctx context.Context, name string) (storage.GateLease, error) {
	c := Call{Op: OpGate, Key: name}
	if err := h.pre(c); err != nil {
		return storage.GateLease{}, err
	}
	l, err := h.Driver.AcquireGate(ctx, name)
	if perr := h.post(c, err); perr != err {
		return storage.GateLease{}, perr
	}
	return l, err
}

func (h *Hook) ReleaseGate(ctx context.Context, l storage.GateLease) error {
	c := Call{Op: OpRelease, Key: l.Name}
	if err := h.pre(c); err != nil {
		return err
	}
	return h.post(c, h.Driver.ReleaseGate(ctx, l))
}

// Once returns a Before function that runs fn once, ahead of the first
// call match selects (the point a race is provoked at), and lets every
// call through.
func Once(match func(Call) bool, fn func()) func(Call) error {
	var mu sync.Mutex
	done := false
	return func(c Call) error {
		mu.Lock()
		run := !done && match(c)
		if run {
			done = true
		}
		mu.Unlock()
		if run {
			fn()
		}
		return nil
	}
}

// PutOf selects the puts of key.
func PutOf(key string) func(Call) bool {
	return func(c Call) bool { return c.Op == OpPut && c.Key == key }
}
