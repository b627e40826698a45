package pluginproto

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/pluginproto/internal/pb"
)

// Batch reads cross the boundary once for up to storage.MaxBatchKeys keys,
// where single calls cross it once per key: the crossing, not the read, is
// what a small local read costs through the plugin (docs/performance.md).
// They are offered by the plugin in its OpenResponse (batch_reads); to a
// plugin that did not offer them, or predates them, the Client answers
// ErrUnsupported without a call and the storage.Store reads key by key.

// batchKeys checks the keys of a batch as DeleteMany does: the valid ones
// are sent, the others get their own invalid-argument error (by index).
func (c *Client) batchKeys(op, single string, keys []string) (send []string, bad map[int]error, err error) {
	if err := c.ready(op, ""); err != nil {
		return nil, nil, err
	}
	if !c.batch {
		return nil, nil, storage.Errorf(op, "", storage.ErrUnsupported,
			"the plugin for adapter %q has no batch reads (it predates them, or its driver has none)", c.adapter)
	}
	if len(keys) > storage.MaxBatchKeys {
		return nil, nil, storage.Errorf(op, "", storage.ErrInvalidArgument,
			"%d keys in one batch, over the limit of %d", len(keys), storage.MaxBatchKeys)
	}
	send, bad = validKeys(single, keys)
	return send, bad, nil
}

func (c *Client) StatMany(ctx context.Context, keys []string) ([]storage.StatResult, error) {
	const op = "stat-many"
	send, bad, err := c.batchKeys(op, "stat", keys)
	if err != nil {
		return nil, err
	}
	var got []storage.StatResult
	if len(send) > 0 {
		req := &pb.StatManyRequest{Keys: send}
		resp, err := viaSession(ctx, c, op, "", &pb.SessionRequest{Call: &pb.SessionRequest_StatMany{StatMany: req}},
			(*pb.SessionResponse).GetStatMany, func(ctx context.Context) (*pb.StatManyResponse, error) {
				return c.rpc.StatMany(ctx, req)
			})
		if err != nil {
			return nil, err
		}
		got = make([]storage.StatResult, len(resp.Results))
		for i, r := range resp.Results {
			got[i] = storage.StatResult{Key: r.Key}
			if r.Error != nil {
				got[i].Err = fromDetail(r.Error, 0)
			} else {
				got[i].Info = infoFromPB(r.Info)
			}
		}
	}
	return splice(c, op, keys, bad, got, func(i int, err error) storage.StatResult {
		return storage.StatResult{Key: keys[i], Err: err}
	})
}

// GetMany streams the results: the call timeout bounds the wait for the
// first message, the idle timeout each wait for the next.
func (c *Client) GetMany(ctx context.Context, keys []string, maxBytes int64) ([]storage.GetResult, error) {
	const op = "get-many"
	send, bad, err := c.batchKeys(op, "get", keys)
	if err != nil {
		return nil, err
	}
	if maxBytes < 0 || maxBytes > storage.MaxBatchBytes {
		return nil, storage.Errorf(op, "", storage.ErrInvalidArgument,
			"a batch of %d bytes, outside 0 to %d", maxBytes, storage.MaxBatchBytes)
	}
	var got []storage.GetResult
	if len(send) > 0 {
		if got, err = c.getMany(ctx, send, maxBytes); err != nil {
			return nil, err
		}
	}
	return splicePrefix(c, op, keys, bad, got, func(i int, err error) storage.GetResult {
		return storage.GetResult{Key: keys[i], Err: err}
	})
}

func (c *Client) getMany(ctx context.Context, keys []string, maxBytes int64) ([]storage.GetResult, error) {
	const op = "get-many"
	sctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	dog := watchdog{cancel: cancel}
	defer dog.disarm()
	streamErr := func(err error) error {
		switch context.Cause(sctx) {
		case errCallTimeout:
			if cutShort(ctx, sctx, time.Time{}, err) {
				return c.hung(op, "", "did not answer "+op, c.callLimit(), EnvCallTimeout)
			}
		case errIdleTimeout:
			if cutShort(ctx, sctx, time.Time{}, err) {
				return c.hung(op, "", "sent nothing more of the batch for "+op, c.idleLimit(), EnvIdleTimeout)
			}
		}
		return c.convertErr(ctx, op, "", err)
	}
	dog.arm(c.callLimit(), errCallTimeout)
	stream, err := c.rpc.GetMany(sctx, &pb.GetManyRequest{Keys: keys, MaxBytes: maxBytes, Packed: true})
	if err != nil {
		return nil, streamErr(err)
	}
	out := make([]storage.GetResult, 0, len(keys))
	for {
		m, err := stream.Recv()
		dog.disarm()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, streamErr(err)
		}
		if len(m.Packed) == 0 && len(m.Bodies) > 0 {
			return nil, storage.Errorf(op, "", storage.ErrUnknown,
				"adapter %q's plugin broke the protocol: bodies without packed results", c.adapter)
		}
		if len(m.Packed) > 0 {
			// A plugin that packs answers nothing else; one that predates
			// packing answers results.
			if len(m.Results) > 0 {
				return nil, storage.Errorf(op, "", storage.ErrUnknown,
					"adapter %q's plugin broke the protocol: a batch answer both packed and not", c.adapter)
			}
			res, err := unpackGetResults(keys[len(out):], m.Packed, m.Bodies)
			if err != nil {
				return nil, &storage.Error{Op: op, Kind: storage.ErrUnknown, Err: err,
					Msg: fmt.Sprintf("adapter %q's plugin broke the protocol", c.adapter)}
			}
			out = append(out, res...)
			dog.arm(c.idleLimit(), errIdleTimeout)
			continue
		}
		if len(out)+len(m.Results) > len(keys) {
			return nil, storage.Errorf(op, "", storage.ErrUnknown,
				"adapter %q broke the storage contract: it returned more than %d results for %d keys", c.adapter, len(keys), len(keys))
		}
		for _, r := range m.Results {
			g := storage.GetResult{Key: r.Key}
			if r.Error != nil {
				g.Err = fromDetail(r.Error, 0)
			} else {
				g.Info, g.Data = infoFromPB(r.Info), r.Data
			}
			out = append(out, g)
		}
		dog.arm(c.idleLimit(), errIdleTimeout)
	}
	return out, nil
}

// splice puts the plugin's results for the keys sent back among the
// invalid keys' own results. With nothing held back the plugin's answer
// passes as is: the storage.Store checks it.
func splice[R any](c *Client, op string, keys []string, bad map[int]error, got []R, mk func(i int, err error) R) ([]R, error) {
	if len(bad) == 0 {
		return got, nil
	}
	if len(got) != len(keys)-len(bad) {
		return nil, storage.Errorf(op, "", storage.ErrUnknown,
			"adapter %q broke the storage contract: it returned %d results for %d keys", c.adapter, len(got), len(keys)-len(bad))
	}
	out := make([]R, len(keys))
	j := 0
	for i := range keys {
		if e, ok := bad[i]; ok {
			out[i] = mk(i, e)
			continue
		}
		out[i] = got[j]
		j++
	}
	return out, nil
}

// splicePrefix is splice for GetMany, whose plugin may answer a prefix of
// the keys sent: the answer ends where the plugin's does.
func splicePrefix[R any](c *Client, op string, keys []string, bad map[int]error, got []R, mk func(i int, err error) R) ([]R, error) {
	if len(bad) == 0 {
		return got, nil
	}
	if len(got) > len(keys)-len(bad) {
		return nil, storage.Errorf(op, "", storage.ErrUnknown,
			"adapter %q broke the storage contract: it returned %d results for %d keys", c.adapter, len(got), len(keys)-len(bad))
	}
	out := make([]R, 0, len(keys))
	j := 0
	for i := range keys {
		if e, ok := bad[i]; ok {
			out = append(out, mk(i, e))
			continue
		}
		if j == len(got) {
			break
		}
		out = append(out, got[j])
		j++
	}
	return out, nil
}
