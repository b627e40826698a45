//go:build unix

package pluginproto

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/retain-dev/retain/core/storage"
)

const testTimeout = 700 * time.Millisecond

// withTimeouts sets both limits short for a test.
func withTimeouts(call, idle time.Duration) func(*LaunchConfig) {
	return func(cfg *LaunchConfig) { cfg.CallTimeout, cfg.IdleTimeout, cfg.GateTimeout = call, idle, call }
}

// zeros is an endless body.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// waitGone waits briefly for pid to be gone: a call that killed its plugin
// returns once the process has exited, so this should not wait at all.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	for start := time.Now(); !processGone(pid); {
		if time.Since(start) > time.Second {
			t.Fatalf("plugin %d still running after the call that killed it returned", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestHungPluginKilled: a plugin that stops answering, after its handshake,
// in any call ends that call within the call or idle limit with
// ErrUnavailable naming the adapter and the call; the plugin process is
// gone when the call returns, and every later call fails at once.
func TestHungPluginKilled(t *testing.T) {
	cases := []struct {
		name, op, key string
		mode          string        // the plugin's; default mem (calls over the session)
		limit         time.Duration // the limit that should end the call
		stop          bool          // SIGSTOP the whole plugin first
		call          func(ctx context.Context, c *Client) error
	}{
		{name: "stat", op: "stat", key: "hang/x", call: func(ctx context.Context, c *Client) error {
			_, err := c.Stat(ctx, "hang/x")
			return err
		}},
		{name: "stat-unary", op: "stat", key: "hang/x", mode: "legacy", call: func(ctx context.Context, c *Client) error {
			_, err := c.Stat(ctx, "hang/x")
			return err
		}},
		{name: "stat-many", op: "stat-many", call: func(ctx context.Context, c *Client) error {
			_, err := c.StatMany(ctx, []string{"a", "hang/x"})
			return err
		}},
		{name: "delete", op: "delete", key: "hang/x", call: func(ctx context.Context, c *Client) error {
			return c.Delete(ctx, "hang/x", storage.DeleteOptions{})
		}},
		{name: "delete-many", op: "delete-many", call: func(ctx context.Context, c *Client) error {
			_, err := c.DeleteMany(ctx, []string{"a", "hang/x"})
			return err
		}},
		{name: "list", op: "list", key: "hang/", call: func(ctx context.Context, c *Client) error {
			_, err := c.List(ctx, storage.ListOptions{Prefix: "hang/"})
			return err
		}},
		{name: "acquire-gate", op: "acquire-gate", key: "hang", call: func(ctx context.Context, c *Client) error {
			_, err := c.AcquireGate(ctx, "hang")
			return err
		}},
		{name: "get", op: "get", key: "hang/x", call: func(ctx context.Context, c *Client) error {
			_, err := c.Get(ctx, "hang/x")
			return err
		}},
		{name: "get-body", op: "get", key: "hangbody/x", call: func(ctx context.Context, c *Client) error {
			r, err := c.Get(ctx, "hangbody/x")
			if err != nil {
				return err
			}
			defer r.Close()
			_, err = io.ReadAll(r)
			return err
		}},
		{name: "put-answer", op: "put", key: "hangafter/x", call: func(ctx context.Context, c *Client) error {
			_, err := c.Put(ctx, "hangafter/x", strings.NewReader("x"), storage.PutOptions{})
			return err
		}},
		{name: "put-body", op: "put", key: "hang/x", call: func(ctx context.Context, c *Client) error {
			// The plugin takes in none of it: Send blocks once the
			// transport's windows are full.
			_, err := c.Put(ctx, "hang/x", io.LimitReader(zeros{}, 256<<20), storage.PutOptions{})
			return err
		}},
		{name: "frozen", op: "stat", key: "a", stop: true, call: func(ctx context.Context, c *Client) error {
			_, err := c.Stat(ctx, "a")
			return err
		}},
		{name: "frozen-unary", op: "stat", key: "a", mode: "legacy", stop: true, call: func(ctx context.Context, c *Client) error {
			_, err := c.Stat(ctx, "a")
			return err
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			mode := tc.mode
			if mode == "" {
				mode = "mem"
			}
			c := launch(t, mode, withTimeouts(testTimeout, testTimeout))
			pid := c.pid()
			if tc.stop {
				if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
					t.Fatal(err)
				}
				// kill(2) returns before the target has stopped: under
				// load its threads may still answer a call for a moment.
				waitStopped(t, pid)
			}
			ctx := ctxT(t, 30*time.Second) // the caller's own deadline is far
			start := time.Now()
			err := tc.call(ctx, c)
			el := time.Since(start)
			ce := wantKind(t, err, storage.ErrUnavailable)
			if el < testTimeout || el > testTimeout+3*time.Second {
				t.Errorf("the call ended after %v, its limit is %v", el, testTimeout)
			}
			if ce.Op != tc.op || ce.Key != tc.key {
				t.Errorf("error names %s %q, want %s %q", ce.Op, ce.Key, tc.op, tc.key)
			}
			for _, s := range []string{`"testmem"`, describe(tc.op, tc.key), testTimeout.String(), "killed", "RETAIN_"} {
				if !strings.Contains(ce.Msg, s) {
					t.Errorf("message %q lacks %q", ce.Msg, s)
				}
			}
			if errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("a plugin's timeout reads as the caller's deadline: %v", err)
			}
			t.Log(err)
			waitGone(t, pid)
			// Later calls fail at once, the same way.
			start = time.Now()
			_, err = c.Stat(ctx, "a")
			if ce := wantKind(t, err, storage.ErrUnavailable); !strings.Contains(ce.Msg, "was killed because it") {
				t.Errorf("later call: %q", ce.Msg)
			}
			if el := time.Since(start); el > 100*time.Millisecond {
				t.Errorf("a later call took %v", el)
			}
			start = time.Now()
			c.Close()
			if el := time.Since(start); el > time.Second {
				t.Errorf("Close took %v", el)
			}
		})
	}
}

// TestHungOpen: a plugin that completes its handshake and never answers
// Open ends the launch within the call limit, and is gone.
func TestHungOpen(t *testing.T) {
	pidfile := filepath.Join(t.TempDir(), "pid")
	cfg := testConfig("mem")
	cfg.CallTimeout = testTimeout
	cfg.Location.Options = map[string]string{"hang": "open", "pidfile": pidfile}
	start := time.Now()
	_, err := Launch(ctxT(t, 30*time.Second), cfg)
	el := time.Since(start)
	ce := wantKind(t, err, storage.ErrUnavailable)
	if ce.Op != "open" || !strings.Contains(ce.Msg, `"testmem" did not answer open within 700ms (RETAIN_CALL_TIMEOUT)`) {
		t.Errorf("error %#v", ce)
	}
	if el > testTimeout+3*time.Second {
		t.Errorf("the launch took %v", el)
	}
	b, err := os.ReadFile(pidfile)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(string(b))
	waitGone(t, pid)
}

// TestCallerDeadlineWins: the caller's own shorter deadline ends a call on
// a hung plugin as a deadline of the caller's, and leaves the plugin alone.
func TestCallerDeadlineWins(t *testing.T) {
	c := launch(t, "mem", withTimeouts(20*time.Second, 20*time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := c.Stat(ctx, "hang/x")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want the caller's deadline", err)
	}
	wantKind(t, err, storage.ErrTransient)
	if processGone(c.pid()) {
		t.Fatal("the plugin was killed for the caller's deadline")
	}
	if _, err := c.Stat(ctxT(t, 10*time.Second), "a"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("the plugin no longer answers: %v", err)
	}
}

// TestSlowBodyProgresses: a body that takes far longer than the idle limit
// in all, but never pauses that long, arrives whole; so does one the caller
// reads slower than the idle limit.
func TestSlowBodyProgresses(t *testing.T) {
	const idle = time.Second
	c := launch(t, "mem", withTimeouts(idle, idle))
	ctx := ctxT(t, 30*time.Second)
	start := time.Now()
	r, err := c.Get(ctx, "trickle/16") // 16 pieces 150 ms apart: 2.4 s
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(r)
	r.Close()
	if err != nil {
		t.Fatalf("after %v: %v", time.Since(start), err)
	}
	if !bytes.Equal(got, bytes.Repeat([]byte{'t'}, 16*tricklePiece)) {
		t.Fatalf("got %d bytes", len(got))
	}
	if el := time.Since(start); el < 2*idle {
		t.Fatalf("the body took only %v: the test proves nothing", el)
	}

	// The caller's own pace is not the plugin's.
	if _, err := c.Put(ctx, "big", bytes.NewReader(make([]byte, 3<<20)), storage.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	r, err = c.Get(ctx, "big")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.Read(make([]byte, 100)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(idle + 300*time.Millisecond)
	if rest, err := io.ReadAll(r); err != nil || len(rest) != 3<<20-100 {
		t.Fatalf("after the caller's pause: %d bytes, %v", len(rest), err)
	}
}

// TestTimeoutsFromEnvironment: with no timeouts in the LaunchConfig, the
// environment's apply; a malformed one is refused, naming the variable.
func TestTimeoutsFromEnvironment(t *testing.T) {
	t.Setenv(EnvCallTimeout, "0.5")
	t.Setenv(EnvIdleTimeout, "")
	c := launch(t, "mem")
	if c.callTimeout != 500*time.Millisecond || c.idleTimeout != defaultIdleTimeout {
		t.Fatalf("timeouts %v, %v", c.callTimeout, c.idleTimeout)
	}
	start := time.Now()
	_, err := c.Stat(ctxT(t, 30*time.Second), "hang/x")
	wantKind(t, err, storage.ErrUnavailable)
	if el := time.Since(start); el > 3*time.Second {
		t.Fatalf("took %v", el)
	}
	for _, bad := range []string{"soon", "-1s", "0"} {
		t.Setenv(EnvIdleTimeout, bad)
		_, err := Launch(ctxT(t, 30*time.Second), testConfig("mem"))
		ce := wantKind(t, err, storage.ErrInvalidArgument)
		if !strings.Contains(ce.Msg, EnvIdleTimeout+"=") || !strings.Contains(ce.Msg, "90s") {
			t.Errorf("%s=%s: %q", EnvIdleTimeout, bad, ce.Msg)
		}
	}
}

// waitStopped waits until the kernel reports every thread of pid stopped
// (state T).
func waitStopped(t *testing.T, pid int) {
	t.Helper()
	stopped := func() bool {
		tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
		if err != nil || len(tasks) == 0 {
			return true // not Linux, or gone: nothing to wait for
		}
		for _, f := range tasks {
			b, err := os.ReadFile(f)
			if err != nil {
				continue // the thread is gone
			}
			// The state follows the parenthesised command name.
			i := bytes.LastIndexByte(b, ')')
			if i < 0 || i+2 >= len(b) || (b[i+2] != 'T' && b[i+2] != 't') {
				return false
			}
		}
		return true
	}
	for start := time.Now(); time.Since(start) < 5*time.Second; time.Sleep(time.Millisecond) {
		if stopped() {
			return
		}
	}
	t.Fatalf("plugin %d did not stop", pid)
}
