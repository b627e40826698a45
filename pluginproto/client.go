package pluginproto

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/pluginproto/internal/pb"
)

// LaunchConfig says which plugin binary to run and which store to open.
type LaunchConfig struct {
	// Adapter names the adapter in messages; default: the binary's name.
	Adapter string
	// Path is the plugin binary.
	Path string
	// Args are passed to the binary.
	Args []string
	// Env entries are added to the host's environment; they win over it.
	Env []string
	// SHA256 is the binary's expected digest in hex. The binary is refused
	// unless it matches, and what runs is a private image of exactly the
	// bytes that were hashed, never the path read again (see verify.go).
	// Empty means no check: only for the binary retain itself is (bundled
	// adapters).
	SHA256 string
	// Location is the store to open.
	Location storage.Location
	// Logger receives the host side's logs and the plugin's stderr logs;
	// default: warnings and errors to stderr.
	Logger hclog.Logger
	// StartTimeout bounds the wait for the plugin's handshake; default 30s.
	StartTimeout time.Duration
	// CallTimeout bounds each wait for an answer from the plugin (Open,
	// Stat, Delete, DeleteMany, List, the gates, a Get's first message, a
	// Put's final answer); IdleTimeout bounds each wait for progress of a
	// body stream. A plugin that exceeds one is killed (see deadline.go).
	// Zero: $RETAIN_CALL_TIMEOUT / $RETAIN_IDLE_TIMEOUT, else one minute.
	CallTimeout time.Duration
	IdleTimeout time.Duration
	// GateTimeout bounds AcquireGate, which blocks while another process
	// holds the gate (zero: EnvGateTimeout, else 15 minutes; never below
	// the call timeout).
	GateTimeout time.Duration

	// noPdeathsig leaves the kernel's parent-death signal off, so a test
	// can prove the plugin's own parent watch.
	noPdeathsig bool
	// noMemfd verifies into a copy on disk even where a memfd would do,
	// so a test can prove that path on Linux.
	noMemfd bool
}

// Client is the host half: a storage.Driver whose calls run in a plugin
// process. Close kills the process.
type Client struct {
	adapter string
	gp      *plugin.Client
	rpc     pb.StorageClient
	exited  context.Context // ends when the plugin process has exited
	img     *verifiedImage  // the verified image it runs from, if any
	cmd     *exec.Cmd       // the plugin process, for a SIGKILL
	closed  atomic.Bool
	// callTimeout and idleTimeout are the limits of deadline.go; dead
	// says why the host killed the plugin, once it has.
	callTimeout, idleTimeout, gateTimeout time.Duration
	dead                                  atomic.Pointer[string]
	// readOnly: the host asked for a read-only open. Capabilities then
	// always declare read-only, even from a plugin that predates the field,
	// so the portable Store refuses writes before they cross the wire.
	readOnly bool
	// batch: the plugin answers StatMany and GetMany (its OpenResponse
	// said so).
	batch bool
	// sess carries the calls that wait for one answer, if the plugin
	// offered it (session.go); inlineGet: small Gets go on it too.
	sess      *session
	inlineGet bool
}

var (
	_ storage.Driver      = (*Client)(nil)
	_ storage.BatchReader = (*Client)(nil)
)

const defaultStartTimeout = 30 * time.Second

// Launch starts the plugin binary, checks its digest, negotiates the
// protocol version, connects (gRPC over a unix socket with automatic
// mutual TLS) and opens cfg.Location. Every error is an *storage.Error:
// ErrPermissionDenied for a digest mismatch, ErrUnsupported for a plugin
// that speaks no protocol version this host does, ErrUnavailable for a
// plugin that fails to start or does not answer Open within the call
// timeout, ErrInvalidArgument for a malformed timeout setting, and the
// adapter's own error from Open.
func Launch(ctx context.Context, cfg LaunchConfig) (*Client, error) {
	const op = "launch"
	name := cfg.Adapter
	if name == "" {
		name = filepath.Base(cfg.Path)
	}
	if cfg.Path == "" {
		return nil, storage.Errorf(op, "", storage.ErrInvalidArgument, "no plugin binary given for adapter %q", name)
	}
	var checksum []byte
	if cfg.SHA256 != "" {
		var err error
		checksum, err = hex.DecodeString(strings.TrimSpace(cfg.SHA256))
		if err != nil || len(checksum) != sha256.Size {
			return nil, storage.Errorf(op, "", storage.ErrInvalidArgument,
				"the expected SHA-256 of plugin %s for adapter %q is not 64 hex digits: %q", cfg.Path, name, cfg.SHA256)
		}
	}
	look := exec.Command(cfg.Path) // finds it on $PATH
	if look.Err != nil {
		return nil, &storage.Error{Op: op, Kind: storage.ErrInvalidArgument, Err: look.Err,
			Msg: fmt.Sprintf("cannot run plugin %s for adapter %q", cfg.Path, name)}
	}
	path := look.Path
	if _, err := os.Stat(path); err != nil {
		return nil, &storage.Error{Op: op, Kind: storage.ErrInvalidArgument, Err: err,
			Msg: fmt.Sprintf("cannot run plugin %s for adapter %q", path, name)}
	}

	logger := cfg.Logger
	if logger == nil {
		logger = hclog.New(&hclog.LoggerOptions{Name: "retain", Level: hclog.Warn, Output: os.Stderr})
	}
	// The host's environment, then the plugin's log level, then cfg.Env:
	// the last entry for a name wins. (go-plugin adds its own after.)
	env := append(os.Environ(), envLogLevel+"="+logger.GetLevel().String())
	env = append(env, cfg.Env...)

	timeout := cfg.StartTimeout
	if timeout <= 0 {
		timeout = defaultStartTimeout
	}
	if dl, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(dl))
	}
	if err := ctx.Err(); err != nil {
		return nil, launchCtxError(name, path, err)
	}
	if timeout <= 0 {
		return nil, launchCtxError(name, path, context.DeadlineExceeded)
	}
	callTimeout, idleTimeout, gateTimeout, err := timeouts(cfg)
	if err != nil {
		return nil, err
	}

	// With a digest, what runs is the image whose bytes were hashed, never
	// the path again (see verify.go).
	var img *verifiedImage
	noMemfd := cfg.noMemfd
	verify := func() error {
		if checksum == nil {
			return nil
		}
		var err error
		img, err = verifyImage(path, checksum, noMemfd)
		var de *errDigest
		switch {
		case errors.As(err, &de):
			return digestError(name, path, hex.EncodeToString(checksum), de.actual)
		case err != nil:
			return &storage.Error{Op: op, Kind: storage.ErrInvalidArgument, Err: err,
				Msg: fmt.Sprintf("cannot read plugin %s for adapter %q to check its SHA-256", path, name)}
		}
		return nil
	}
	if err := verify(); err != nil {
		return nil, err
	}

	var (
		gp  *plugin.Client
		d   *dispensed
		cmd *exec.Cmd
	)
	for attempt := 0; ; attempt++ {
		cmd = exec.Command(path, cfg.Args...)
		if img != nil {
			cmd.Path = img.path
			cmd.Args[0] = path
			cmd.ExtraFiles = img.extraFiles
		}
		cmd.Env = env
		if img != nil {
			cmd.Env = append(cmd.Env[:len(cmd.Env):len(cmd.Env)], img.env...)
		}
		setProcAttr(cmd, !cfg.noPdeathsig)
		gp = plugin.NewClient(&plugin.ClientConfig{
			HandshakeConfig:  handshake,
			VersionedPlugins: hostPlugins(),
			Cmd:              cmd,
			SkipHostEnv:      true, // cmd.Env already holds it, below cfg.Env
			AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
			AutoMTLS:         true,
			Logger:           logger,
			StartTimeout:     timeout,
			GRPCDialOptions: []grpc.DialOption{
				grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMsgSize), grpc.MaxCallSendMsgSize(maxMsgSize)),
				grpc.WithInitialWindowSize(streamWindow), grpc.WithInitialConnWindowSize(connWindow),
			},
		})
		d, err = dispense(ctx, gp, img)
		if err == nil {
			img.started()
			break
		}
		if ctx.Err() != nil {
			return nil, launchCtxError(name, path, ctx.Err()) // dispense cleans up
		}
		gp.Kill()
		var pe *fs.PathError
		execFailed := errors.As(err, &pe) && pe.Op == "fork/exec"
		switch {
		case execFailed && isTextBusy(err) && attempt < 5:
			// A fork elsewhere in this process briefly held the image
			// open for writing; it lets go when that child execs.
			time.Sleep(time.Duration(attempt+1) * 10 * time.Millisecond)
			continue
		case execFailed && img != nil && img.memfd && errors.Is(err, fs.ErrPermission):
			// This system refuses to execute memfds (a security
			// policy): verify again into a copy on disk.
			img.release()
			noMemfd = true
			if verr := verify(); verr != nil {
				return nil, verr
			}
			continue
		}
		img.release()
		// Kill has waited for the process, so its state is set.
		if gp.Exited() && cmd.ProcessState != nil && cmd.ProcessState.ExitCode() > 0 {
			err = &ExitError{Code: cmd.ProcessState.ExitCode(), Err: err}
		}
		return nil, launchError(name, path, err)
	}

	c := &Client{adapter: name, gp: gp, rpc: d.rpc, exited: d.exited, img: img, cmd: cmd,
		callTimeout: callTimeout, idleTimeout: idleTimeout, gateTimeout: gateTimeout, readOnly: cfg.Location.ReadOnly}
	open, err := unary(ctx, c, "open", "", func(ctx context.Context) (*pb.OpenResponse, error) {
		return c.rpc.Open(ctx, &pb.OpenRequest{Location: locationToPB(cfg.Location)})
	})
	if err != nil {
		c.Close()
		return nil, err
	}
	// A plugin built before batch reads never sets the field: the host
	// then never sends it a batch (batch.go).
	c.batch = open.BatchReads
	if open.Session {
		c.sess = c.openSession()
		c.inlineGet = open.InlineGet
	}
	return c, nil
}

// dispense waits for go-plugin to start the plugin and hand over the
// storage client. If ctx ends first it returns at once; the plugin is then
// killed and img released as soon as go-plugin gives up on it.
func dispense(ctx context.Context, gp *plugin.Client, img *verifiedImage) (*dispensed, error) {
	type result struct {
		d   *dispensed
		err error
	}
	ch := make(chan result, 1)
	go func() {
		cp, err := gp.Client()
		if err != nil {
			ch <- result{err: err}
			return
		}
		raw, err := cp.Dispense(pluginName)
		if err != nil {
			ch <- result{err: err}
			return
		}
		ch <- result{d: raw.(*dispensed)}
	}()
	select {
	case <-ctx.Done():
		go func() { <-ch; gp.Kill(); img.release() }()
		return nil, ctx.Err()
	case r := <-ch:
		return r.d, r.err
	}
}

func launchCtxError(name, path string, cerr error) error {
	e := ctxError("launch", "", cerr)
	e.Msg = fmt.Sprintf("starting plugin %s for adapter %q", path, name)
	return e
}

var pluginVersionRE = regexp.MustCompile(`Plugin version: (\d+)`)

// ExitError is in the chain of a launch error when the plugin process
// exited before its handshake: a host that runs its own binary as a plugin
// (retain's bundled adapters, the conformance suite's test binaries) uses
// Code to tell a main that never dispatched the plugin subcommand from one
// that failed.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string {
	return fmt.Sprintf("plugin exited with status %d: %v", e.Code, e.Err)
}
func (e *ExitError) Unwrap() error { return e.Err }

// launchError explains why go-plugin could not start or reach the plugin.
// go-plugin reports version and handshake failures only as text, so this
// matches its messages to say what went wrong; the version test pins the
// text of the go-plugin release in go.mod. An unmatched message still
// fails the launch (ErrUnavailable), it only loses the better explanation.
func launchError(name, path string, err error) error {
	const op = "launch"
	msg := err.Error()
	switch {
	case strings.Contains(msg, "incompatible API version"):
		pv := "unknown"
		if m := pluginVersionRE.FindStringSubmatch(msg); m != nil {
			pv = m[1]
		}
		return &storage.Error{Op: op, Kind: storage.ErrUnsupported, Err: err, Msg: fmt.Sprintf(
			"plugin %s for adapter %q speaks storage plugin protocol version %s, this host speaks version %s: "+
				"install a build of the plugin for protocol version %d, or a retain that speaks version %s",
			path, name, pv, joinInts(hostVersions), ProtocolVersion, pv)}
	case strings.Contains(msg, "incompatible core API version"), strings.Contains(msg, "unsupported plugin protocol"):
		return &storage.Error{Op: op, Kind: storage.ErrUnsupported, Err: err, Msg: fmt.Sprintf(
			"plugin %s for adapter %q speaks another go-plugin protocol than this host (storage protocol version %s over gRPC)",
			path, name, joinInts(hostVersions))}
	}
	hint := "is it a retain storage plugin? its log lines may say why"
	if strings.Contains(msg, "Unrecognized remote plugin message") {
		hint = "it wrote to stdout before its handshake: a plugin must write nothing to stdout before pluginproto.Serve, and log to stderr"
	}
	return &storage.Error{Op: op, Kind: storage.ErrUnavailable, Err: err, Msg: fmt.Sprintf(
		"plugin %s for adapter %q failed to start (%s)", path, name, hint)}
}

func joinInts(vs []int) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = fmt.Sprint(v)
	}
	return strings.Join(s, ", ")
}

// pid is the plugin's process id, for tests.
func (c *Client) pid() int {
	if rc := c.gp.ReattachConfig(); rc != nil {
		return rc.Pid
	}
	return 0
}

// pluginGone reports whether the plugin process has exited.
func (c *Client) pluginGone() bool {
	return (c.exited != nil && c.exited.Err() != nil) || (c.gp != nil && c.gp.Exited())
}

// Close kills the plugin process: a graceful shutdown first, then SIGKILL
// after two seconds (or at once, for a plugin too frozen to be asked). The
// plugin closes its driver on a graceful shutdown.
func (c *Client) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	c.sess.close()
	c.stop()
	c.img.release()
	return nil
}

// ready refuses calls on a closed client, and on one whose plugin the host
// killed.
func (c *Client) ready(op, key string) error {
	if c.closed.Load() {
		return storage.Errorf(op, key, storage.ErrInvalidArgument, "the plugin client for adapter %q is closed", c.adapter)
	}
	return c.deadErr(op, key)
}
