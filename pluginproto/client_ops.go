package pluginproto

// The host half's storage operations over the wire.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/pluginproto/internal/pb"
)

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
