package pluginproto

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/redact"
	"github.com/retain-dev/retain/pluginproto/internal/pb"
)

// Serve runs a as a storage plugin for a retain host and returns when the
// host shuts it down. It is the whole main of a vendor's plugin binary:
//
//	func main() { pluginproto.Serve(acme.Adapter) }
//
// Nothing may be written to stdout before Serve: the host reads the
// handshake from there. Logs belong on stderr (Serve logs JSON there, which
// the host forwards to its own logger). Run by hand rather than by a host,
// Serve says so on stderr and exits with status 1. If the host process dies
// the plugin exits at once with status 2 (on Unix, where an orphan is
// reparented). SIGINT and SIGTERM are ignored: a plugin ends with its
// host, never before it.
func Serve(a storage.Adapter) {
	serve(a, serveConfig{})
}

// serveConfig holds test hooks.
type serveConfig struct {
	// versions are the protocol versions offered; default ProtocolVersion.
	versions []int
	// legacy: see server.legacy.
	legacy bool
	// unpacked: see server.unpacked.
	unpacked bool
}

// parentPoll is how often a plugin checks that its host is alive.
const parentPoll = 200 * time.Millisecond

func serve(a storage.Adapter, cfg serveConfig) {
	// A plugin ends with its host, never before it: SIGINT and SIGTERM
	// reach the whole process group (`kill -TERM -PGID`, systemd's stop,
	// `timeout`), and a host that finishes its pass on them needs its store
	// until it exits. The host's exit ends the plugin (Pdeathsig, the parent
	// watch, or the host's Kill).
	ignoreStopSignals()
	closeInheritedImage()
	level := hclog.LevelFromString(os.Getenv(envLogLevel))
	if level == hclog.NoLevel {
		level = hclog.Info
	}
	logger := hclog.New(&hclog.LoggerOptions{
		Name:  a.Name,
		Level: level,
		// The real stderr (go-plugin swaps os.Stderr later), masked here:
		// only the plugin knows what its credential chain resolved.
		Output:     redact.NewWriter(os.Stderr),
		JSONFormat: true,
	})

	go watchParent(logger, os.Getppid(), parentPoll)

	srv := &server{adapter: a, legacy: cfg.legacy, unpacked: cfg.unpacked}
	versions := cfg.versions
	if len(versions) == 0 {
		versions = []int{ProtocolVersion}
	}
	sets := make(map[int]plugin.PluginSet, len(versions))
	for _, v := range versions {
		sets[v] = plugin.PluginSet{pluginName: &storagePlugin{srv: srv}}
	}
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig:  handshake,
		VersionedPlugins: sets,
		GRPCServer: func(opts []grpc.ServerOption) *grpc.Server {
			opts = append(opts, grpc.MaxRecvMsgSize(maxMsgSize), grpc.MaxSendMsgSize(maxMsgSize),
				grpc.InitialWindowSize(streamWindow), grpc.InitialConnWindowSize(connWindow))
			return grpc.NewServer(opts...)
		},
		Logger: logger,
	})
	if err := srv.close(); err != nil {
		logger.Warn("closing the store", "error", err)
	}
}

// ignoreStopSignals ignores SIGINT and SIGTERM (go-plugin later takes
// SIGINT itself and discards it).
func ignoreStopSignals() { signal.Ignore(os.Interrupt, syscall.SIGTERM) }

// watchParent exits the process as soon as its parent is no longer ppid:
// the host died and the plugin was reparented, so no one will ever call it
// again. Exiting here means no orphan outlives a SIGKILLed host.
func watchParent(logger hclog.Logger, ppid int, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for range t.C {
		if now := os.Getppid(); now != ppid {
			logger.Error("host process is gone, plugin exiting", "host_pid", ppid, "new_parent_pid", now)
			os.Exit(2)
		}
	}
}

// server is the plugin half of the Storage service over one adapter.
type server struct {
	pb.UnimplementedStorageServer
	adapter storage.Adapter
	// legacy makes the plugin answer as one that predates batch reads and
	// sessions, so a test can prove a host falls back to single unary calls.
	legacy bool
	// unpacked makes it answer as one with batch reads and sessions that
	// predates packed answers.
	unpacked bool

	mu  sync.Mutex
	drv storage.Driver
}

func (s *server) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.drv == nil {
		return nil
	}
	err := s.drv.Close()
	s.drv = nil
	return err
}

// driver is the open driver, or the error status for a call before Open.
func (s *server) driver(op, key string) (storage.Driver, error) {
	s.mu.Lock()
	d := s.drv
	s.mu.Unlock()
	if d == nil {
		return nil, toStatus(op, key, storage.Errorf(op, key, storage.ErrInvalidArgument,
			"the plugin for adapter %q has no open store: the host must call Open first", s.adapter.Name))
	}
	return d, nil
}

// checkKey validates a key the host sent, before anything reaches the driver.
func (s *server) checkKey(op, key string) (storage.Driver, error) {
	if err := storage.ValidateKey(op, key); err != nil {
		return nil, toStatus(op, key, err)
	}
	return s.driver(op, key)
}

// checkInfo refuses info the wire cannot carry: keys are UTF-8 by contract.
func (s *server) checkInfo(op, key string, infos ...storage.Info) error {
	for _, i := range infos {
		if !utf8.ValidString(i.Key) {
			return toStatus(op, key, storage.Errorf(op, key, storage.ErrUnknown,
				"adapter %q broke the storage contract: it returned key %q, which is not valid UTF-8", s.adapter.Name, i.Key))
		}
	}
	return nil
}

func (s *server) Open(ctx context.Context, req *pb.OpenRequest) (*pb.OpenResponse, error) {
	const op = "open"
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.drv != nil {
		return nil, toStatus(op, "", storage.Errorf(op, "", storage.ErrInvalidArgument,
			"the plugin for adapter %q already has an open store: one plugin process serves one store", s.adapter.Name))
	}
	if s.adapter.Open == nil {
		return nil, toStatus(op, "", storage.Errorf(op, "", storage.ErrUnsupported, "adapter %q has no Open function", s.adapter.Name))
	}
	d, err := s.adapter.Open(ctx, locationFromPB(req.Location))
	if err != nil {
		return nil, toStatus(op, "", err)
	}
	if d == nil {
		return nil, toStatus(op, "", storage.Errorf(op, "", storage.ErrUnknown, "adapter %q opened no driver and gave no error", s.adapter.Name))
	}
	s.drv = d
	_, batch := d.(storage.BatchReader)
	return &pb.OpenResponse{Adapter: s.adapter.Name, BatchReads: batch && !s.legacy, Session: !s.legacy,
		InlineGet: batch && !s.legacy}, nil
}

func (s *server) Capabilities(ctx context.Context, _ *pb.CapabilitiesRequest) (*pb.CapabilitiesResponse, error) {
	const op = "capabilities"
	d, err := s.driver(op, "")
	if err != nil {
		return nil, err
	}
	c, err := d.Capabilities(ctx)
	if err != nil {
		return nil, toStatus(op, "", err)
	}
	return capsToPB(c), nil
}

// bufPool holds chunk buffers for streaming bodies.
var bufPool = sync.Pool{New: func() any { b := make([]byte, chunkSize); return &b }}

func (s *server) Get(req *pb.GetRequest, stream pb.Storage_GetServer) error {
	const op = "get"
	d, err := s.checkKey(op, req.Key)
	if err != nil {
		return err
	}
	r, err := d.Get(stream.Context(), req.Key)
	if err != nil {
		return toStatus(op, req.Key, err)
	}
	defer r.Close()
	if err := s.checkInfo(op, req.Key, r.Info); err != nil {
		return err
	}
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	buf := *bp
	// The first message carries the info and, for small objects, the
	// whole body.
	msg := &pb.GetResponse{Info: infoToPB(r.Info)}
	for {
		n, eof, rerr := fillFor(r, buf, flushEvery)
		if rerr != nil {
			return toStatus(op, req.Key, rerr)
		}
		if n > 0 || msg.Info != nil {
			msg.Data = buf[:n]
			// Send encodes msg before it returns, so buf can be refilled.
			if err := stream.Send(msg); err != nil {
				return err // the host went away or cancelled
			}
			msg.Info, msg.Data = nil, nil
		}
		if eof {
			return nil
		}
	}
}

func (s *server) Stat(ctx context.Context, req *pb.StatRequest) (*pb.StatResponse, error) {
	const op = "stat"
	d, err := s.checkKey(op, req.Key)
	if err != nil {
		return nil, err
	}
	info, err := d.Stat(ctx, req.Key)
	if err != nil {
		return nil, toStatus(op, req.Key, err)
	}
	if err := s.checkInfo(op, req.Key, info); err != nil {
		return nil, err
	}
	return &pb.StatResponse{Info: infoToPB(info)}, nil
}

func (s *server) Put(stream pb.Storage_PutServer) error {
	const op = "put"
	first, err := stream.Recv()
	if err == io.EOF || (err == nil && first.Header == nil) {
		return toStatus(op, "", storage.Errorf(op, "", storage.ErrInvalidArgument, "the put stream must start with a header"))
	}
	if err != nil {
		return err
	}
	h := first.Header
	d, err := s.checkKey(op, h.Key)
	if err != nil {
		return err
	}
	if h.Mode > 255 {
		return toStatus(op, h.Key, storage.Errorf(op, h.Key, storage.ErrInvalidArgument, "unknown put mode %d", h.Mode))
	}
	body := &putBody{stream: stream, key: h.Key, buf: first.Data, size: h.Size}
	if body.size != nil && int64(len(body.buf)) > *body.size {
		return toStatus(op, h.Key, body.tooLong())
	}
	body.got = int64(len(body.buf))
	opts := storage.PutOptions{Mode: storage.PutMode(h.Mode), IfVersion: string(h.IfVersion)}
	info, err := d.Put(stream.Context(), h.Key, body, opts)
	if err != nil {
		return toStatus(op, h.Key, err)
	}
	if err := s.checkInfo(op, h.Key, info); err != nil {
		return err
	}
	return stream.SendAndClose(&pb.PutResponse{Info: infoToPB(info)})
}

// flushEvery is the longest Get holds body bytes it has read before it
// sends them: the host judges a body stream by its progress (its idle
// timeout), so a slow source must show what it has, while a fast one still
// fills whole chunks.
const flushEvery = 100 * time.Millisecond

// fillFor is fill that also stops, with what it has, once a read returns
// after d has passed.
func fillFor(r io.Reader, buf []byte, d time.Duration) (n int, eof bool, err error) {
	start := time.Now()
	for n < len(buf) {
		m, err := r.Read(buf[n:])
		n += m
		if err == io.EOF {
			return n, true, nil
		}
		if err != nil {
			return n, false, err
		}
		if n > 0 && time.Since(start) >= d {
			break
		}
	}
	return n, false, nil
}

// putBody is the body of a Put as the driver reads it: the chunks of the
// stream, ending in io.EOF only when the host closed its side normally
// with exactly the declared size. A host that cancels or dies makes it
// fail, so a driver never stores a truncated body as whole.
type putBody struct {
	stream pb.Storage_PutServer
	key    string
	buf    []byte
	size   *int64 // declared by the host, if known
	got    int64  // bytes received so far
	err    error  // sticky
}

func (b *putBody) tooLong() error {
	return storage.Errorf("put", b.key, storage.ErrInvalidArgument,
		"the body is longer than the %d bytes the host declared", *b.size)
}

func (b *putBody) Read(p []byte) (int, error) {
	for len(b.buf) == 0 {
		if b.err != nil {
			return 0, b.err
		}
		m, err := b.stream.Recv()
		switch {
		case err == io.EOF:
			if b.size != nil && b.got != *b.size {
				b.err = storage.Errorf("put", b.key, storage.ErrInvalidArgument,
					"the body ended after %d bytes, the host declared %d", b.got, *b.size)
			} else {
				b.err = io.EOF
			}
		case err != nil:
			b.err = &storage.Error{Op: "put", Key: b.key, Kind: storage.ErrTransient,
				Msg: "the body stream from the host broke; nothing must be written", Err: err}
			if cerr := b.stream.Context().Err(); cerr != nil {
				b.err = &storage.Error{Op: "put", Key: b.key, Kind: storage.ErrTransient,
					Msg: "the host cancelled the put; nothing must be written", Err: cerr}
			}
		case m.Header != nil:
			b.err = storage.Errorf("put", b.key, storage.ErrInvalidArgument, "a second put header in one stream")
		default:
			b.got += int64(len(m.Data))
			if b.size != nil && b.got > *b.size {
				b.err = b.tooLong()
			} else {
				b.buf = m.Data
			}
		}
	}
	n := copy(p, b.buf)
	b.buf = b.buf[n:]
	return n, nil
}

func (s *server) Delete(ctx context.Context, req *pb.DeleteRequest) (*pb.DeleteResponse, error) {
	const op = "delete"
	d, err := s.checkKey(op, req.Key)
	if err != nil {
		return nil, err
	}
	if err := d.Delete(ctx, req.Key, storage.DeleteOptions{IfVersion: string(req.IfVersion)}); err != nil {
		return nil, toStatus(op, req.Key, err)
	}
	return &pb.DeleteResponse{}, nil
}

func (s *server) DeleteMany(ctx context.Context, req *pb.DeleteManyRequest) (*pb.DeleteManyResponse, error) {
	const op = "delete-many"
	d, err := s.driver(op, "")
	if err != nil {
		return nil, err
	}
	if req.Packed && !s.legacy && !s.unpacked {
		return s.deleteManyPacked(ctx, d, req.Keys)
	}
	// Invalid keys get their own result and never reach the driver.
	out := make([]*pb.DeleteResult, len(req.Keys))
	send := make([]string, 0, len(req.Keys))
	for i, k := range req.Keys {
		out[i] = &pb.DeleteResult{Key: k}
		if err := storage.ValidateKey("delete", k); err != nil {
			out[i].Error, _ = detailOf("delete", k, err)
			continue
		}
		send = append(send, k)
	}
	if len(send) == 0 {
		return &pb.DeleteManyResponse{Results: out}, nil
	}
	res, err := d.DeleteMany(ctx, send)
	if err != nil {
		return nil, toStatus(op, "", err)
	}
	if len(send) == len(req.Keys) {
		// Pass the driver's answer through as is: the host's Store checks it.
		out = out[:0]
		for _, r := range res {
			out = append(out, deleteResultToPB(r))
		}
		return &pb.DeleteManyResponse{Results: out}, nil
	}
	if len(res) != len(send) {
		return nil, toStatus(op, "", storage.Errorf(op, "", storage.ErrUnknown,
			"adapter %q broke the storage contract: it returned %d results for %d keys", s.adapter.Name, len(res), len(send)))
	}
	j := 0
	for i := range out {
		if out[i].Error == nil {
			out[i] = deleteResultToPB(res[j])
			j++
		}
	}
	return &pb.DeleteManyResponse{Results: out}, nil
}

// deleteManyPacked answers DeleteMany packed: the failures by index. The
// host then sees no key the driver named, so the plugin checks what the
// host's Store would have: a result per key, each for its key.
func (s *server) deleteManyPacked(ctx context.Context, d storage.Driver, keys []string) (*pb.DeleteManyResponse, error) {
	const op = "delete-many"
	send, bad := validKeys("delete", keys)
	var res []storage.DeleteResult
	if len(send) > 0 {
		var err error
		if res, err = d.DeleteMany(ctx, send); err != nil {
			return nil, toStatus(op, "", err)
		}
		if len(res) != len(send) {
			return nil, toStatus(op, "", storage.Errorf(op, "", storage.ErrUnknown,
				"adapter %q broke the storage contract: it returned %d results for %d keys", s.adapter.Name, len(res), len(send)))
		}
	}
	var idx []int
	var ds []*pb.ErrorDetail
	j := 0
	for i, k := range keys {
		if e, ok := bad[i]; ok {
			dt, _ := detailOf("delete", k, e)
			idx, ds = append(idx, i), append(ds, dt)
			continue
		}
		r := res[j]
		if r.Key != k {
			return nil, toStatus(op, k, storage.Errorf(op, k, storage.ErrUnknown,
				"adapter %q broke the storage contract: result %d names key %q", s.adapter.Name, j, r.Key))
		}
		j++
		if r.Err != nil {
			dt, _ := detailOf("delete", k, r.Err)
			idx, ds = append(idx, i), append(ds, dt)
		}
	}
	return &pb.DeleteManyResponse{Packed: packDeleteFailures(len(keys), idx, ds)}, nil
}

func deleteResultToPB(r storage.DeleteResult) *pb.DeleteResult {
	p := &pb.DeleteResult{Key: text(r.Key)}
	if r.Err != nil {
		p.Error, _ = detailOf("delete", r.Key, r.Err)
	}
	return p
}

func (s *server) List(ctx context.Context, req *pb.ListRequest) (*pb.ListResponse, error) {
	const op = "list"
	if err := storage.ValidatePrefix(op, req.Prefix); err != nil {
		return nil, toStatus(op, req.Prefix, err)
	}
	if req.PageSize < 0 || int64(int(req.PageSize)) != req.PageSize {
		return nil, toStatus(op, req.Prefix, storage.Errorf(op, req.Prefix, storage.ErrInvalidArgument, "bad page size %d", req.PageSize))
	}
	d, err := s.driver(op, req.Prefix)
	if err != nil {
		return nil, err
	}
	page, err := d.List(ctx, storage.ListOptions{Prefix: req.Prefix, StartAfter: req.StartAfter, PageSize: int(req.PageSize), Delimiter: req.Delimiter})
	if err != nil {
		return nil, toStatus(op, req.Prefix, err)
	}
	if err := s.checkInfo(op, req.Prefix, page.Objects...); err != nil {
		return nil, err
	}
	for _, f := range page.Folders {
		if !utf8.ValidString(f) {
			return nil, toStatus(op, req.Prefix, storage.Errorf(op, req.Prefix, storage.ErrUnknown, "the adapter listed a folder that is not valid UTF-8: %q", f))
		}
	}
	if req.Packed && !s.legacy && !s.unpacked {
		packed, ok := packInfos(req.Prefix, page.Objects)
		if !ok {
			return nil, toStatus(op, req.Prefix, storage.Errorf(op, req.Prefix, storage.ErrUnknown,
				"adapter %q broke the storage contract: it listed a key outside the prefix", s.adapter.Name))
		}
		return &pb.ListResponse{More: page.More, Folders: page.Folders, Packed: packed}, nil
	}
	out := &pb.ListResponse{More: page.More, Objects: make([]*pb.Info, len(page.Objects)), Folders: page.Folders}
	for i, o := range page.Objects {
		out.Objects[i] = infoToPB(o)
	}
	return out, nil
}

func (s *server) AcquireGate(ctx context.Context, req *pb.AcquireGateRequest) (*pb.AcquireGateResponse, error) {
	const op = "acquire-gate"
	d, err := s.driver(op, req.Name)
	if err != nil {
		return nil, err
	}
	l, err := d.AcquireGate(ctx, req.Name)
	if err != nil {
		return nil, toStatus(op, req.Name, err)
	}
	if cerr := ctx.Err(); cerr != nil {
		// The host gave up waiting and will never learn of this lease:
		// give the gate back rather than hold it forever.
		if rerr := d.ReleaseGate(context.WithoutCancel(ctx), l); rerr != nil {
			return nil, toStatus(op, req.Name, errors.Join(cerr, fmt.Errorf("releasing the gate nobody holds: %w", rerr)))
		}
		return nil, toStatus(op, req.Name, cerr)
	}
	return &pb.AcquireGateResponse{Name: text(l.Name), Token: []byte(l.Token)}, nil
}

func (s *server) ReleaseGate(ctx context.Context, req *pb.ReleaseGateRequest) (*pb.ReleaseGateResponse, error) {
	const op = "release-gate"
	d, err := s.driver(op, req.Name)
	if err != nil {
		return nil, err
	}
	if err := d.ReleaseGate(ctx, storage.GateLease{Name: req.Name, Token: string(req.Token)}); err != nil {
		return nil, toStatus(op, req.Name, err)
	}
	return &pb.ReleaseGateResponse{}, nil
}

// batchDriver is the open driver's BatchReader, or the error status for a
// host that calls a batch without the plugin having offered it.
func (s *server) batchDriver(op string, keys int) (storage.BatchReader, error) {
	d, err := s.driver(op, "")
	if err != nil {
		return nil, err
	}
	if s.legacy {
		// What a plugin built before batch reads answers.
		return nil, status.Errorf(codes.Unimplemented, "method %s not implemented", op)
	}
	br, ok := d.(storage.BatchReader)
	if !ok {
		return nil, toStatus(op, "", storage.Errorf(op, "", storage.ErrUnsupported,
			"adapter %q has no batch reads: the host must read key by key", s.adapter.Name))
	}
	if keys > storage.MaxBatchKeys {
		return nil, toStatus(op, "", storage.Errorf(op, "", storage.ErrInvalidArgument,
			"%d keys in one batch, over the limit of %d", keys, storage.MaxBatchKeys))
	}
	return br, nil
}

// validKeys splits keys into the valid ones, which reach the driver, and
// the indexes of the others, which get their own invalid-argument result.
func validKeys(op string, keys []string) (send []string, bad map[int]error) {
	send = make([]string, 0, len(keys))
	for i, k := range keys {
		if err := storage.ValidateKey(op, k); err != nil {
			if bad == nil {
				bad = map[int]error{}
			}
			bad[i] = err
			continue
		}
		send = append(send, k)
	}
	return send, bad
}

func (s *server) StatMany(ctx context.Context, req *pb.StatManyRequest) (*pb.StatManyResponse, error) {
	const op = "stat-many"
	br, err := s.batchDriver(op, len(req.Keys))
	if err != nil {
		return nil, err
	}
	send, bad := validKeys("stat", req.Keys)
	var res []storage.StatResult
	if len(send) > 0 {
		if res, err = br.StatMany(ctx, send); err != nil {
			return nil, toStatus(op, "", err)
		}
		if len(res) != len(send) {
			return nil, toStatus(op, "", storage.Errorf(op, "", storage.ErrUnknown,
				"adapter %q broke the storage contract: it returned %d results for %d keys", s.adapter.Name, len(res), len(send)))
		}
	}
	out := &pb.StatManyResponse{Results: make([]*pb.StatResult, len(req.Keys))}
	j := 0
	for i, k := range req.Keys {
		if e, ok := bad[i]; ok {
			d, _ := detailOf("stat", k, e)
			out.Results[i] = &pb.StatResult{Key: k, Error: d}
			continue
		}
		r := res[j]
		j++
		p := &pb.StatResult{Key: text(r.Key)}
		if r.Err != nil {
			p.Error, _ = detailOf("stat", r.Key, r.Err)
		} else {
			if err := s.checkInfo(op, k, r.Info); err != nil {
				return nil, err
			}
			p.Info = infoToPB(r.Info)
		}
		out.Results[i] = p
	}
	return out, nil
}

func (s *server) GetMany(req *pb.GetManyRequest, stream pb.Storage_GetManyServer) error {
	const op = "get-many"
	br, err := s.batchDriver(op, len(req.Keys))
	if err != nil {
		return err
	}
	if req.MaxBytes < 0 || req.MaxBytes > storage.MaxBatchBytes {
		return toStatus(op, "", storage.Errorf(op, "", storage.ErrInvalidArgument,
			"a batch of %d bytes, outside 0 to %d", req.MaxBytes, storage.MaxBatchBytes))
	}
	send, bad := validKeys("get", req.Keys)
	// The driver is asked for about a message's worth at a time and each
	// answer is sent at once, so the host takes in one part while the
	// plugin reads the next. Answered piece by piece within what is left,
	// a batch ends where one call within maxBytes would have.
	ctx := stream.Context()
	packed := req.Packed && !s.legacy && !s.unpacked
	var pk getPacker
	msg := &pb.GetManyResponse{}
	size, pending := 0, 0
	flush := func() error {
		if packed {
			msg.Packed, msg.Bodies = pk.take()
		}
		err := stream.Send(msg)
		msg, size, pending = &pb.GetManyResponse{}, 0, 0
		return err // non-nil: the host went away or cancelled
	}
	// emit adds p (with info, unless it failed) to the answer.
	emit := func(p *pb.GetResult, info storage.Info) error {
		switch {
		case packed && p.Error != nil:
			pk.fail(p.Error)
		case packed:
			pk.ok(info, p.Data)
		default:
			if p.Error == nil {
				p.Info = infoToPB(info)
			}
			msg.Results = append(msg.Results, p)
		}
		pending++
		size += len(p.Data) + len(p.Key) + 64
		if size < chunkSize {
			return nil
		}
		return flush()
	}
	i := 0 // the next of req.Keys to answer
	emitBad := func() error {
		for ; i < len(req.Keys); i++ {
			e, ok := bad[i]
			if !ok {
				return nil
			}
			d, _ := detailOf("get", req.Keys[i], e)
			if err := emit(&pb.GetResult{Key: req.Keys[i], Error: d}, storage.Info{}); err != nil {
				return err
			}
		}
		return nil
	}
	left := req.MaxBytes
	answered := 0
	for rest := send; len(rest) > 0; {
		if err := emitBad(); err != nil {
			return err
		}
		res, err := br.GetMany(ctx, rest, min(left, chunkSize))
		if err == nil && len(res) == 1 && errors.Is(res[0].Err, storage.ErrLimitExceeded) && left > chunkSize {
			res, err = br.GetMany(ctx, rest[:1], left) // larger than a piece, maybe not than the batch
		}
		if err != nil {
			return toStatus(op, "", err)
		}
		if len(res) < 1 || len(res) > len(rest) {
			return toStatus(op, "", storage.Errorf(op, "", storage.ErrUnknown,
				"adapter %q broke the storage contract: it returned %d results for %d keys", s.adapter.Name, len(res), len(rest)))
		}
		if len(res) == 1 && errors.Is(res[0].Err, storage.ErrLimitExceeded) && answered > 0 {
			break // stop before the body that does not fit; the host asks again
		}
		for _, r := range res {
			if err := emitBad(); err != nil {
				return err
			}
			k := req.Keys[i]
			i++
			// Packed, a result's key is the request's: the host can no
			// longer see the driver name another, so the plugin checks.
			if packed && (r.Key != k || (r.Err == nil && r.Info.Key != k)) {
				return toStatus(op, k, storage.Errorf(op, k, storage.ErrUnknown,
					"adapter %q broke the storage contract: its result for %q names key %q (info %q)", s.adapter.Name, k, r.Key, r.Info.Key))
			}
			p := &pb.GetResult{Key: text(r.Key)}
			if r.Err != nil {
				p.Error, _ = detailOf("get", r.Key, r.Err)
			} else {
				if err := s.checkInfo(op, k, r.Info); err != nil {
					return err
				}
				p.Data = r.Data
				left -= int64(len(r.Data))
			}
			if err := emit(p, r.Info); err != nil {
				return err
			}
		}
		answered += len(res)
		rest = rest[len(res):]
		if len(res) == 1 && errors.Is(res[0].Err, storage.ErrLimitExceeded) {
			break // the first key alone is larger than the batch
		}
	}
	if len(send) == 0 {
		if err := emitBad(); err != nil {
			return err
		}
	}
	if pending > 0 {
		return flush()
	}
	return nil
}
