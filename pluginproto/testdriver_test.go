package pluginproto

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/retain-dev/retain/core"
)

// testAdapter serves testDriver, an in-memory core.Driver with every mode
// native and a few magic keys for the boundary tests:
//
//	block/...        Get, Stat, Put and Delete block until ctx ends, then
//	                 return the bare ctx.Err()
//	err/<n>          Get, Stat, Put and Delete fail with kind n
//	slowbody/...     Get declares 3 MiB, sends 1 MiB, then blocks until ctx ends
//	shortbody/...    Get declares 100 bytes and sends 50
//	probe/unblocked  Stat reports in Size how many blocked calls saw ctx end
//
// It deliberately does not validate keys, so a test can tell whether the
// plugin half did.
var testAdapter = core.Adapter{
	Name:    "testmem",
	Schemes: []string{"testmem"},
	Open: func(ctx context.Context, loc core.Location) (core.Driver, error) {
		if msg := loc.Options["fail"]; msg != "" {
			return nil, core.Errorf("open", "", core.ErrInvalidArgument, "testmem refuses to open: %s", msg)
		}
		return newTestDriver(), nil
	},
}

const testGate = "g"

type testObj struct {
	body []byte
	info core.Info
}

type testDriver struct {
	mu        sync.Mutex
	objs      map[string]testObj
	seq       int
	gate      chan string // holds the token of the held gate
	unblocked atomic.Int64
}

func newTestDriver() *testDriver {
	return &testDriver{objs: map[string]testObj{}, gate: make(chan string, 1)}
}

func (d *testDriver) block(ctx context.Context) error {
	<-ctx.Done()
	d.unblocked.Add(1)
	return ctx.Err()
}

// magic handles the magic keys common to several operations.
func (d *testDriver) magic(ctx context.Context, op, key string) (bool, error) {
	switch {
	case strings.HasPrefix(key, "block/"):
		return true, d.block(ctx)
	case strings.HasPrefix(key, "err/"):
		n, _ := strconv.Atoi(strings.TrimPrefix(key, "err/"))
		return true, &core.Error{Op: op, Key: key, Kind: core.Kind(n), Msg: fmt.Sprintf("injected kind %d", n)}
	}
	return false, nil
}

func (d *testDriver) Capabilities(context.Context) (core.Capabilities, error) {
	native := core.Capability{Level: core.LevelNative, Scope: core.ScopeGlobal}
	return core.Capabilities{
		CreateIfAbsent:   native,
		ReplaceIfVersion: native,
		DeleteIfVersion:  core.Capability{Level: core.LevelGated, Gate: testGate, Scope: core.ScopeProcess, Reason: "for the test"},
		Gates:            []core.GateSpec{{Name: testGate, Scope: core.ScopeProcess, Covers: "everything"}},
		Limits:           core.Limits{MaxObjectSize: 1 << 30, MaxDeleteBatch: 100, MaxListPage: 1000},
		OrderedList:      true,
		ListAfterWrite:   true,
		Notes:            []string{"in-test driver", "ünïcödé"},
	}, nil
}

type blockingBody struct {
	ctx  context.Context
	d    *testDriver
	left int
}

func (b *blockingBody) Read(p []byte) (int, error) {
	if b.left == 0 {
		return 0, b.d.block(b.ctx)
	}
	n := min(len(p), b.left)
	for i := range p[:n] {
		p[i] = 'x'
	}
	b.left -= n
	return n, nil
}

func (d *testDriver) Get(ctx context.Context, key string) (*core.Reader, error) {
	if ok, err := d.magic(ctx, "get", key); ok {
		return nil, err
	}
	switch {
	case strings.HasPrefix(key, "slowbody/"):
		return &core.Reader{Info: core.Info{Key: key, Size: 3 << 20, Version: "slow"},
			ReadCloser: io.NopCloser(&blockingBody{ctx: ctx, d: d, left: 1 << 20})}, nil
	case strings.HasPrefix(key, "shortbody/"):
		return &core.Reader{Info: core.Info{Key: key, Size: 100, Version: "short"},
			ReadCloser: io.NopCloser(bytes.NewReader(make([]byte, 50)))}, nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	o, ok := d.objs[key]
	if !ok {
		return nil, core.Errorf("get", key, core.ErrNotFound, "no such object")
	}
	return &core.Reader{Info: o.info, ReadCloser: io.NopCloser(bytes.NewReader(o.body))}, nil
}

func (d *testDriver) Stat(ctx context.Context, key string) (core.Info, error) {
	if ok, err := d.magic(ctx, "stat", key); ok {
		return core.Info{}, err
	}
	if key == "probe/unblocked" {
		return core.Info{Key: key, Size: d.unblocked.Load(), Version: "probe"}, nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	o, ok := d.objs[key]
	if !ok {
		return core.Info{}, core.Errorf("stat", key, core.ErrNotFound, "no such object")
	}
	return o.info, nil
}

func (d *testDriver) Put(ctx context.Context, key string, body io.Reader, opts core.PutOptions) (core.Info, error) {
	if ok, err := d.magic(ctx, "put", key); ok {
		return core.Info{}, err
	}
	b, err := io.ReadAll(body)
	if err != nil {
		return core.Info{}, core.Wrap("put", key, core.ErrUnknown, err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	old, exists := d.objs[key]
	switch opts.Mode {
	case core.PutOverwrite:
	case core.PutCreateIfAbsent:
		if exists {
			return core.Info{}, core.Errorf("put", key, core.ErrAlreadyExists, "the key exists")
		}
	case core.PutReplaceIfVersion:
		if !exists {
			return core.Info{}, core.Errorf("put", key, core.ErrNotFound, "no such object")
		}
		if old.info.Version != opts.IfVersion {
			return core.Info{}, core.Errorf("put", key, core.ErrPreconditionFailed, "version is %s", old.info.Version)
		}
	default:
		return core.Info{}, core.Errorf("put", key, core.ErrInvalidArgument, "unknown put mode %d", opts.Mode)
	}
	d.seq++
	info := core.Info{Key: key, Size: int64(len(b)), Version: fmt.Sprintf("v%d", d.seq), ModTime: time.Now()}
	d.objs[key] = testObj{body: b, info: info}
	return info, nil
}

func (d *testDriver) Delete(ctx context.Context, key string, opts core.DeleteOptions) error {
	if ok, err := d.magic(ctx, "delete", key); ok {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	o, ok := d.objs[key]
	if opts.IfVersion != "" {
		if !ok {
			return core.Errorf("delete", key, core.ErrNotFound, "no such object")
		}
		if o.info.Version != opts.IfVersion {
			return core.Errorf("delete", key, core.ErrPreconditionFailed, "version is %s", o.info.Version)
		}
	}
	delete(d.objs, key)
	return nil
}

func (d *testDriver) DeleteMany(ctx context.Context, keys []string) ([]core.DeleteResult, error) {
	out := make([]core.DeleteResult, len(keys))
	for i, k := range keys {
		out[i] = core.DeleteResult{Key: k, Err: d.Delete(ctx, k, core.DeleteOptions{})}
	}
	return out, nil
}

func (d *testDriver) List(ctx context.Context, opts core.ListOptions) (core.ListPage, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var keys []string
	for k := range d.objs {
		if strings.HasPrefix(k, opts.Prefix) && k > opts.StartAfter {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	size := opts.PageSize
	if size <= 0 || size > 1000 {
		size = 1000
	}
	var page core.ListPage
	if len(keys) > size {
		keys, page.More = keys[:size], true
	}
	for _, k := range keys {
		page.Objects = append(page.Objects, d.objs[k].info)
	}
	return page, nil
}

func (d *testDriver) AcquireGate(ctx context.Context, name string) (core.GateLease, error) {
	if name != testGate {
		return core.GateLease{}, core.Errorf("acquire-gate", name, core.ErrUnsupported, "no gate %q", name)
	}
	d.mu.Lock()
	d.seq++
	token := fmt.Sprintf("t%d", d.seq)
	d.mu.Unlock()
	select {
	case d.gate <- token:
		return core.GateLease{Name: name, Token: token}, nil
	case <-ctx.Done():
		d.unblocked.Add(1)
		return core.GateLease{}, ctx.Err()
	}
}

func (d *testDriver) ReleaseGate(ctx context.Context, l core.GateLease) error {
	if l.Name != testGate {
		return core.Errorf("release-gate", l.Name, core.ErrUnsupported, "no gate %q", l.Name)
	}
	select {
	case t := <-d.gate:
		if t == l.Token {
			return nil
		}
		d.gate <- t
	default:
	}
	return core.Errorf("release-gate", l.Name, core.ErrInvalidArgument, "token %q does not hold the gate", l.Token)
}

func (d *testDriver) Close() error { return nil }
