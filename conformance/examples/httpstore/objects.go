package httpstore

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/retain-dev/retain/conformance/examples/httpstore/server"
	"github.com/retain-dev/retain/core/storage"
)

// infoOf reads an object's info from the headers of a GET or HEAD.
func (d *Driver) infoOf(op, key string, resp *http.Response) (storage.Info, error) {
	etag := resp.Header.Get("ETag")
	if etag == "" || resp.ContentLength < 0 {
		return storage.Info{}, storage.Errorf(op, key, storage.ErrUnknown, "the server sent no ETag or Content-Length: is %s an httpstore server?", d.base)
	}
	mod, _ := time.Parse(time.RFC3339Nano, resp.Header.Get(server.ModifiedHeader))
	return storage.Info{Key: key, Size: resp.ContentLength, Version: strings.Trim(etag, `"`), ModTime: mod}, nil
}

// Get streams the object. Headers and body come from one response, which
// the server builds from one snapshot, so Info is the version of exactly
// the bytes read.
func (d *Driver) Get(ctx context.Context, key string) (*storage.Reader, error) {
	if err := storage.ValidateKey("get", key); err != nil {
		return nil, err
	}
	req, err := d.newRequest(ctx, http.MethodGet, d.objectURL(key), nil)
	if err != nil {
		return nil, d.mapErr("get", key, err)
	}
	resp, err := d.client.Do(req)
	if err != nil {
		return nil, d.mapErr("get", key, err)
	}
	if err := d.statusErr("get", key, resp, storage.PutOverwrite); err != nil {
		resp.Body.Close()
		return nil, err
	}
	info, err := d.infoOf("get", key, resp)
	if err != nil {
		resp.Body.Close()
		return nil, err
	}
	return &storage.Reader{Info: info, ReadCloser: &getBody{d: d, key: key, rc: resp.Body}}, nil
}

// getBody maps body errors to kinds. Go's client already fails a body
// shorter than its Content-Length with io.ErrUnexpectedEOF, so a cut body
// is never presented as whole: it ends in a transient error.
type getBody struct {
	d   *Driver
	key string
	rc  io.ReadCloser
}

func (b *getBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if err != nil && err != io.EOF {
		err = b.d.mapErr("get", b.key, err)
	}
	return n, err
}

func (b *getBody) Close() error { return b.rc.Close() }

// Stat is a HEAD of the object.
func (d *Driver) Stat(ctx context.Context, key string) (storage.Info, error) {
	if err := storage.ValidateKey("stat", key); err != nil {
		return storage.Info{}, err
	}
	req, err := d.newRequest(ctx, http.MethodHead, d.objectURL(key), nil)
	if err != nil {
		return storage.Info{}, d.mapErr("stat", key, err)
	}
	resp, err := d.client.Do(req)
	if err != nil {
		return storage.Info{}, d.mapErr("stat", key, err)
	}
	resp.Body.Close()
	if err := d.statusErr("stat", key, resp, storage.PutOverwrite); err != nil {
		return storage.Info{}, err
	}
	return d.infoOf("stat", key, resp)
}

// errTooLarge ends a Put body that passes the declared object size limit.
var errTooLarge = errors.New("body exceeds the object size limit")

// countingBody counts what is sent and stops past the size limit, so an
// oversized Put fails as limit exceeded before the server sees it whole.
type countingBody struct {
	r       io.Reader
	n, max  int64
	tooBig  bool
	readErr error // the caller's body failed: the write did not happen
}

func (c *countingBody) Read(p []byte) (int, error) {
	if left := c.max - c.n + 1; int64(len(p)) > left {
		p = p[:left]
	}
	n, err := c.r.Read(p)
	c.n += int64(n)
	if c.n > c.max {
		c.tooBig = true
		return 0, errTooLarge
	}
	if err != nil && err != io.EOF {
		c.readErr = err
	}
	return n, err
}

// ifMatchable says whether v can be sent in an If-Match header. A version
// that cannot is none the server ever issued.
func ifMatchable(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c <= 0x20 || c == '"' || c >= 0x7f {
			return false
		}
	}
	return v != ""
}

// noSuchVersion answers a conditional write on a version the server cannot
// have issued: not found when the key is missing, else precondition failed.
func (d *Driver) noSuchVersion(ctx context.Context, op, key string) error {
	if _, err := d.Stat(ctx, key); err != nil {
		if storage.KindOf(err) == storage.ErrNotFound {
			return storage.Errorf(op, key, storage.ErrNotFound, "no such object")
		}
		return err
	}
	return storage.Errorf(op, key, storage.ErrPreconditionFailed, "the object does not have that version")
}

// Put sends one PUT; the condition travels as a header and the server
// decides it atomically with the write. A failed connection is reported
// transient and not retried here: the outcome of a conditional write that
// got no answer is unknown, and only the caller can resolve it.
func (d *Driver) Put(ctx context.Context, key string, body io.Reader, opts storage.PutOptions) (storage.Info, error) {
	if err := storage.ValidateKey("put", key); err != nil {
		return storage.Info{}, err
	}
	if d.readOnly {
		return storage.Info{}, storage.ReadOnlyError("put", key)
	}
	header := http.Header{}
	switch opts.Mode {
	case storage.PutOverwrite, storage.PutCreateIfAbsent:
		if opts.IfVersion != "" {
			return storage.Info{}, storage.Errorf("put", key, storage.ErrInvalidArgument, "IfVersion is only meaningful with replace-if-version")
		}
		if opts.Mode == storage.PutCreateIfAbsent {
			header.Set("If-None-Match", "*")
		}
	case storage.PutReplaceIfVersion:
		if opts.IfVersion == "" {
			return storage.Info{}, storage.Errorf("put", key, storage.ErrInvalidArgument, "replace-if-version needs the expected version")
		}
		if !ifMatchable(opts.IfVersion) {
			return storage.Info{}, d.noSuchVersion(ctx, "put", key)
		}
		header.Set("If-Match", `"`+opts.IfVersion+`"`)
	default:
		return storage.Info{}, storage.Errorf("put", key, storage.ErrInvalidArgument, "unknown put mode %d", opts.Mode)
	}
	max := d.limits.MaxObjectSize
	if max <= 0 {
		max = server.DefaultMaxObjectSize
	}
	cb := &countingBody{r: body, max: max}
	req, err := d.newRequest(ctx, http.MethodPut, d.objectURL(key), cb)
	if err != nil {
		return storage.Info{}, d.mapErr("put", key, err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := d.client.Do(req)
	switch {
	case cb.tooBig:
		if resp != nil {
			resp.Body.Close()
		}
		return storage.Info{}, storage.Errorf("put", key, storage.ErrLimitExceeded, "more than %d bytes: the server's object size limit", max)
	case cb.readErr != nil:
		if resp != nil {
			resp.Body.Close()
		}
		return storage.Info{}, storage.Wrap("put", key, storage.ErrUnknown, cb.readErr)
	case err != nil:
		return storage.Info{}, d.mapErr("put", key, err)
	}
	defer resp.Body.Close()
	if err := d.statusErr("put", key, resp, opts.Mode); err != nil {
		return storage.Info{}, err
	}
	var oi server.ObjectInfo
	if err := json.NewDecoder(resp.Body).Decode(&oi); err != nil {
		return storage.Info{}, d.mapErr("put", key, err)
	}
	if oi.Key != d.prefix+key || oi.Size != cb.n || oi.ETag == "" {
		return storage.Info{}, storage.Errorf("put", key, storage.ErrUnknown, "the server reports %q, %d bytes, version %q for %d bytes sent", oi.Key, oi.Size, oi.ETag, cb.n)
	}
	return storage.Info{Key: key, Size: oi.Size, Version: oi.ETag, ModTime: oi.Modified}, nil
}

// Delete sends one DELETE, with If-Match for delete-if-version.
func (d *Driver) Delete(ctx context.Context, key string, opts storage.DeleteOptions) error {
	if err := storage.ValidateKey("delete", key); err != nil {
		return err
	}
	if d.readOnly {
		return storage.ReadOnlyError("delete", key)
	}
	if opts.IfVersion != "" && !ifMatchable(opts.IfVersion) {
		return d.noSuchVersion(ctx, "delete", key)
	}
	req, err := d.newRequest(ctx, http.MethodDelete, d.objectURL(key), nil)
	if err != nil {
		return d.mapErr("delete", key, err)
	}
	if opts.IfVersion != "" {
		req.Header.Set("If-Match", `"`+opts.IfVersion+`"`)
	}
	resp, err := d.client.Do(req)
	if err != nil {
		return d.mapErr("delete", key, err)
	}
	resp.Body.Close()
	// An unconditional delete of a missing key is not an error; a missing
	// bucket still is.
	if opts.IfVersion == "" && resp.StatusCode == http.StatusNotFound && resp.Header.Get(server.ErrorCodeHeader) != server.CodeNoSuchBucket {
		return nil
	}
	return d.statusErr("delete", key, resp, storage.PutOverwrite)
}

// DeleteMany validates every key, sends the valid ones in one batch
// request and returns one result per key in the order given.
func (d *Driver) DeleteMany(ctx context.Context, keys []string) ([]storage.DeleteResult, error) {
	if d.readOnly {
		return nil, storage.ReadOnlyError("delete-many", "")
	}
	if max := d.limits.MaxDeleteBatch; max > 0 && len(keys) > max {
		return nil, storage.Errorf("delete-many", "", storage.ErrLimitExceeded, "%d keys, the batch limit is %d: split the call", len(keys), max)
	}
	out := make([]storage.DeleteResult, len(keys))
	var send []int
	var req server.DeleteRequest
	for i, k := range keys {
		out[i].Key = k
		if err := storage.ValidateKey("delete", k); err != nil {
			out[i].Err = err
			continue
		}
		send = append(send, i)
		req.Keys = append(req.Keys, d.prefix+k)
	}
	if len(send) == 0 {
		return out, nil
	}
	b, _ := json.Marshal(req)
	hreq, err := d.newRequest(ctx, http.MethodPost, d.bucketURL()+"?delete", strings.NewReader(string(b)))
	if err != nil {
		return nil, d.mapErr("delete-many", "", err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	resp, err := d.client.Do(hreq)
	if err != nil {
		return nil, d.mapErr("delete-many", "", err)
	}
	defer resp.Body.Close()
	if err := d.statusErr("delete-many", "", resp, storage.PutOverwrite); err != nil {
		return nil, err
	}
	var res server.DeleteResponse
	if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
		return nil, d.mapErr("delete-many", "", err)
	}
	if len(res.Results) != len(send) {
		return nil, storage.Errorf("delete-many", "", storage.ErrUnknown, "the server answered %d results for %d keys", len(res.Results), len(send))
	}
	for j, i := range send {
		r := res.Results[j]
		if r.Key != req.Keys[j] {
			return nil, storage.Errorf("delete-many", keys[i], storage.ErrUnknown, "result %d names %q", j, r.Key)
		}
		if r.Code != "" && r.Code != server.CodeNoSuchKey {
			out[i].Err = &storage.Error{Op: "delete", Key: keys[i], Kind: kindOfCode(r.Code), Err: &StatusError{Code: r.Code}}
		}
	}
	return out, nil
}
