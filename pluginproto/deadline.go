package pluginproto

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/retain-dev/retain/core/storage"
)

// No call through a Client waits forever for its plugin. A call that waits
// for an answer (Open, Capabilities, Stat, Delete, DeleteMany, List, the
// gates, a Get until its first message, a Put's final answer) gets the
// call timeout; a body stream gets the idle timeout for each wait on the
// plugin (a Get's next message, a Put's next chunk accepted), so a slow but
// moving body goes on for as long as it moves. Time the caller spends
// reading or producing a body is never counted against the plugin.
//
// A plugin that runs out of time is taken for hung: the host kills the
// process, the call fails with storage.ErrUnavailable naming the adapter, the
// call and the limit, and every later call on the Client fails the same way
// at once. The caller's own ctx, if it ends first, ends the call as before
// (a transient deadline, or cancelled) and the plugin lives on.

const (
	// EnvCallTimeout and EnvIdleTimeout set the timeouts when the
	// LaunchConfig leaves them zero: a Go duration ("90s", "5m") or a
	// number of seconds.
	EnvCallTimeout = "RETAIN_CALL_TIMEOUT"
	EnvIdleTimeout = "RETAIN_IDLE_TIMEOUT"
	// EnvGateTimeout bounds AcquireGate, which blocks by contract while
	// another process holds the gate: a longer limit than other calls, so
	// a gate held legitimately does not get a healthy plugin killed.
	EnvGateTimeout = "RETAIN_GATE_TIMEOUT"

	defaultCallTimeout = time.Minute
	defaultIdleTimeout = time.Minute
	defaultGateTimeout = 15 * time.Minute

	// putUploadAllowance is added to a Put's wait for its final answer per
	// MiB sent: an adapter may upload a spooled body only once it has all
	// of it (the s3 adapter does), so that wait grows with the body.
	putUploadAllowance = time.Second

	// closeGrace bounds Close's wait for go-plugin's graceful shutdown,
	// which waits without a deadline for a frozen plugin to answer it.
	closeGrace = 5 * time.Second
)

// timeouts resolves the LaunchConfig's timeouts against the environment.
func timeouts(cfg LaunchConfig) (call, idle, gate time.Duration, err error) {
	call, err = timeoutSetting(cfg.CallTimeout, EnvCallTimeout, defaultCallTimeout)
	if err == nil {
		idle, err = timeoutSetting(cfg.IdleTimeout, EnvIdleTimeout, defaultIdleTimeout)
	}
	if err == nil {
		gate, err = timeoutSetting(cfg.GateTimeout, EnvGateTimeout, defaultGateTimeout)
	}
	return call, idle, max(gate, call), err
}

func timeoutSetting(set time.Duration, env string, def time.Duration) (time.Duration, error) {
	if set > 0 {
		return set, nil
	}
	v := strings.TrimSpace(os.Getenv(env))
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		if n, nerr := strconv.ParseFloat(v, 64); nerr == nil {
			d, err = time.Duration(n*float64(time.Second)), nil
		}
	}
	if err != nil || d <= 0 {
		return 0, storage.Errorf("launch", "", storage.ErrInvalidArgument,
			"%s=%q is not a positive duration: give one such as %s=90s or %s=5m, or unset it for the default of %v",
			env, v, env, env, def)
	}
	return d, nil
}

// The causes a Client cancels a call's context with when the plugin ran
// out of time.
var (
	errCallTimeout = errors.New("the plugin did not answer in time")
	errIdleTimeout = errors.New("the body stream made no progress in time")
)

func (c *Client) callLimit() time.Duration {
	if c.callTimeout > 0 {
		return c.callTimeout
	}
	return defaultCallTimeout
}

func (c *Client) gateLimit() time.Duration {
	if c.gateTimeout > 0 {
		return c.gateTimeout
	}
	return max(defaultGateTimeout, c.callLimit())
}

func (c *Client) idleLimit() time.Duration {
	if c.idleTimeout > 0 {
		return c.idleTimeout
	}
	return defaultIdleTimeout
}

// putLimit is the wait for a Put's final answer after sent body bytes.
func (c *Client) putLimit(sent int64) time.Duration {
	return c.callLimit() + time.Duration(sent>>20)*putUploadAllowance
}

// unary runs one call that waits for a single answer, under the call
// timeout. Its errors come back as *storage.Error.
func unary[T any](ctx context.Context, c *Client, op, key string, call func(context.Context) (T, error)) (T, error) {
	return unaryWithin(ctx, c, op, key, c.callLimit(), EnvCallTimeout, call)
}

// unaryWithin is unary under limit (set by env).
func unaryWithin[T any](ctx context.Context, c *Client, op, key string, limit time.Duration, env string, call func(context.Context) (T, error)) (T, error) {
	ours := time.Now().Add(limit)
	cctx, cancel := context.WithDeadlineCause(ctx, ours, errCallTimeout)
	defer cancel()
	resp, err := call(cctx)
	if err != nil {
		var zero T
		if cutShort(ctx, cctx, ours, err) {
			return zero, c.hung(op, key, "did not answer "+describe(op, key), limit, env)
		}
		return zero, c.convertErr(ctx, op, key, err)
	}
	return resp, nil
}

// cutShort reports whether err ended a call on cctx because the host's own
// limit ran out: not the caller's ctx, and not an answer in time. The
// plugin learns a unary call's deadline too and may answer "deadline
// exceeded" a moment before the host's timer has marked cctx done; the
// host's own deadline (ours, zero for streams) having passed is then as
// good as the cause.
func cutShort(ctx, cctx context.Context, ours time.Time, err error) bool {
	if ctx.Err() != nil {
		return false // the caller's end wins
	}
	st, ok := status.FromError(err)
	if !ok || (st.Code() != codes.DeadlineExceeded && st.Code() != codes.Canceled) {
		return false
	}
	if cause := context.Cause(cctx); cause == errCallTimeout || cause == errIdleTimeout {
		return true
	}
	return !ours.IsZero() && st.Code() == codes.DeadlineExceeded && !time.Now().Before(ours)
}

// watchdog cancels a stream's context with a cause when one wait on the
// plugin lasts too long.
type watchdog struct {
	cancel context.CancelCauseFunc
	t      *time.Timer
}

func (w *watchdog) arm(d time.Duration, cause error) {
	w.t = time.AfterFunc(d, func() { w.cancel(cause) })
}

func (w *watchdog) disarm() {
	if w.t != nil {
		w.t.Stop()
		w.t = nil
	}
}

func describe(op, key string) string {
	if key == "" {
		return op
	}
	return fmt.Sprintf("%s of %q", op, key)
}

// hung kills the plugin, which ran out of time during op, and returns the
// call's error. what says what the plugin failed to do.
func (c *Client) hung(op, key, what string, limit time.Duration, env string) error {
	why := fmt.Sprintf("%s within %v (%s)", what, limit, env)
	c.kill(why)
	msg := fmt.Sprintf("the plugin for adapter %q %s, so retain killed it; the outcome of the call is unknown: check the object before retrying",
		c.adapter, why)
	if op == "acquire-gate" {
		msg += " (a gate another process holds for that long ends the wait the same way: raise " + env + " if that is expected)"
	}
	return &storage.Error{Op: op, Key: key, Kind: storage.ErrUnavailable, Msg: msg}
}

// kill SIGKILLs the plugin for the reason why and waits until it has
// exited; later calls fail at once with deadErr. The first reason stays.
func (c *Client) kill(why string) {
	if !c.dead.CompareAndSwap(nil, &why) {
		return
	}
	c.hardKill()
	if c.exited != nil {
		select {
		case <-c.exited.Done():
		case <-time.After(closeGrace):
		}
	}
	c.stop() // go-plugin's own cleanup: its goroutines and socket directory
}

// hardKill SIGKILLs the plugin process (a stopped one too). os.Process
// signals nothing once the process has been waited for, so no other
// process can receive it.
func (c *Client) hardKill() {
	if c.cmd != nil && c.cmd.Process != nil {
		c.cmd.Process.Kill()
	}
}

// stop ends the plugin process through go-plugin (a shutdown request, then
// SIGKILL after two seconds), and kills it from here if even that has not
// returned after closeGrace: go-plugin waits for its shutdown request
// without a deadline, and a frozen plugin never answers.
func (c *Client) stop() {
	if c.gp == nil {
		return
	}
	done := make(chan struct{})
	go func() { c.gp.Kill(); close(done) }()
	select {
	case <-done:
	case <-time.After(closeGrace):
		c.hardKill()
		<-done
	}
}

// deadErr is the error of a call on a Client whose plugin was killed, or
// nil while it lives.
func (c *Client) deadErr(op, key string) error {
	why := c.dead.Load()
	if why == nil {
		return nil
	}
	return &storage.Error{Op: op, Key: key, Kind: storage.ErrUnavailable, Msg: fmt.Sprintf(
		"the plugin for adapter %q was killed because it %s; nothing more can be done through it: open the store again",
		c.adapter, *why)}
}
