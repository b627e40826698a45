package storagetest

import (
	"context"
	"errors"
	"io"
	"strings"

	"github.com/retain-dev/retain/core/storage"
)

// ErrInjected is the cause of every error a Fail (or Injected) makes, so a
// test can tell an injected failure from a real one with errors.Is.
var ErrInjected = errors.New("injected failure")

// Injected is the error an injected failure of op on key answers: a
// *storage.Error of kind (storage.ErrUnknown for an error the driver could not
// classify) caused by ErrInjected.
func Injected(op Op, key string, kind storage.Kind) error {
	return &storage.Error{Op: string(op), Key: key, Kind: kind, Err: ErrInjected}
}

// Fail wraps a driver and fails, without reaching it, the puts and deletes
// whose keys Puts and Deletes select, with an Injected error of Kind. A
// delete-many holding a selected key fails whole (the call errs, nothing
// is deleted), unless PerKey: then only those keys fail, in the results,
// and the others are deleted.
type Fail struct {
	storage.Driver
	Kind    storage.Kind
	Puts    func(key string) bool
	Deletes func(key string) bool
	PerKey  bool
}

// Prefix selects the keys under p.
func Prefix(p string) func(string) bool {
	return func(k string) bool { return strings.HasPrefix(k, p) }
}

func (f *Fail) Put(ctx context.Context, key string, body io.Reader, o storage.PutOptions) (storage.Info, error) {
	if f.Puts != nil && f.Puts(key) {
		return storage.Info{}, Injected(OpPut, key, f.Kind)
	}
	return f.Driver.Put(ctx, key, body, o)
}

func (f *Fail) Delete(ctx context.Context, key string, o storage.DeleteOptions) error {
	if f.Deletes != nil && f.Deletes(key) {
		return Injected(OpDelete, key, f.Kind)
	}
	return f.Driver.Delete(ctx, key, o)
}

func (f *Fail) DeleteMany(ctx context.Context, keys []string) ([]storage.DeleteResult, error) {
	if f.Deletes == nil {
		return f.Driver.DeleteMany(ctx, keys)
	}
	if !f.PerKey {
		for _, k := range keys {
			if f.Deletes(k) {
				return nil, Injected(OpDeleteMany, k, f.Kind)
			}
		}
		return f.Driver.DeleteMany(ctx, keys)
	}
	out := make([]storage.DeleteResult, len(keys))
	idx := map[string]int{}
	var pass []string
	for i, k := range keys {
		out[i].Key = k
		if f.Deletes(k) {
			out[i].Err = Injected(OpDelete, k, f.Kind)
			continue
		}
		idx[k] = i
		pass = append(pass, k)
	}
	if len(pass) == 0 {
		return out, nil
	}
	res, err := f.Driver.DeleteMany(ctx, pass)
	for _, r := range res {
		out[idx[r.Key]] = r
	}
	return out, err
}
