package azure

import (
	"context"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blockblob"

	"github.com/retain-dev/retain/core/storage"
)

// version turns an ETag into the version token: without quotes, because
// headers quote ETags and listings do not.
func version(e *azcore.ETag) string {
	if e == nil {
		return ""
	}
	return strings.Trim(string(*e), `"`)
}

// validVersion says whether v can be an ETag at all: visible ASCII without
// inner quotes. Anything else cannot match and must not reach a header.
func validVersion(v string) bool {
	v = strings.Trim(v, `"`)
	if v == "" {
		return false
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < 0x21 || c > 0x7e || c == '"' {
			return false
		}
	}
	return true
}

// etag turns a version token back into an ETag for If-Match.
func etag(v string) *azcore.ETag {
	e := azcore.ETag(`"` + strings.Trim(v, `"`) + `"`)
	return &e
}

func timeOf(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return *t
}

func sizeOf(n *int64) int64 {
	if n == nil {
		return 0
	}
	return *n
}

// Get opens the blob. Info comes from the same response as the body; a
// broken connection is resumed at the offset reached with If-Match of that
// ETag, so the bytes are all of one write or the read fails.
func (d *Driver) Get(ctx context.Context, key string) (*storage.Reader, error) {
	const op = "get"
	name, err := d.blobName(op, key)
	if err != nil {
		return nil, err
	}
	if err := d.enter(ctx, op, key); err != nil {
		return nil, err
	}
	resp, err := d.cc.NewBlobClient(name).DownloadStream(ctx, nil)
	if err != nil {
		return nil, d.mapErr(op, key, err)
	}
	info := storage.Info{Key: key, Size: sizeOf(resp.ContentLength), Version: version(resp.ETag), ModTime: timeOf(resp.LastModified)}
	if resp.ContentLength == nil || info.Version == "" {
		resp.Body.Close()
		return nil, storage.Errorf(op, key, storage.ErrUnknown, "the endpoint answered a download without Content-Length or ETag")
	}
	body := resp.NewRetryReader(ctx, &blob.RetryReaderOptions{MaxRetries: 3})
	return &storage.Reader{Info: info, ReadCloser: &reader{rc: body, d: d, key: key}}, nil
}

// reader maps body read errors to kinds.
type reader struct {
	rc  io.ReadCloser
	d   *Driver
	key string
}

func (r *reader) Read(p []byte) (int, error) {
	n, err := r.rc.Read(p)
	if err != nil && err != io.EOF {
		if hasCode(err, bloberror.ConditionNotMet) {
			// The resumed request found another write: fail, never mix.
			return n, storage.Errorf("get", r.key, storage.ErrTransient, "the blob was replaced while it was being read; read it again")
		}
		return n, r.d.mapErr("get", r.key, err)
	}
	return n, err
}

func (r *reader) Close() error { return r.rc.Close() }

// Stat returns the blob's properties.
func (d *Driver) Stat(ctx context.Context, key string) (storage.Info, error) {
	const op = "stat"
	name, err := d.blobName(op, key)
	if err != nil {
		return storage.Info{}, err
	}
	if err := d.enter(ctx, op, key); err != nil {
		return storage.Info{}, err
	}
	p, err := d.cc.NewBlobClient(name).GetProperties(ctx, nil)
	if err != nil {
		return storage.Info{}, d.mapErr(op, key, err)
	}
	return storage.Info{Key: key, Size: sizeOf(p.ContentLength), Version: version(p.ETag), ModTime: timeOf(p.LastModified)}, nil
}

// Put writes body with one Put Blob request, conditioned per opts.Mode.
func (d *Driver) Put(ctx context.Context, key string, body io.Reader, opts storage.PutOptions) (storage.Info, error) {
	const op = "put"
	name, err := d.blobName(op, key)
	if err != nil {
		return storage.Info{}, err
	}
	if d.readOnly {
		return storage.Info{}, storage.ReadOnlyError(op, key)
	}
	var cond *blob.ModifiedAccessConditions
	switch opts.Mode {
	case storage.PutOverwrite:
		if opts.IfVersion != "" {
			return storage.Info{}, storage.Errorf(op, key, storage.ErrInvalidArgument, "IfVersion is only meaningful with replace-if-version")
		}
	case storage.PutCreateIfAbsent:
		if opts.IfVersion != "" {
			return storage.Info{}, storage.Errorf(op, key, storage.ErrInvalidArgument, "IfVersion is only meaningful with replace-if-version")
		}
		cond = &blob.ModifiedAccessConditions{IfNoneMatch: to.Ptr(azcore.ETagAny)}
	case storage.PutReplaceIfVersion:
		if opts.IfVersion == "" {
			return storage.Info{}, storage.Errorf(op, key, storage.ErrInvalidArgument, "replace-if-version needs the expected version")
		}
		cond = &blob.ModifiedAccessConditions{IfMatch: etag(opts.IfVersion)}
	default:
		return storage.Info{}, storage.Errorf(op, key, storage.ErrInvalidArgument, "unknown put mode %d", opts.Mode)
	}
	if err := d.enter(ctx, op, key); err != nil {
		return storage.Info{}, err
	}
	if opts.Mode == storage.PutReplaceIfVersion && !validVersion(opts.IfVersion) {
		// No blob has this version: only whether the key exists is left.
		return storage.Info{}, d.noSuchVersion(ctx, op, key, name, "nothing was written")
	}
	rs, size, err := spool(op, key, body)
	if err != nil {
		return storage.Info{}, err
	}
	defer rs.release()

	wid := randHex()
	uo := &blockblob.UploadOptions{Metadata: map[string]*string{writeIDMeta: to.Ptr(wid)}}
	if cond != nil {
		uo.AccessConditions = &blob.AccessConditions{ModifiedAccessConditions: cond}
	}
	bc := d.cc.NewBlockBlobClient(name)
	actx, tr := withTries(ctx)
	resp, err := bc.Upload(actx, rs, uo)
	if err == nil {
		return storage.Info{Key: key, Size: size, Version: version(resp.ETag), ModTime: timeOf(resp.LastModified)}, nil
	}
	maybe := tr.maybeApplied.Load()
	status := statusOf(err)
	switch {
	case opts.Mode == storage.PutCreateIfAbsent && (hasCode(err, bloberror.BlobAlreadyExists) || status == 409 || status == 412):
		if !maybe {
			// No earlier try can have written (one try, or retries only
			// after throttling): the blob existed.
			return storage.Info{}, &storage.Error{Op: op, Key: key, Kind: storage.ErrAlreadyExists, Msg: "the blob exists", Err: cause(err)}
		}
		info, ours, perr := d.ours(ctx, key, name, wid)
		switch {
		case ours:
			return info, nil
		case perr != nil && !hasCode(perr, bloberror.BlobNotFound):
			return storage.Info{}, &storage.Error{Op: op, Key: key, Kind: storage.ErrUnknown,
				Msg: "outcome unknown: a try whose answer was lost may have created the blob, and reading it back failed", Err: cause(perr)}
		}
		// An earlier try may have created it before another writer
		// replaced or deleted it: "exists" could make the caller give up
		// a key that was its own.
		return storage.Info{}, &storage.Error{Op: op, Key: key, Kind: storage.ErrUnknown,
			Msg: "outcome unknown: a try whose answer was lost may have created the blob before another writer replaced or deleted it; re-read it", Err: cause(err)}
	case opts.Mode == storage.PutReplaceIfVersion && !isLeaseErr(err) && (status == 412 || hasCode(err, bloberror.BlobNotFound)):
		// Azurite answers 412 for If-Match on a missing blob, and a retry
		// may meet its own earlier write: one look settles both.
		p, perr := bc.GetProperties(ctx, nil)
		switch {
		case perr == nil && maybe && writeIDOf(p.Metadata) == wid:
			return storage.Info{Key: key, Size: sizeOf(p.ContentLength), Version: version(p.ETag), ModTime: timeOf(p.LastModified)}, nil
		case perr == nil && maybe:
			// An earlier try may have replaced the blob, and another
			// writer replaced it again before the retry: whether this
			// write happened cannot be known.
			return storage.Info{}, &storage.Error{Op: op, Key: key, Kind: storage.ErrUnknown,
				Msg: "outcome unknown: a try whose answer was lost may have written before another writer replaced the blob; re-read it", Err: cause(err)}
		case perr == nil:
			return storage.Info{}, &storage.Error{Op: op, Key: key, Kind: storage.ErrPreconditionFailed,
				Msg: "the blob's ETag is not the expected version; nothing was written", Err: cause(err)}
		case hasCode(perr, bloberror.BlobNotFound):
			return storage.Info{}, &storage.Error{Op: op, Key: key, Kind: storage.ErrNotFound,
				Msg: "replace-if-version of a missing blob; nothing was written", Err: cause(err)}
		default:
			return storage.Info{}, d.mapErr(op, key, perr)
		}
	}
	return storage.Info{}, d.mapErr(op, key, err)
}

// noSuchVersion answers a conditional write whose version no blob can
// have: precondition failed if the key exists, not found if it does not.
func (d *Driver) noSuchVersion(ctx context.Context, op, key, name, what string) error {
	_, err := d.cc.NewBlobClient(name).GetProperties(ctx, nil)
	switch {
	case err == nil:
		return storage.Errorf(op, key, storage.ErrPreconditionFailed, "the version is not an ETag this blob can have; %s", what)
	case hasCode(err, bloberror.BlobNotFound):
		return storage.Errorf(op, key, storage.ErrNotFound, "no such blob; %s", what)
	}
	return d.mapErr(op, key, err)
}

// ours reports whether the blob now holds the write stamped wid, and its
// info; err is the read's failure.
func (d *Driver) ours(ctx context.Context, key, name, wid string) (storage.Info, bool, error) {
	p, err := d.cc.NewBlobClient(name).GetProperties(ctx, nil)
	if err != nil || writeIDOf(p.Metadata) != wid {
		return storage.Info{}, false, err
	}
	return storage.Info{Key: key, Size: sizeOf(p.ContentLength), Version: version(p.ETag), ModTime: timeOf(p.LastModified)}, true, nil
}

// writeIDOf finds the write id; metadata names come back case-folded.
func writeIDOf(md map[string]*string) string {
	for k, v := range md {
		if strings.EqualFold(k, writeIDMeta) && v != nil {
			return *v
		}
	}
	return ""
}

// Delete removes the blob (with its snapshots). With IfVersion it is a
// Delete Blob with If-Match.
func (d *Driver) Delete(ctx context.Context, key string, opts storage.DeleteOptions) error {
	const op = "delete"
	name, err := d.blobName(op, key)
	if err != nil {
		return err
	}
	if d.readOnly {
		return storage.ReadOnlyError(op, key)
	}
	if opts.IfVersion != "" && !d.condDelete {
		return storage.Errorf(op, key, storage.ErrUnsupported, "delete-if-version is declared none: %s", d.caps.DeleteIfVersion.Reason)
	}
	if err := d.enter(ctx, op, key); err != nil {
		return err
	}
	if opts.IfVersion != "" && !validVersion(opts.IfVersion) {
		return d.noSuchVersion(ctx, op, key, name, "nothing was deleted")
	}
	bc := d.cc.NewBlobClient(name)
	do := &blob.DeleteOptions{DeleteSnapshots: to.Ptr(blob.DeleteSnapshotsOptionTypeInclude)}
	if opts.IfVersion == "" {
		_, err := bc.Delete(ctx, do)
		if err == nil || hasCode(err, bloberror.BlobNotFound) {
			return nil
		}
		return d.mapErr(op, key, err)
	}
	do.AccessConditions = &blob.AccessConditions{ModifiedAccessConditions: &blob.ModifiedAccessConditions{IfMatch: etag(opts.IfVersion)}}
	actx, tr := withTries(ctx)
	_, err = bc.Delete(actx, do)
	if err == nil {
		return nil
	}
	maybe := tr.maybeApplied.Load()
	missing := func(c error) error {
		if maybe {
			// An earlier try may have deleted it and lost the answer:
			// either way no blob of that version is left.
			return nil
		}
		return &storage.Error{Op: op, Key: key, Kind: storage.ErrNotFound, Msg: "delete-if-version of a missing blob", Err: cause(c)}
	}
	switch {
	case hasCode(err, bloberror.BlobNotFound):
		return missing(err)
	case statusOf(err) == 412 && !isLeaseErr(err):
		// Azurite answers 412 for If-Match on a missing blob.
		_, perr := bc.GetProperties(ctx, nil)
		switch {
		case perr == nil:
			return &storage.Error{Op: op, Key: key, Kind: storage.ErrPreconditionFailed,
				Msg: "the blob's ETag is not the expected version; nothing was deleted", Err: cause(err)}
		case hasCode(perr, bloberror.BlobNotFound):
			return missing(err)
		default:
			return d.mapErr(op, key, perr)
		}
	}
	return d.mapErr(op, key, err)
}

// DeleteMany deletes unconditionally, maxDeleteWorkers at a time, one
// result per key in order.
func (d *Driver) DeleteMany(ctx context.Context, keys []string) ([]storage.DeleteResult, error) {
	const op = "delete-many"
	if len(keys) > maxDeleteBatch {
		return nil, storage.Errorf(op, "", storage.ErrLimitExceeded, "%d keys in one call; the azure adapter takes at most %d", len(keys), maxDeleteBatch)
	}
	if d.readOnly {
		return nil, storage.ReadOnlyError(op, "")
	}
	if err := d.enter(ctx, op, ""); err != nil {
		return nil, err
	}
	out := make([]storage.DeleteResult, len(keys))
	sem := make(chan struct{}, maxDeleteWorkers)
	var wg sync.WaitGroup
	for i, k := range keys {
		out[i].Key = k
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			out[i].Err = d.Delete(ctx, k, storage.DeleteOptions{})
		}()
	}
	wg.Wait()
	return out, nil
}
