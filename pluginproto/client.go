package pluginproto

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

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

func (c *Client) Capabilities(ctx context.Context) (storage.Capabilities, error) {
	const op = "capabilities"
	if err := c.ready(op, ""); err != nil {
		return storage.Capabilities{}, err
	}
	req := &pb.CapabilitiesRequest{}
	resp, err := viaSession(ctx, c, op, "", &pb.SessionRequest{Call: &pb.SessionRequest_Capabilities{Capabilities: req}},
		(*pb.SessionResponse).GetCapabilities, func(ctx context.Context) (*pb.CapabilitiesResponse, error) {
			return c.rpc.Capabilities(ctx, req)
		})
	if err != nil {
		return storage.Capabilities{}, err
	}
	caps := capsFromPB(resp)
	if c.readOnly && !caps.ReadOnly {
		caps = forceReadOnly(caps)
	}
	return caps, nil
}

func (c *Client) Stat(ctx context.Context, key string) (storage.Info, error) {
	const op = "stat"
	if err := c.ready(op, key); err != nil {
		return storage.Info{}, err
	}
	if err := storage.ValidateKey(op, key); err != nil {
		return storage.Info{}, err
	}
	req := &pb.StatRequest{Key: key}
	resp, err := viaSession(ctx, c, op, key, &pb.SessionRequest{Call: &pb.SessionRequest_Stat{Stat: req}},
		(*pb.SessionResponse).GetStat, func(ctx context.Context) (*pb.StatResponse, error) {
			return c.rpc.Stat(ctx, req)
		})
	if err != nil {
		return storage.Info{}, err
	}
	return infoFromPB(resp.Info), nil
}

// Get opens key. The body streams from the plugin as it is read, under
// ctx; Close ends the stream. A stream that breaks mid-body fails the read,
// never ends it early.
func (c *Client) Get(ctx context.Context, key string) (*storage.Reader, error) {
	const op = "get"
	if err := c.ready(op, key); err != nil {
		return nil, err
	}
	if err := storage.ValidateKey(op, key); err != nil {
		return nil, err
	}
	if r, err := c.getInline(ctx, key); r != nil || err != nil {
		return r, err
	}
	sctx, cancel := context.WithCancelCause(ctx)
	r := &getReader{c: c, ctx: ctx, sctx: sctx, cancel: func() { cancel(nil) }, dog: watchdog{cancel: cancel}, key: key}
	// Until the first message (the info) the plugin is answering a call.
	r.dog.arm(c.callLimit(), errCallTimeout)
	stream, err := c.rpc.Get(sctx, &pb.GetRequest{Key: key})
	var first *pb.GetResponse
	if err == nil {
		first, err = stream.Recv()
	}
	r.dog.disarm()
	if err != nil {
		if err == io.EOF {
			err = storage.Errorf(op, key, storage.ErrUnknown,
				"adapter %q's plugin broke the protocol: the get stream ended without the object's info", c.adapter)
		} else {
			err = r.streamErr(err)
		}
		r.cancel()
		return nil, err
	}
	if first.Info == nil {
		r.cancel()
		return nil, storage.Errorf(op, key, storage.ErrUnknown,
			"adapter %q's plugin broke the protocol: the get stream did not start with the object's info", c.adapter)
	}
	info := infoFromPB(first.Info)
	r.stream, r.size = stream, info.Size
	if err := r.take(first.Data); err != nil {
		r.cancel()
		return nil, err
	}
	return &storage.Reader{Info: info, ReadCloser: r}, nil
}

type getReader struct {
	c      *Client
	ctx    context.Context // the caller's
	sctx   context.Context // the stream's
	cancel func()
	dog    watchdog
	stream pb.Storage_GetClient
	key    string
	size   int64 // declared by the info
	got    int64
	buf    []byte
	err    error // sticky
	closed atomic.Bool
}

func (r *getReader) take(data []byte) error {
	r.got += int64(len(data))
	if r.got > r.size {
		return storage.Errorf("get", r.key, storage.ErrUnknown,
			"adapter %q sent a body longer than its declared size of %d bytes", r.c.adapter, r.size)
	}
	r.buf = data
	return nil
}

func (r *getReader) Read(p []byte) (int, error) {
	if r.closed.Load() {
		return 0, storage.Errorf("get", r.key, storage.ErrInvalidArgument, "read after Close")
	}
	for len(r.buf) == 0 {
		if r.err != nil {
			return 0, r.err
		}
		// Only the wait on the plugin counts, not the caller's pace.
		r.dog.arm(r.c.idleLimit(), errIdleTimeout)
		m, err := r.stream.Recv()
		r.dog.disarm()
		switch {
		case err == io.EOF:
			if r.got < r.size {
				r.err = storage.Errorf("get", r.key, storage.ErrTransient,
					"the body from adapter %q ended %d bytes short of its declared size of %d", r.c.adapter, r.size-r.got, r.size)
			} else {
				r.err = io.EOF
			}
			r.cancel()
		case err != nil:
			if r.closed.Load() {
				r.err = storage.Errorf("get", r.key, storage.ErrInvalidArgument, "read after Close")
			} else {
				r.err = r.streamErr(err)
			}
			r.cancel()
		case m.Info != nil:
			r.err = storage.Errorf("get", r.key, storage.ErrUnknown,
				"adapter %q's plugin broke the protocol: a second info in one get stream", r.c.adapter)
			r.cancel()
		default:
			if err := r.take(m.Data); err != nil {
				r.err = err
				r.cancel()
			}
		}
	}
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	return n, nil
}

// streamErr is err of the stream as a *storage.Error; one the host's own
// limit caused kills the plugin.
func (r *getReader) streamErr(err error) error {
	switch context.Cause(r.sctx) {
	case errCallTimeout:
		if cutShort(r.ctx, r.sctx, time.Time{}, err) {
			return r.c.hung("get", r.key, "did not answer "+describe("get", r.key), r.c.callLimit(), EnvCallTimeout)
		}
	case errIdleTimeout:
		if cutShort(r.ctx, r.sctx, time.Time{}, err) {
			return r.c.hung("get", r.key, "sent nothing more of the body for "+describe("get", r.key), r.c.idleLimit(), EnvIdleTimeout)
		}
	}
	return r.c.convertErr(r.ctx, "get", r.key, err)
}

// Close ends the stream, whether or not the body was read to the end.
func (r *getReader) Close() error {
	r.closed.Store(true)
	r.cancel()
	return nil
}

// fill reads r into buf until buf is full or r ends; eof reports a clean
// end. Unlike io.ReadFull it never mistakes a reader's own
// io.ErrUnexpectedEOF (a truncated source) for the end of the body.
func fill(r io.Reader, buf []byte) (n int, eof bool, err error) {
	for n < len(buf) {
		m, err := r.Read(buf[n:])
		n += m
		if err == io.EOF {
			return n, true, nil
		}
		if err != nil {
			return n, false, err
		}
	}
	return n, false, nil
}

// Put streams body to the plugin in chunks of 1 MiB, reading the next chunk
// while it sends one. If reading body fails the stream is cancelled, not
// closed, so the plugin's driver sees a broken body and must write nothing.
// A Put blocked reading body still returns as soon as ctx ends or the
// plugin dies; the read then in progress is left to finish on its own. As
// with http.RoundTripper, when Put fails early it may still be reading body
// for a moment after it returns.
func (c *Client) Put(ctx context.Context, key string, body io.Reader, opts storage.PutOptions) (storage.Info, error) {
	const op = "put"
	if err := c.ready(op, key); err != nil {
		return storage.Info{}, err
	}
	if err := storage.ValidateKey(op, key); err != nil {
		return storage.Info{}, err
	}
	sctx, cancelCause := context.WithCancelCause(ctx)
	cancel := func() { cancelCause(nil) }
	defer cancel()
	dog := watchdog{cancel: cancelCause}
	defer dog.disarm()
	// streamErr is err of the stream as a *storage.Error; one the host's own
	// limit caused kills the plugin.
	var sent int64
	streamErr := func(err error) error {
		switch context.Cause(sctx) {
		case errCallTimeout:
			if cutShort(ctx, sctx, time.Time{}, err) {
				return c.hung(op, key, "did not answer "+describe(op, key), c.putLimit(sent), EnvCallTimeout)
			}
		case errIdleTimeout:
			if cutShort(ctx, sctx, time.Time{}, err) {
				return c.hung(op, key, "took in nothing more of the body for "+describe(op, key), c.idleLimit(), EnvIdleTimeout)
			}
		}
		return c.convertErr(ctx, op, key, err)
	}
	dog.arm(c.callLimit(), errCallTimeout)
	stream, err := c.rpc.Put(sctx)
	dog.disarm()
	if err != nil {
		return storage.Info{}, streamErr(err)
	}
	hdr := &pb.PutHeader{Key: key, Mode: uint32(opts.Mode), IfVersion: []byte(opts.IfVersion)}
	if l, ok := body.(interface{ Len() int }); ok {
		n := int64(l.Len())
		hdr.Size = &n
	}

	type chunk struct {
		n   int
		eof bool
		err error
	}
	reads := make(chan chunk, 1)
	bufs := [2]*[]byte{bufPool.Get().(*[]byte), bufPool.Get().(*[]byte)}
	reading := false // a read into the other buffer is in flight
	defer func() {
		if !reading { // else the reader still owns a buffer: let it go
			bufPool.Put(bufs[0])
			bufPool.Put(bufs[1])
		}
	}()
	read := func(buf []byte) {
		reading = true
		go func() {
			n, eof, err := fill(body, buf)
			reads <- chunk{n, eof, err}
		}()
	}
	var exited <-chan struct{}
	if c.exited != nil {
		exited = c.exited.Done()
	}

	cur := 0
	read(*bufs[cur])
	msg := &pb.PutRequest{Header: hdr}
	for {
		var ch chunk
		select {
		case ch = <-reads:
			reading = false
		case <-ctx.Done():
			return storage.Info{}, ctxError(op, key, ctx.Err())
		case <-exited:
			return storage.Info{}, c.unavailable(op, key, errors.New("plugin process exited"))
		}
		if ch.err != nil {
			cancel()
			return storage.Info{}, &storage.Error{Op: op, Key: key, Kind: storage.KindOf(ch.err), Err: ch.err,
				Msg: "reading the body failed, the put was abandoned"}
		}
		data := (*bufs[cur])[:ch.n]
		if !ch.eof {
			cur ^= 1
			read(*bufs[cur])
		}
		if ch.n > 0 || msg.Header != nil {
			msg.Data = data
			// Send blocks while the plugin takes in no more (flow
			// control): that wait is the plugin's progress.
			dog.arm(c.idleLimit(), errIdleTimeout)
			err := stream.Send(msg)
			dog.disarm()
			if err != nil {
				if err == io.EOF {
					break // the plugin ended the call: CloseAndRecv says why
				}
				return storage.Info{}, streamErr(err)
			}
			sent += int64(ch.n)
			msg.Header = nil
		}
		if ch.eof {
			break
		}
	}
	dog.arm(c.putLimit(sent), errCallTimeout)
	resp, err := stream.CloseAndRecv()
	dog.disarm()
	if err != nil {
		return storage.Info{}, streamErr(err)
	}
	return infoFromPB(resp.Info), nil
}

func (c *Client) Delete(ctx context.Context, key string, opts storage.DeleteOptions) error {
	const op = "delete"
	if err := c.ready(op, key); err != nil {
		return err
	}
	if err := storage.ValidateKey(op, key); err != nil {
		return err
	}
	req := &pb.DeleteRequest{Key: key, IfVersion: []byte(opts.IfVersion)}
	_, err := viaSession(ctx, c, op, key, &pb.SessionRequest{Call: &pb.SessionRequest_Delete{Delete: req}},
		(*pb.SessionResponse).GetDelete, func(ctx context.Context) (*pb.DeleteResponse, error) {
			return c.rpc.Delete(ctx, req)
		})
	return err
}

// DeleteMany sends the valid keys in one call; invalid keys get their own
// invalid-argument result and are never sent.
func (c *Client) DeleteMany(ctx context.Context, keys []string) ([]storage.DeleteResult, error) {
	const op = "delete-many"
	if err := c.ready(op, ""); err != nil {
		return nil, err
	}
	out := make([]storage.DeleteResult, len(keys))
	send := make([]string, 0, len(keys))
	for i, k := range keys {
		out[i].Key = k
		if err := storage.ValidateKey("delete", k); err != nil {
			out[i].Err = err
			continue
		}
		send = append(send, k)
	}
	if len(send) == 0 {
		return out, nil
	}
	req := &pb.DeleteManyRequest{Keys: send, Packed: true}
	resp, err := viaSession(ctx, c, op, "", &pb.SessionRequest{Call: &pb.SessionRequest_DeleteMany{DeleteMany: req}},
		(*pb.SessionResponse).GetDeleteMany, func(ctx context.Context) (*pb.DeleteManyResponse, error) {
			return c.rpc.DeleteMany(ctx, req)
		})
	if err != nil {
		return nil, err
	}
	var res []storage.DeleteResult
	if len(resp.Packed) > 0 {
		// A plugin that packs answers nothing else; one that predates
		// packing answers results.
		if len(resp.Results) > 0 {
			return nil, storage.Errorf(op, "", storage.ErrUnknown,
				"adapter %q's plugin broke the protocol: delete results both packed and not", c.adapter)
		}
		if res, err = unpackDeleteResults(send, resp.Packed); err != nil {
			return nil, &storage.Error{Op: op, Kind: storage.ErrUnknown, Err: err,
				Msg: fmt.Sprintf("adapter %q's plugin broke the protocol", c.adapter)}
		}
	} else {
		res = make([]storage.DeleteResult, len(resp.Results))
		for i, r := range resp.Results {
			res[i].Key = r.Key
			if r.Error != nil {
				res[i].Err = fromDetail(r.Error, 0)
			}
		}
	}
	if len(send) == len(keys) {
		return res, nil // as the plugin said: the Store checks it
	}
	if len(res) != len(send) {
		return nil, storage.Errorf(op, "", storage.ErrUnknown,
			"adapter %q broke the storage contract: it returned %d results for %d keys", c.adapter, len(res), len(send))
	}
	j := 0
	for i := range out {
		if out[i].Err == nil {
			out[i] = res[j]
			j++
		}
	}
	return out, nil
}

func (c *Client) List(ctx context.Context, opts storage.ListOptions) (storage.ListPage, error) {
	const op = "list"
	if err := c.ready(op, opts.Prefix); err != nil {
		return storage.ListPage{}, err
	}
	if err := storage.ValidatePrefix(op, opts.Prefix); err != nil {
		return storage.ListPage{}, err
	}
	if opts.PageSize < 0 {
		return storage.ListPage{}, storage.Errorf(op, opts.Prefix, storage.ErrInvalidArgument, "negative page size %d", opts.PageSize)
	}
	if !utf8.ValidString(opts.StartAfter) {
		return storage.ListPage{}, storage.Errorf(op, opts.Prefix, storage.ErrInvalidArgument, "StartAfter %q is not valid UTF-8, so it is no key", opts.StartAfter)
	}
	req := &pb.ListRequest{Prefix: opts.Prefix, StartAfter: opts.StartAfter, PageSize: int64(opts.PageSize), Delimiter: opts.Delimiter,
		Packed: true}
	resp, err := viaSession(ctx, c, op, opts.Prefix, &pb.SessionRequest{Call: &pb.SessionRequest_List{List: req}},
		(*pb.SessionResponse).GetList, func(ctx context.Context) (*pb.ListResponse, error) {
			return c.rpc.List(ctx, req)
		})
	if err != nil {
		return storage.ListPage{}, err
	}
	page := storage.ListPage{More: resp.More, Folders: resp.Folders}
	if len(resp.Packed) > 0 {
		// A plugin that packs answers nothing else; one that predates
		// packing answers Info messages.
		if len(resp.Objects) > 0 {
			return storage.ListPage{}, storage.Errorf(op, opts.Prefix, storage.ErrUnknown,
				"adapter %q's plugin broke the protocol: a list page both packed and not", c.adapter)
		}
		objs, err := unpackInfos(opts.Prefix, resp.Packed)
		if err != nil {
			return storage.ListPage{}, &storage.Error{Op: op, Key: opts.Prefix, Kind: storage.ErrUnknown, Err: err,
				Msg: fmt.Sprintf("adapter %q's plugin broke the protocol", c.adapter)}
		}
		page.Objects = objs
		return page, nil
	}
	page.Objects = make([]storage.Info, len(resp.Objects))
	for i, o := range resp.Objects {
		page.Objects[i] = infoFromPB(o)
	}
	return page, nil
}

func (c *Client) AcquireGate(ctx context.Context, name string) (storage.GateLease, error) {
	const op = "acquire-gate"
	if err := c.ready(op, name); err != nil {
		return storage.GateLease{}, err
	}
	if !utf8.ValidString(name) {
		return storage.GateLease{}, storage.Errorf(op, name, storage.ErrInvalidArgument, "gate name %q is not valid UTF-8", name)
	}
	resp, err := unaryWithin(ctx, c, op, name, c.gateLimit(), EnvGateTimeout, func(ctx context.Context) (*pb.AcquireGateResponse, error) {
		return c.rpc.AcquireGate(ctx, &pb.AcquireGateRequest{Name: name})
	})
	if err != nil {
		return storage.GateLease{}, err
	}
	return storage.GateLease{Name: resp.Name, Token: string(resp.Token)}, nil
}

func (c *Client) ReleaseGate(ctx context.Context, lease storage.GateLease) error {
	const op = "release-gate"
	if err := c.ready(op, lease.Name); err != nil {
		return err
	}
	if !utf8.ValidString(lease.Name) {
		return storage.Errorf(op, lease.Name, storage.ErrInvalidArgument, "gate name %q is not valid UTF-8", lease.Name)
	}
	req := &pb.ReleaseGateRequest{Name: lease.Name, Token: []byte(lease.Token)}
	_, err := viaSession(ctx, c, op, lease.Name, &pb.SessionRequest{Call: &pb.SessionRequest_ReleaseGate{ReleaseGate: req}},
		(*pb.SessionResponse).GetReleaseGate, func(ctx context.Context) (*pb.ReleaseGateResponse, error) {
			return c.rpc.ReleaseGate(ctx, req)
		})
	return err
}
