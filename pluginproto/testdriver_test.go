package pluginproto

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/memstore"
)

// testAdapter serves testDriver: memstore with its own capabilities and
// gate, and a few magic keys for the boundary tests:
//
//	block/...        Get, Stat, Put and Delete block until ctx ends, then
//	                 return the bare ctx.Err()
//	err/<n>          Get, Stat, Put and Delete fail with kind n
//	slowbody/...     Get declares 3 MiB, sends 1 MiB, then blocks until ctx ends
//	shortbody/...    Get declares 100 bytes and sends 50
//	probe/unblocked  Stat reports in Size how many blocked calls saw ctx end
//	hang/...         Get, Stat, Put (before reading the body), Delete, and List
//	                 of a prefix under hang/, never return, whatever ctx does;
//	                 so does AcquireGate of the gate "hang"
//	hangafter/...    Put reads the whole body, then never returns
//	hangbody/...     Get declares 3 MiB, sends 1 MiB, then never sends more
//	trickle/<n>      Get sends n pieces of 32 KiB, one every 150 ms
//
// A location with the option hang=open makes Open write the plugin's pid to
// the file named by the option pidfile and never return.
//
// It deliberately does not refuse invalid keys as memstore does, so a test
// can tell whether the plugin half did: one that reaches it fails with
// ErrUnknown, never ErrInvalidArgument.
var testAdapter = storage.Adapter{
	Name:    "testmem",
	Schemes: []string{"testmem"},
	Open: func(ctx context.Context, loc storage.Location) (storage.Driver, error) {
		if loc.Options["hang"] == "open" {
			os.WriteFile(loc.Options["pidfile"], []byte(strconv.Itoa(os.Getpid())), 0o600)
			hang()
		}
		if msg := loc.Options["fail"]; msg != "" {
			return nil, storage.Errorf("open", "", storage.ErrInvalidArgument, "testmem refuses to open: %s", msg)
		}
		return newTestDriver(), nil
	},
}

const testGate = "g"

// testDriver keeps its objects in the embedded memstore.Driver; everything
// else is its own.
type testDriver struct {
	*memstore.Driver
	gate      chan string // holds the token of the held gate
	tokens    atomic.Int64
	unblocked atomic.Int64
}

func newTestDriver() *testDriver {
	return &testDriver{Driver: memstore.New(), gate: make(chan string, 1)}
}

// hang never returns: a plugin that stopped answering, ctx or no ctx.
func hang() { select {} }

// trickle is a body that arrives slowly but steadily.
type trickle struct {
	ctx    context.Context
	pieces int
	buf    []byte
}

const tricklePiece = 32 << 10

func (t *trickle) Read(p []byte) (int, error) {
	if len(t.buf) == 0 {
		if t.pieces == 0 {
			return 0, io.EOF
		}
		select {
		case <-time.After(150 * time.Millisecond):
		case <-t.ctx.Done():
			return 0, t.ctx.Err()
		}
		t.pieces--
		t.buf = bytes.Repeat([]byte{'t'}, tricklePiece)
	}
	n := copy(p, t.buf)
	t.buf = t.buf[n:]
	return n, nil
}

// hangingBody sends left bytes, then hangs.
type hangingBody struct{ left int }

func (b *hangingBody) Read(p []byte) (int, error) {
	if b.left == 0 {
		hang()
	}
	n := min(len(p), b.left)
	clear(p[:n])
	b.left -= n
	return n, nil
}

func (d *testDriver) block(ctx context.Context) error {
	<-ctx.Done()
	d.unblocked.Add(1)
	return ctx.Err()
}

// magic handles the magic keys common to several operations, and keys the
// plugin half should have refused.
func (d *testDriver) magic(ctx context.Context, op, key string) (bool, error) {
	switch {
	case strings.HasPrefix(key, "block/"):
		return true, d.block(ctx)
	case strings.HasPrefix(key, "hang/"):
		hang()
	case strings.HasPrefix(key, "err/"):
		n, _ := strconv.Atoi(strings.TrimPrefix(key, "err/"))
		return true, &storage.Error{Op: op, Key: key, Kind: storage.Kind(n), Msg: fmt.Sprintf("injected kind %d", n)}
	case storage.ValidateKey(op, key) != nil:
		return true, unrefused(op, key)
	}
	return false, nil
}

// unrefused is the error for a key or prefix the plugin half should have
// refused before it reached the driver.
func unrefused(op, key string) error {
	return storage.Errorf(op, key, storage.ErrUnknown, "the plugin half let %q through to the driver", key)
}

func (d *testDriver) Capabilities(context.Context) (storage.Capabilities, error) {
	native := storage.Capability{Level: storage.LevelNative, Scope: storage.ScopeGlobal}
	return storage.Capabilities{
		CreateIfAbsent:   native,
		ReplaceIfVersion: native,
		DeleteIfVersion:  storage.Capability{Level: storage.LevelGated, Gate: testGate, Scope: storage.ScopeProcess, Reason: "for the test"},
		Gates:            []storage.GateSpec{{Name: testGate, Scope: storage.ScopeProcess, Covers: "everything"}},
		Limits:           storage.Limits{MaxObjectSize: 1 << 30, MaxDeleteBatch: 100, MaxListPage: 1000, Parallelism: 24},
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

func (d *testDriver) Get(ctx context.Context, key string) (*storage.Reader, error) {
	if ok, err := d.magic(ctx, "get", key); ok {
		return nil, err
	}
	switch {
	case strings.HasPrefix(key, "slowbody/"):
		return &storage.Reader{Info: storage.Info{Key: key, Size: 3 << 20, Version: "slow"},
			ReadCloser: io.NopCloser(&blockingBody{ctx: ctx, d: d, left: 1 << 20})}, nil
	case strings.HasPrefix(key, "hangbody/"):
		return &storage.Reader{Info: storage.Info{Key: key, Size: 3 << 20, Version: "hang"},
			ReadCloser: io.NopCloser(&hangingBody{left: 1 << 20})}, nil
	case strings.HasPrefix(key, "trickle/"):
		n, _ := strconv.Atoi(strings.TrimPrefix(key, "trickle/"))
		return &storage.Reader{Info: storage.Info{Key: key, Size: int64(n) * tricklePiece, Version: "trickle"},
			ReadCloser: io.NopCloser(&trickle{ctx: ctx, pieces: n})}, nil
	case strings.HasPrefix(key, "shortbody/"):
		return &storage.Reader{Info: storage.Info{Key: key, Size: 100, Version: "short"},
			ReadCloser: io.NopCloser(bytes.NewReader(make([]byte, 50)))}, nil
	}
	return d.Driver.Get(ctx, key)
}

func (d *testDriver) Stat(ctx context.Context, key string) (storage.Info, error) {
	if ok, err := d.magic(ctx, "stat", key); ok {
		return storage.Info{}, err
	}
	if key == "probe/unblocked" {
		return storage.Info{Key: key, Size: d.unblocked.Load(), Version: "probe"}, nil
	}
	return d.Driver.Stat(ctx, key)
}

func (d *testDriver) Put(ctx context.Context, key string, body io.Reader, opts storage.PutOptions) (storage.Info, error) {
	if ok, err := d.magic(ctx, "put", key); ok {
		return storage.Info{}, err
	}
	if strings.HasPrefix(key, "hangafter/") {
		io.Copy(io.Discard, body)
		hang()
	}
	// memstore refuses a write whose ctx has ended; this driver writes any
	// body that ends cleanly, so a plugin half that cuts a body short but
	// ends it as if complete shows as a written object.
	return d.Driver.Put(context.WithoutCancel(ctx), key, body, opts)
}

func (d *testDriver) Delete(ctx context.Context, key string, opts storage.DeleteOptions) error {
	if ok, err := d.magic(ctx, "delete", key); ok {
		return err
	}
	return d.Driver.Delete(ctx, key, opts)
}

// DeleteMany deletes one key at a time through Delete, magic keys included.
func (d *testDriver) DeleteMany(ctx context.Context, keys []string) ([]storage.DeleteResult, error) {
	out := make([]storage.DeleteResult, len(keys))
	for i, k := range keys {
		out[i] = storage.DeleteResult{Key: k, Err: d.Delete(ctx, k, storage.DeleteOptions{})}
	}
	return out, nil
}

func (d *testDriver) List(ctx context.Context, opts storage.ListOptions) (storage.ListPage, error) {
	if storage.ValidatePrefix("list", opts.Prefix) != nil {
		return storage.ListPage{}, unrefused("list", opts.Prefix)
	}
	if strings.HasPrefix(opts.Prefix, "hang/") {
		hang()
	}
	return d.Driver.List(ctx, opts)
}

func (d *testDriver) AcquireGate(ctx context.Context, name string) (storage.GateLease, error) {
	if name == "hang" {
		hang()
	}
	if name != testGate {
		return storage.GateLease{}, storage.Errorf("acquire-gate", name, storage.ErrUnsupported, "no gate %q", name)
	}
	token := fmt.Sprintf("t%d", d.tokens.Add(1))
	select {
	case d.gate <- token:
		return storage.GateLease{Name: name, Token: token}, nil
	case <-ctx.Done():
		d.unblocked.Add(1)
		return storage.GateLease{}, ctx.Err()
	}
}

func (d *testDriver) ReleaseGate(ctx context.Context, l storage.GateLease) error {
	if l.Name != testGate {
		return storage.Errorf("release-gate", l.Name, storage.ErrUnsupported, "no gate %q", l.Name)
	}
	select {
	case t := <-d.gate:
		if t == l.Token {
			return nil
		}
		d.gate <- t
	default:
	}
	return storage.Errorf("release-gate", l.Name, storage.ErrInvalidArgument, "token %q does not hold the gate", l.Token)
}

// StatMany and GetMany answer key by key through Stat and Get, magic keys
// included.
func (d *testDriver) StatMany(ctx context.Context, keys []string) ([]storage.StatResult, error) {
	return storage.StatEach(ctx, d, keys)
}

func (d *testDriver) GetMany(ctx context.Context, keys []string, maxBytes int64) ([]storage.GetResult, error) {
	return storage.GetEach(ctx, d, keys, maxBytes)
}
