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

	"github.com/retain-dev/retain/sdk/core"
)

// GateMetadata is the one gate memstore declares.
const GateMetadata = "metadata"

// Adapter opens a fresh, empty store for every mem:// location.
var Adapter = core.Adapter{
	Name:    "memory",
	Schemes: []string{"mem"},
	Open: func(ctx context.Context, loc core.Location) (core.Driver, error) {
		return New(), nil
	},
}

type object struct {
	body []byte
	info core.Info
}

// Driver is an in-memory core.Driver.
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
func (d *Driver) Capabilities(ctx context.Context) (core.Capabilities, error) {
	native := core.Capability{Level: core.LevelNative, Scope: core.ScopeGlobal}
	return core.Capabilities{
		CreateIfAbsent:   native,
		ReplaceIfVersion: native,
		DeleteIfVersion:  native,
		Gates:            []core.GateSpec{{Name: GateMetadata, Scope: core.ScopeGlobal, Covers: "multi-object metadata writes"}},
		Limits:           core.Limits{MaxDeleteBatch: 1000, MaxListPage: 1000},
		OrderedList:      true,
		ListDelimiter:    true,
		ListAfterWrite:   true,
		UniqueVersions:   true,
		Notes:            []string{"in-memory: contents are lost when the process exits"},
	}, nil
}

func (d *Driver) Get(ctx context.Context, key string) (*core.Reader, error) {
	if err := core.ValidateKey("get", key); err != nil {
		return nil, err
	}
	d.mu.Lock()
	o, ok := d.objs[key]
	d.mu.Unlock()
	if !ok {
		return nil, core.Errorf("get", key, core.ErrNotFound, "no such object")
	}
	// Bodies are never mutated after a write, so sharing the slice is safe.
	return &core.Reader{Info: o.info, ReadCloser: io.NopCloser(bytes.NewReader(o.body))}, nil
}

func (d *Driver) Stat(ctx context.Context, key string) (core.Info, error) {
	if err := core.ValidateKey("stat", key); err != nil {
		return core.Info{}, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	o, ok := d.objs[key]
	if !ok {
		return core.Info{}, core.Errorf("stat", key, core.ErrNotFound, "no such object")
	}
	return o.info, nil
}

func (d *Driver) Put(ctx context.Context, key string, body io.Reader, opts core.PutOptions) (core.Info, error) {
	if err := core.ValidateKey("put", key); err != nil {
		return core.Info{}, err
	}
	b, err := io.ReadAll(body)
	if err != nil {
		return core.Info{}, core.Wrap("put", key, core.ErrUnknown, err)
	}
	if err := ctx.Err(); err != nil {
		return core.Info{}, core.Wrap("put", key, core.ErrTransient, err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	cur, exists := d.objs[key]
	switch opts.Mode {
	case core.PutOverwrite:
	case core.PutCreateIfAbsent:
		if exists {
			return core.Info{}, core.Errorf("put", key, core.ErrAlreadyExists, "create-if-absent: object exists")
		}
	case core.PutReplaceIfVersion:
		if !exists {
			return core.Info{}, core.Errorf("put", key, core.ErrNotFound, "replace-if-version: no such object")
		}
		if cur.info.Version != opts.IfVersion {
			return core.Info{}, core.Errorf("put", key, core.ErrPreconditionFailed, "version is %s, expected %s", cur.info.Version, opts.IfVersion)
		}
	default:
		return core.Info{}, core.Errorf("put", key, core.ErrInvalidArgument, "unknown put mode %d", opts.Mode)
	}
	d.seq++
	info := core.Info{Key: key, Size: int64(len(b)), Version: fmt.Sprintf("%s-%d", d.epoch, d.seq), ModTime: time.Now()}
	d.objs[key] = object{body: b, info: info}
	return info, nil
}

func (d *Driver) Delete(ctx context.Context, key string, opts core.DeleteOptions) error {
	if err := core.ValidateKey("delete", key); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	cur, exists := d.objs[key]
	if opts.IfVersion != "" {
		if !exists {
			return core.Errorf("delete", key, core.ErrNotFound, "delete-if-version: no such object")
		}
		if cur.info.Version != opts.IfVersion {
			return core.Errorf("delete", key, core.ErrPreconditionFailed, "version is %s, expected %s", cur.info.Version, opts.IfVersion)
		}
	}
	delete(d.objs, key)
	return nil
}

func (d *Driver) DeleteMany(ctx context.Context, keys []string) ([]core.DeleteResult, error) {
	out := make([]core.DeleteResult, len(keys))
	for i, k := range keys {
		out[i] = core.DeleteResult{Key: k, Err: d.Delete(ctx, k, core.DeleteOptions{})}
	}
	return out, nil
}

func (d *Driver) List(ctx context.Context, opts core.ListOptions) (core.ListPage, error) {
	if err := core.ValidatePrefix("list", opts.Prefix); err != nil {
		return core.ListPage{}, err
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
	var page core.ListPage
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
		if strings.HasSuffix(opts.StartAfter, core.Delimiter) && strings.HasPrefix(k, opts.StartAfter) {
			continue
		}
		rest := strings.TrimPrefix(k, opts.Prefix)
		i := strings.Index(rest, core.Delimiter)
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

func (d *Driver) AcquireGate(ctx context.Context, name string) (core.GateLease, error) {
	d.mu.Lock()
	ch, ok := d.gates[name]
	d.mu.Unlock()
	if !ok {
		return core.GateLease{}, core.Errorf("acquire-gate", name, core.ErrUnsupported, "memstore declares only the %q gate", GateMetadata)
	}
	select {
	case ch <- struct{}{}:
	case <-ctx.Done():
		return core.GateLease{}, core.Wrap("acquire-gate", name, core.ErrTransient, ctx.Err())
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	tok := hex.EncodeToString(b[:])
	d.mu.Lock()
	d.tokens[name] = tok
	d.mu.Unlock()
	return core.GateLease{Name: name, Token: tok}, nil
}

func (d *Driver) ReleaseGate(ctx context.Context, l core.GateLease) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	ch, ok := d.gates[l.Name]
	if !ok {
		return core.Errorf("release-gate", l.Name, core.ErrUnsupported, "memstore declares only the %q gate", GateMetadata)
	}
	if l.Token == "" || d.tokens[l.Name] != l.Token {
		return core.Errorf("release-gate", l.Name, core.ErrPreconditionFailed, "token does not hold the gate")
	}
	delete(d.tokens, l.Name)
	<-ch
	return nil
}

func (d *Driver) Close() error { return nil }
