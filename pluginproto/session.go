package pluginproto

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/pluginproto/internal/pb"
)

// A unary gRPC call opens an HTTP/2 stream, sends headers, a message and
// trailers each way and hands the call through about six goroutines; on
// this boundary that is most of its ~0.1 ms (docs/performance.md). The
// calls that wait for one small answer therefore share one long-lived
// bidirectional stream, the session: a request carries an id, its deadline
// and the call; the plugin runs each in its own goroutine and answers with
// the id, in any order, so many are in flight at once. The semantics are
// the unary calls': the same handlers and errors, the call timeout (a
// plugin that misses it is killed), the caller's deadline and cancellation
// reaching the driver, and a crash failing every call in flight as
// unavailable.
//
// The plugin offers it in its OpenResponse. With a plugin that predates it,
// or once the stream has broken, calls go as unary RPCs as before.

type session struct {
	stream pb.Storage_SessionClient
	end    context.CancelFunc // ends the stream

	sendMu sync.Mutex
	mu     sync.Mutex
	next   uint64
	calls  map[uint64]chan *pb.SessionResponse
	done   chan struct{} // closed when the stream has ended
	err    error         // why, once done
}

// openSession starts the session stream; nil if the plugin refuses it.
func (c *Client) openSession() *session {
	ctx, end := context.WithCancel(context.Background())
	stream, err := c.rpc.Session(ctx)
	if err != nil {
		end()
		return nil
	}
	s := &session{stream: stream, end: end, calls: map[uint64]chan *pb.SessionResponse{}, done: make(chan struct{})}
	go s.read()
	return s
}

// read hands each answer to its call until the stream ends.
func (s *session) read() {
	for {
		resp, err := s.stream.Recv()
		if err != nil {
			s.mu.Lock()
			s.err = err
			s.mu.Unlock()
			close(s.done)
			return
		}
		s.mu.Lock()
		ch := s.calls[resp.Id]
		delete(s.calls, resp.Id)
		s.mu.Unlock()
		if ch != nil {
			ch <- resp // buffered: never blocks
		}
	}
}

func (s *session) broken() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

func (s *session) close() {
	if s != nil {
		s.end()
	}
}

func (s *session) send(req *pb.SessionRequest) error {
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	return s.stream.Send(req)
}

func (s *session) forget(id uint64) {
	s.mu.Lock()
	delete(s.calls, id)
	s.mu.Unlock()
}

// call sends req and waits for its answer as unaryWithin waits for a unary
// call's: under limit (set by env), and no longer than ctx allows.
func (s *session) call(ctx context.Context, c *Client, op, key string, limit time.Duration, env string, req *pb.SessionRequest) (*pb.SessionResponse, error) {
	if err := ctx.Err(); err != nil {
		return nil, ctxError(op, key, err)
	}
	ours := time.Now().Add(limit)
	timeout := limit
	if dl, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(dl))
	}
	ch := make(chan *pb.SessionResponse, 1)
	s.mu.Lock()
	s.next++
	id := s.next
	s.calls[id] = ch
	s.mu.Unlock()
	req.Id, req.TimeoutNs = id, max(int64(timeout), 1)
	if err := s.send(req); err != nil {
		s.forget(id)
		// The stream is broken; its reader says why.
		select {
		case <-s.done:
		case <-time.After(time.Second):
		}
		return nil, s.brokenErr(ctx, c, op, key, err)
	}
	t := time.NewTimer(limit)
	defer t.Stop()
	select {
	case resp := <-ch:
		if resp.Code == uint32(codes.OK) {
			return resp, nil
		}
		st := status.New(codes.Code(resp.Code), resp.Message)
		if resp.Error != nil {
			if d, err := st.WithDetails(resp.Error); err == nil {
				st = d
			}
		}
		err := st.Err()
		// The plugin's copy of our deadline may end a moment before our
		// timer: as good as the timer (cutShort).
		if ctx.Err() == nil && st.Code() == codes.DeadlineExceeded && !time.Now().Before(ours) {
			return nil, c.hung(op, key, "did not answer "+describe(op, key), limit, env)
		}
		return nil, c.convertErr(ctx, op, key, err)
	case <-ctx.Done():
		s.forget(id)
		// Tell the plugin, so the driver's ctx ends too; never wait on it.
		go s.send(&pb.SessionRequest{Id: id, Cancel: true})
		return nil, ctxError(op, key, ctx.Err())
	case <-t.C:
		s.forget(id)
		return nil, c.hung(op, key, "did not answer "+describe(op, key), limit, env)
	case <-s.done:
		return nil, s.brokenErr(ctx, c, op, key, nil)
	}
}

// brokenErr is the error of a call whose session stream ended under it.
func (s *session) brokenErr(ctx context.Context, c *Client, op, key string, sendErr error) error {
	s.mu.Lock()
	err := s.err
	s.mu.Unlock()
	if err == nil {
		err = sendErr
	}
	if err == nil {
		err = errors.New("the session stream ended")
	}
	return c.convertErr(ctx, op, key, err)
}

// viaSession runs a call that waits for one answer: over the session when
// there is one, else as the unary RPC call. pick takes the call's result
// out of the session's answer.
func viaSession[T comparable](ctx context.Context, c *Client, op, key string, req *pb.SessionRequest,
	pick func(*pb.SessionResponse) T, call func(context.Context) (T, error)) (T, error) {
	s := c.sess
	if s == nil || s.broken() {
		return unary(ctx, c, op, key, call)
	}
	var zero T
	resp, err := s.call(ctx, c, op, key, c.callLimit(), EnvCallTimeout, req)
	if err != nil {
		return zero, err
	}
	v := pick(resp)
	if v == zero {
		return zero, storage.Errorf(op, key, storage.ErrUnknown,
			"adapter %q's plugin broke the protocol: its answer to %s carried another call's result", c.adapter, describe(op, key))
	}
	return v, nil
}

// inlineMax is the largest body a Get asks for whole on the session: a
// manifest, a tag, a claim. Larger ones stream, and so does anything the
// plugin could not read whole at once (a second open of the object).
const inlineMax = 256 << 10

// getInline is Get of a small body over the session: the reader, or nil and
// no error when the body must stream (no session, or the plugin said so).
func (c *Client) getInline(ctx context.Context, key string) (*storage.Reader, error) {
	const op = "get"
	if !c.inlineGet || c.sess == nil || c.sess.broken() {
		return nil, nil
	}
	req := &pb.GetInlineRequest{Key: key, Max: inlineMax}
	resp, err := viaSession(ctx, c, op, key, &pb.SessionRequest{Call: &pb.SessionRequest_GetInline{GetInline: req}},
		(*pb.SessionResponse).GetGetInline, func(context.Context) (*pb.GetInlineResponse, error) {
			return &pb.GetInlineResponse{Stream: true}, nil // the session broke meanwhile: stream
		})
	if err != nil || resp.Stream {
		return nil, err
	}
	info := infoFromPB(resp.Info)
	if resp.Info == nil || info.Size != int64(len(resp.Data)) {
		return nil, storage.Errorf(op, key, storage.ErrUnknown,
			"adapter %q's plugin broke the protocol: a whole body of %d bytes for an object of %d", c.adapter, len(resp.Data), info.Size)
	}
	return &storage.Reader{Info: info, ReadCloser: &inlineReader{key: key, data: resp.Data}}, nil
}

// inlineReader reads a body that came whole, as a getReader reads one that
// streams (read after Close included).
type inlineReader struct {
	key    string
	data   []byte
	closed bool
}

func (r *inlineReader) Read(p []byte) (int, error) {
	if r.closed {
		return 0, storage.Errorf("get", r.key, storage.ErrInvalidArgument, "read after Close")
	}
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.data)
	r.data = r.data[n:]
	return n, nil
}

func (r *inlineReader) Close() error { r.closed = true; return nil }
