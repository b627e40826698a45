// Package faultadapter is a vendor adapter for tests: the localfs adapter
// wrapped with internal/faultstore, served as a separate plugin binary
// (cmd/faultadapter) that the retain CLI runs with `--adapter PATH`. It
// proves end to end, through the real plugin boundary, that commands stop
// with typed, resumable errors when the store misbehaves and finish once it
// recovers.
//
// It serves the same locations as localfs, file:///abs/path and plain
// paths: the store is an ordinary local directory, and the host treats it
// exactly as a localfs store (claim scope host, same capabilities).
//
// It is configured from environment variables read once when the plugin
// process starts. The retain host starts each plugin with its own
// environment (pluginproto.Launch passes os.Environ() on), so setting them
// on the retain command is enough:
//
//	RETAIN_FAULT_SEED=N             seed of the random faults (default 1)
//	RETAIN_FAULT_RATE=P             probability per request of a random fault
//	                                (0..1, default 0): split evenly between an
//	                                error before the request, a lost response
//	                                after it was applied, and a latency spike
//	RETAIN_FAULT_MAX_SPIKE=D        longest spike or lost-response delay
//	                                (Go duration, default 20ms)
//	RETAIN_FAULT_FAIL_DELETES=N     deterministic: the first N Delete or
//	                                DeleteMany calls fail with ErrTransient
//	                                before reaching the store
//	RETAIN_FAULT_STATE=/path        file counting those N across plugin
//	                                processes (each retain command starts a
//	                                new one); without it each process counts
//	                                from zero
//	RETAIN_FAULT_CLAIM=1            let faults hit the retention claim too
//
// Keys under "__leases/" (the retention claim) are spared by default, in
// both modes, so a failed command can still release its claim and the next
// one is not refused for a claim a fault left behind.
package faultadapter

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/retain-dev/retain/adapters/localfs"
	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/internal/faultstore"
)

// Environment variables read at plugin start.
const (
	EnvSeed        = "RETAIN_FAULT_SEED"
	EnvRate        = "RETAIN_FAULT_RATE"
	EnvMaxSpike    = "RETAIN_FAULT_MAX_SPIKE"
	EnvFailDeletes = "RETAIN_FAULT_FAIL_DELETES"
	EnvState       = "RETAIN_FAULT_STATE"
	EnvClaim       = "RETAIN_FAULT_CLAIM"
)

// Name is the adapter's name.
const Name = "faultadapter"

// LeasePrefix holds the retention claim (claim.Key); faults spare it
// unless Config.Claim.
const LeasePrefix = "__leases/"

// Config is what the environment sets.
type Config struct {
	Seed     uint64
	Rate     float64
	MaxSpike time.Duration
	// FailDeletes: the first FailDeletes delete calls fail.
	FailDeletes int
	// StatePath counts the failed deletes across processes; empty counts
	// in this process only.
	StatePath string
	// Claim: faults reach keys under LeasePrefix too.
	Claim bool
}

// ConfigFromEnv reads the RETAIN_FAULT_* variables.
func ConfigFromEnv() (Config, error) {
	c := Config{Seed: 1, MaxSpike: 20 * time.Millisecond, StatePath: os.Getenv(EnvState)}
	bad := func(name, v string, err error) (Config, error) {
		return Config{}, storage.Errorf("open", "", storage.ErrInvalidArgument, "faultadapter: %s=%q: %v", name, v, err)
	}
	if v := os.Getenv(EnvSeed); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return bad(EnvSeed, v, err)
		}
		c.Seed = n
	}
	if v := os.Getenv(EnvRate); v != "" {
		r, err := strconv.ParseFloat(v, 64)
		if err == nil && (r < 0 || r > 1) {
			err = fmt.Errorf("not between 0 and 1")
		}
		if err != nil {
			return bad(EnvRate, v, err)
		}
		c.Rate = r
	}
	if v := os.Getenv(EnvMaxSpike); v != "" {
		d, err := time.ParseDuration(v)
		if err == nil && d < 0 {
			err = fmt.Errorf("negative")
		}
		if err != nil {
			return bad(EnvMaxSpike, v, err)
		}
		c.MaxSpike = d
	}
	if v := os.Getenv(EnvFailDeletes); v != "" {
		n, err := strconv.Atoi(v)
		if err == nil && n < 0 {
			err = fmt.Errorf("negative")
		}
		if err != nil {
			return bad(EnvFailDeletes, v, err)
		}
		c.FailDeletes = n
	}
	switch v := os.Getenv(EnvClaim); v {
	case "", "0", "false":
	case "1", "true":
		c.Claim = true
	default:
		return bad(EnvClaim, v, fmt.Errorf("want 0 or 1"))
	}
	return c, nil
}

// FromEnv is the adapter configured from the environment. A bad variable
// is reported by Open (as invalid argument, with the variable's name), so
// the host shows it rather than a plugin that failed to start.
func FromEnv() storage.Adapter {
	cfg, err := ConfigFromEnv()
	if err != nil {
		return storage.Adapter{Name: Name, Schemes: localfs.Adapter.Schemes,
			Open: func(context.Context, storage.Location) (storage.Driver, error) { return nil, err }}
	}
	return New(cfg)
}

// New is the adapter with cfg: localfs's Open, wrapped.
func New(cfg Config) storage.Adapter {
	// One counter per process, shared by every store it opens.
	ctr := &counter{limit: cfg.FailDeletes, path: cfg.StatePath}
	return storage.Adapter{
		Name:    Name,
		Schemes: localfs.Adapter.Schemes,
		Open: func(ctx context.Context, loc storage.Location) (storage.Driver, error) {
			d, err := localfs.Adapter.Open(ctx, loc)
			if err != nil {
				return nil, err
			}
			return wrap(d, cfg, ctr), nil
		},
	}
}

// Wrap wraps d with cfg's faults (in-process use, and tests).
func Wrap(d storage.Driver, cfg Config) storage.Driver {
	return wrap(d, cfg, &counter{limit: cfg.FailDeletes, path: cfg.StatePath})
}

func wrap(d storage.Driver, cfg Config, ctr *counter) *Driver {
	third := cfg.Rate / 3
	fs := faultstore.Wrap(d, faultstore.Config{Seed: cfg.Seed, ErrorRate: third, TimeoutRate: third, SpikeRate: third, MaxSpike: cfg.MaxSpike})
	return &Driver{Store: fs, inner: d, claim: cfg.Claim, ctr: ctr}
}

// Driver is a faulty localfs driver. Capabilities, gates and Close pass
// straight through.
type Driver struct {
	*faultstore.Store
	inner storage.Driver
	claim bool
	ctr   *counter
}

var _ storage.Driver = (*Driver)(nil)

// Faults are the random faults injected so far (this process).
func (d *Driver) Faults() (errors, timeouts, spikes int64) {
	return d.Store.Errors.Load(), d.Store.Timeouts.Load(), d.Store.Spikes.Load()
}

// spared: a key the faults leave alone.
func (d *Driver) spared(key string) bool {
	return !d.claim && strings.HasPrefix(key, LeasePrefix)
}

func (d *Driver) pick(key string) storage.Driver {
	if d.spared(key) {
		return d.inner
	}
	return d.Store
}

func (d *Driver) Get(ctx context.Context, key string) (*storage.Reader, error) {
	return d.pick(key).Get(ctx, key)
}

func (d *Driver) Stat(ctx context.Context, key string) (storage.Info, error) {
	return d.pick(key).Stat(ctx, key)
}

func (d *Driver) Put(ctx context.Context, key string, body io.Reader, opts storage.PutOptions) (storage.Info, error) {
	return d.pick(key).Put(ctx, key, body, opts)
}

func (d *Driver) List(ctx context.Context, opts storage.ListOptions) (storage.ListPage, error) {
	return d.pick(opts.Prefix).List(ctx, opts)
}

func (d *Driver) Delete(ctx context.Context, key string, opts storage.DeleteOptions) error {
	if d.spared(key) {
		return d.inner.Delete(ctx, key, opts)
	}
	if n, fail, err := d.ctr.take(); err != nil {
		return err
	} else if fail {
		return d.ctr.fault("delete", key, n)
	}
	return d.Store.Delete(ctx, key, opts)
}

// DeleteMany fails as one call when any of its keys is not spared: the
// spared keys of a mixed batch are still deleted, the others each get the
// transient error.
func (d *Driver) DeleteMany(ctx context.Context, keys []string) ([]storage.DeleteResult, error) {
	var spared, rest []string
	for _, k := range keys {
		if d.spared(k) {
			spared = append(spared, k)
		} else {
			rest = append(rest, k)
		}
	}
	if len(rest) == 0 {
		return d.inner.DeleteMany(ctx, keys)
	}
	n, fail, err := d.ctr.take()
	if err != nil {
		return nil, err
	}
	if !fail {
		return d.Store.DeleteMany(ctx, keys)
	}
	if len(spared) == 0 {
		return nil, d.ctr.fault("delete-many", "", n)
	}
	done, err := d.inner.DeleteMany(ctx, spared)
	if err != nil {
		return nil, err
	}
	byKey := make(map[string]error, len(done))
	for _, r := range done {
		byKey[r.Key] = r.Err
	}
	out := make([]storage.DeleteResult, len(keys))
	for i, k := range keys {
		if d.spared(k) {
			out[i] = storage.DeleteResult{Key: k, Err: byKey[k]}
		} else {
			out[i] = storage.DeleteResult{Key: k, Err: d.ctr.fault("delete-many", k, n)}
		}
	}
	return out, nil
}

// counter decides which delete calls fail: the first limit of them,
// counted in the state file when there is one (under flock, so concurrent
// plugin processes count each call once), else in memory.
type counter struct {
	limit int
	path  string
	mu    sync.Mutex
	n     int // without a state file
}

// State is the state file's content.
type State struct {
	FailedDeletes int `json:"failed_deletes"`
}

// take counts one delete call: fail says whether it must fail, n is its
// number among the failed ones.
func (c *counter) take() (n int, fail bool, err error) {
	if c.limit <= 0 {
		return 0, false, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.path == "" {
		if c.n >= c.limit {
			return c.n, false, nil
		}
		c.n++
		return c.n, true, nil
	}
	f, err := os.OpenFile(c.path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return 0, false, storage.Wrap("delete", "", storage.ErrUnknown, fmt.Errorf("faultadapter: state file: %w", err))
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		return 0, false, storage.Wrap("delete", "", storage.ErrUnknown, fmt.Errorf("faultadapter: lock state file: %w", err))
	}
	defer syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	var st State
	if b, err := io.ReadAll(f); err != nil {
		return 0, false, storage.Wrap("delete", "", storage.ErrUnknown, fmt.Errorf("faultadapter: read state file: %w", err))
	} else if len(strings.TrimSpace(string(b))) > 0 {
		if err := json.Unmarshal(b, &st); err != nil {
			return 0, false, storage.Wrap("delete", "", storage.ErrUnknown, fmt.Errorf("faultadapter: state file %s: %w", c.path, err))
		}
	}
	if st.FailedDeletes >= c.limit {
		return st.FailedDeletes, false, nil
	}
	st.FailedDeletes++
	b, _ := json.Marshal(st)
	if err := f.Truncate(0); err != nil {
		return 0, false, storage.Wrap("delete", "", storage.ErrUnknown, fmt.Errorf("faultadapter: write state file: %w", err))
	}
	if _, err := f.WriteAt(b, 0); err != nil {
		return 0, false, storage.Wrap("delete", "", storage.ErrUnknown, fmt.Errorf("faultadapter: write state file: %w", err))
	}
	return st.FailedDeletes, true, nil
}

func (c *counter) fault(op, key string, n int) error {
	return storage.Errorf(op, key, storage.ErrTransient,
		"injected fault %d of %d (%s): the delete was refused before it reached the store", n, c.limit, EnvFailDeletes)
}

// ReadState reads a state file; a missing file is the zero State.
func ReadState(path string) (State, error) {
	var st State
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return st, nil
	}
	if err != nil {
		return st, err
	}
	if len(strings.TrimSpace(string(b))) == 0 {
		return st, nil
	}
	return st, json.Unmarshal(b, &st)
}
