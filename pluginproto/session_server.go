package pluginproto

import (
	"context"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/retain-dev/retain/pluginproto/internal/pb"
)

// Session serves the calls of session.go: each request runs in its own
// goroutine under its own context (the deadline it carries, ended early by
// a cancel request or the stream's end), through the same handler as its
// unary RPC, and its answer is sent when it is ready, in any order.
func (s *server) Session(stream pb.Storage_SessionServer) error {
	if s.legacy {
		return status.Errorf(codes.Unimplemented, "method Session not implemented")
	}
	ctx, cancelAll := context.WithCancel(stream.Context())
	defer cancelAll()
	var (
		sendMu  sync.Mutex
		mu      sync.Mutex
		cancels = map[uint64]context.CancelFunc{}
		wg      sync.WaitGroup
	)
	// The handler must not return while a call may still send.
	defer wg.Wait()
	for {
		req, err := stream.Recv()
		if err != nil {
			return nil // the host closed its side or went away: cancelAll ends the calls
		}
		if req.Cancel {
			mu.Lock()
			if c := cancels[req.Id]; c != nil {
				c()
			}
			mu.Unlock()
			continue
		}
		cctx, cancel := context.WithCancel(ctx)
		if req.TimeoutNs > 0 {
			cctx, cancel = context.WithTimeout(ctx, time.Duration(req.TimeoutNs))
		}
		mu.Lock()
		cancels[req.Id] = cancel
		mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp := s.sessionCall(cctx, req)
			resp.Id = req.Id
			mu.Lock()
			delete(cancels, req.Id)
			mu.Unlock()
			cancel()
			sendMu.Lock()
			err := stream.Send(resp)
			sendMu.Unlock()
			if err != nil {
				cancelAll() // the stream is broken: nothing more can be answered
			}
		}()
	}
}

// sessionCall runs one request through the unary handler of its call.
func (s *server) sessionCall(ctx context.Context, req *pb.SessionRequest) *pb.SessionResponse {
	resp := &pb.SessionResponse{}
	var err error
	switch c := req.Call.(type) {
	case *pb.SessionRequest_Capabilities:
		var r *pb.CapabilitiesResponse
		if r, err = s.Capabilities(ctx, c.Capabilities); err == nil {
			resp.Result = &pb.SessionResponse_Capabilities{Capabilities: r}
		}
	case *pb.SessionRequest_Stat:
		var r *pb.StatResponse
		if r, err = s.Stat(ctx, c.Stat); err == nil {
			resp.Result = &pb.SessionResponse_Stat{Stat: r}
		}
	case *pb.SessionRequest_Delete:
		var r *pb.DeleteResponse
		if r, err = s.Delete(ctx, c.Delete); err == nil {
			resp.Result = &pb.SessionResponse_Delete{Delete: r}
		}
	case *pb.SessionRequest_DeleteMany:
		var r *pb.DeleteManyResponse
		if r, err = s.DeleteMany(ctx, c.DeleteMany); err == nil {
			resp.Result = &pb.SessionResponse_DeleteMany{DeleteMany: r}
		}
	case *pb.SessionRequest_List:
		var r *pb.ListResponse
		if r, err = s.List(ctx, c.List); err == nil {
			resp.Result = &pb.SessionResponse_List{List: r}
		}
	case *pb.SessionRequest_ReleaseGate:
		var r *pb.ReleaseGateResponse
		if r, err = s.ReleaseGate(ctx, c.ReleaseGate); err == nil {
			resp.Result = &pb.SessionResponse_ReleaseGate{ReleaseGate: r}
		}
	case *pb.SessionRequest_StatMany:
		var r *pb.StatManyResponse
		if r, err = s.StatMany(ctx, c.StatMany); err == nil {
			resp.Result = &pb.SessionResponse_StatMany{StatMany: r}
		}
	case *pb.SessionRequest_GetInline:
		var r *pb.GetInlineResponse
		if r, err = s.getInline(ctx, c.GetInline); err == nil {
			resp.Result = &pb.SessionResponse_GetInline{GetInline: r}
		}
	default:
		err = status.Errorf(codes.Unimplemented, "a session request with no call this plugin knows")
	}
	if err != nil {
		st := status.Convert(err)
		resp.Code, resp.Message = uint32(st.Code()), st.Message()
		for _, d := range st.Details() {
			if d, ok := d.(*pb.ErrorDetail); ok {
				resp.Error = d
				break
			}
		}
		if resp.Code == 0 {
			resp.Code = uint32(codes.Unknown)
		}
	}
	return resp
}

// getInline reads a small body whole for the session. Anything but a body
// of exactly its declared size, at most req.Max, read within flushEvery
// (larger, slower, shorter, longer, failing) is answered stream, and the
// host's streaming Get then reports it as a Get does.
func (s *server) getInline(ctx context.Context, req *pb.GetInlineRequest) (*pb.GetInlineResponse, error) {
	const op = "get"
	d, err := s.checkKey(op, req.Key)
	if err != nil {
		return nil, err
	}
	r, err := d.Get(ctx, req.Key)
	if err != nil {
		return nil, toStatus(op, req.Key, err)
	}
	defer r.Close()
	if err := s.checkInfo(op, req.Key, r.Info); err != nil {
		return nil, err
	}
	if r.Info.Size < 0 || r.Info.Size > req.Max {
		return &pb.GetInlineResponse{Stream: true}, nil
	}
	buf := make([]byte, r.Info.Size+1) // one more: a body longer than declared shows
	n, eof, rerr := fillFor(r, buf, flushEvery)
	if rerr != nil || !eof || int64(n) != r.Info.Size {
		return &pb.GetInlineResponse{Stream: true}, nil
	}
	return &pb.GetInlineResponse{Info: infoToPB(r.Info), Data: buf[:n]}, nil
}
