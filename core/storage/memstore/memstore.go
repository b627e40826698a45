// Package memstore is the in-memory reference adapter: every capability
// native, for unit tests of the core. It is not a product backend: its
// objects live and die with one process.
package memstore

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/retain-dev/retain/core/storage"
)

// GateMetadata is the one gate memstore declares.
const GateMetadata = "metadata"

// Adapter opens a fresh, empty store for every mem:// location.
var Adapter = storage.Adapter{
	Name:    "memory",
	Schemes: []string{"mem"},
	Open: func(ctx context.Context, loc storage.Location) (storage.Driver, error) {
		return New(), nil
	},
}

type object struct {
	body []byte
	info storage.Info
}

// Driver is an in-memory storage.Driver.
type Driver struct {
	mu     sync.Mutex
	objs   map[string]object
	seq    uint64
	epoch  string
	gates  map[string]chan struct{}
	tokens map[string]string
}

// New returns an empty store.
func New() *Driver {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return &Driver{
		objs:   map[string]object{},
		epoch:  hex.EncodeToString(b[:]),
		gates:  map[string]chan struct{}{GateMetadata: make(chan struct{}, 1)},
		tokens: map[string]string{},
	}
}

// Capabilities: all native. Scope global is truthful because every writer
// of an in-memory store is inside this process.
func (d *Driver) Capabilities(ctx context.Context) (storage.Capabilities, error) {
	native := storage.Capability{Level: storage.LevelNative, Scope: storage.ScopeGlobal}
	return storage.Capabilities{
		CreateIfAbsent:   native,
		ReplaceIfVersion: native,
		DeleteIfVersion:  native,
		Gates:            []storage.GateSpec{{Name: GateMetadata, Scope: storage.ScopeGlobal, Covers: "multi-object metadata writes"}},
		Limits:           storage.Limits{MaxDeleteBatch: 1000, MaxListPage: 1000},
		OrderedList:      true,
		ListDelimiter:    true,
		ListAfterWrite:   true,
		UniqueVersions:   true,
		Notes:            []string{"in-memory: contents are lost when the process exits"},
	}, nil
}

func (d *Driver) Get(ctx context.Context, key string) (*storage.Reader, error) {
	if err := storage.ValidateKey("get", key); err != nil {
		return nil, err
	}
	d.mu.Lock()
	o, ok := d.objs[key]
	d.mu.Unlock()
	if !ok {
		return nil, storage.Errorf("get", key, storage.ErrNotFound, "no such object")
	}
	// Bodies are never mutated after a write, so sharing the slice is safe.
	return &storage.Reader{Info: o.info, ReadCloser: io.NopCloser(bytes.NewReader(o.body))}, nil
}

func (d *Driver) Stat(ctx context.Context, key string) (storage.Info, error) {
	if err := storage.ValidateKey("stat", key); err != nil {
		return storage.Info{}, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	o, ok := d.objs[key]
	if !ok {
		return storage.Info{}, storage.Errorf("stat", key, storage.ErrNotFound, "no such object")
	}
	return o.info, nil
}

func (d *Driver) Put(ctx context.Context, key string, body io.Reader, opts storage.PutOptions) (storage.Info, error) {
	if err := storage.ValidateKey("put", key); err != nil {
		return storage.Info{}, err
	}
	b, err := io.ReadAll(body)
	if err != nil {
		return storage.Info{}, storage.Wrap("put", key, storage.ErrUnknown, err)
	}
	if err := ctx.Err(); err != nil {
		return storage.Info{}, storage.Wrap("put", key, storage.ErrTransient, err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	cur, exists := d.objs[key]
	switch opts.Mode {
	case storage.PutOverwrite:
	case storage.PutCreateIfAbsent:
		if exists {
			return storage.Info{}, storage.Errorf("put", key, storage.ErrAlreadyExists, "create-if-absent: object exists")
		}
	case storage.PutReplaceIfVersion:
		if !exists {
			return storage.Info{}, storage.Errorf("put", key, storage.ErrNotFound, "replace-if-version: no such object")
		}
		if cur.info.Version != opts.IfVersion {
			return storage.Info{}, storage.Errorf("put", key, storage.ErrPreconditionFailed, "version is %s, expected %s", cur.info.Version, opts.IfVersion)
		}
	default:
		return storage.Info{}, storage.Errorf("put", key, storage.ErrInvalidArgument, "unknown put mode %d", opts.Mode)
	}
	d.seq++
	info := storage.Info{Key: key, Size: int64(len(b)), Version: fmt.Sprintf("%s-%d", d.epoch, d.seq), ModTime: time.Now()}
	d.objs[key] = object{body: b, info: info}
	return info, nil
}

func (d *Driver) Delete(ctx context.Context, key string, opts storage.DeleteOptions) error {
	if err := storage.ValidateKey("delete", key); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	cur, exists := d.objs[key]
	if opts.IfVersion != "" {
		if !exists {
			return storage.Errorf("delete", key, storage.ErrNotFound, "delete-if-version: no such object")
		}
		if cur.info.Version != opts.IfVersion {
			return storage.Errorf("delete", key, storage.ErrPreconditionFailed, "version is %s, expected %s", cur.info.Version, opts.IfVersion)
		}
	}
	delete(d.objs, key)
	return nil
}

func (d *Driver) DeleteMany(ctx context.Context, keys []string) ([]storage.DeleteResult, error) {
	out := make([]storage.DeleteResult, len(keys))
	for i, k := range keys {
		out[i] = storage.DeleteResult{Key: k, Err: d.Delete(ctx, k, storage.DeleteOptions{})}
	}
	return out, nil
}

func (d *Driver) List(ctx context.Context, opts storage.ListOptions) (storage.ListPage, error) {
	if err := storage.ValidatePrefix("list", opts.Prefix); err != nil {
		return storage.ListPage{}, err
	}
	size := opts.PageSize
	if size <= 0 || size > 1000 {
		size = 1000
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	var keys []string
	for k := range d.objs {
		if strings.HasPrefix(k, opts.Prefix) && k > opts.StartAfter {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var page storage.ListPage
	if opts.Delimiter == "" {
		if len(keys) > size {
			keys, page.More = keys[:size], true
		}
		for _, k := range keys {
			page.Objects = append(page.Objects, d.objs[k].info)
		}
		return page, nil
	}
	// One level: each key below a '/' after the prefix stands for its
	// folder, once; keys under a StartAfter folder are past.
	for _, k := range keys {
		if strings.HasSuffix(opts.StartAfter, storage.Delimiter) && strings.HasPrefix(k, opts.StartAfter) {
			continue
		}
		rest := strings.TrimPrefix(k, opts.Prefix)
		i := strings.Index(rest, storage.Delimiter)
		if i >= 0 {
			f := opts.Prefix + rest[:i+1]
			if n := len(page.Folders); n > 0 && page.Folders[n-1] == f {
				continue
			}
			if len(page.Objects)+len(page.Folders) == size {
				page.More = true
				break
			}
			page.Folders = append(page.Folders, f)
			continue
		}
		if len(page.Objects)+len(page.Folders) == size {
			page.More = true
			break
		}
		page.Objects = append(page.Objects, d.objs[k].info)
	}
	return page, nil
}

func (d *Driver) AcquireGate(ctx context.Context, name string) (storage.GateLease, error) {
	d.mu.Lock()
	ch, ok := d.gates[name]
	d.mu.Unlock()
	if !ok {
		return storage.GateLease{}, storage.Errorf("acquire-gate", name, storage.ErrUnsupported, "memstore declares only the %q gate", GateMetadata)
	}
	select {
	case ch <- struct{}{}:
	case <-ctx.Done():
		return storage.GateLease{}, storage.Wrap("acquire-gate", name, storage.ErrTransient, ctx.Err())
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	tok := hex.EncodeToString(b[:])
	d.mu.Lock()
	d.tokens[name] = tok
	d.mu.Unlock()
	return storage.GateLease{Name: name, Token: tok}, nil
}

func (d *Driver) ReleaseGate(ctx context.Context, l storage.GateLease) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	ch, ok := d.gates[l.Name]
	if !ok {
		return storage.Errorf("release-gate", l.Name, storage.ErrUnsupported, "memstore declares only the %q gate", GateMetadata)
	}
	if l.Token == "" || d.tokens[l.Name] != l.Token {
		return storage.Errorf("release-gate", l.Name, storage.ErrPreconditionFailed, "token does not hold the gate")
	}
	delete(d.tokens, l.Name)
	<-ch
	return nil
}

func (d *Driver) Close() error { return nil }
