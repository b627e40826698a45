package gcs

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strconv"
	"strings"
	"sync"

	gcsapi "cloud.google.com/go/storage"
	"google.golang.org/api/iterator"

	"github.com/retain-dev/retain/core/storage"
)

const (
	// smallBody is how much of a body of unknown length Put reads ahead:
	// a body that ends within it is uploaded with a buffer sized to it
	// instead of the client's 16 MiB default.
	smallBody = 1 << 20
	// chunkUnit is the granularity the client rounds ChunkSize up to.
	chunkUnit = 256 << 10
	// maxChunk is the client's default ChunkSize: larger bodies go up as a
	// resumable upload in chunks of this size.
	maxChunk = 16 << 20
)

// Get opens the object. One response carries the body and, in its
// x-goog-generation header, the generation being streamed; the client pins
// that generation if it must reopen the stream, so the bytes are exactly
// the version in Info. The body is read raw (ReadCompressed), so its length
// is the stored size that Stat and List report even for objects another
// program stored with Content-Encoding: gzip.
func (d *Driver) Get(ctx context.Context, key string) (*storage.Reader, error) {
	const op = "get"
	name, err := d.objectName(op, key)
	if err != nil {
		return nil, err
	}
	r, err := d.bucket.Object(name).ReadCompressed(true).NewReader(ctx)
	if err != nil {
		return nil, d.mapErr(op, key, err)
	}
	if r.Attrs.Generation > 0 && r.Attrs.Size >= 0 {
		info := storage.Info{Key: key, Size: r.Attrs.Size, Version: genString(r.Attrs.Generation), ModTime: r.Attrs.LastModified}
		return &storage.Reader{Info: info, ReadCloser: &reader{r: r, key: key}}, nil
	}
	// An endpoint that does not send the generation header: read the
	// attributes, then exactly that generation.
	r.Close()
	attrs, err := d.bucket.Object(name).Attrs(ctx)
	if err != nil {
		return nil, d.mapErr(op, key, err)
	}
	r, err = d.bucket.Object(name).Generation(attrs.Generation).ReadCompressed(true).NewReader(ctx)
	if errors.Is(err, gcsapi.ErrObjectNotExist) {
		return nil, &storage.Error{Op: op, Key: key, Kind: storage.ErrTransient,
			Msg: "the object was replaced between reading its attributes and its body; read again", Err: causeOf(err)}
	}
	if err != nil {
		return nil, d.mapErr(op, key, err)
	}
	return &storage.Reader{Info: infoOf(key, attrs), ReadCloser: &reader{r: r, key: key}}, nil
}

// reader maps mid-stream failures to core errors.
type reader struct {
	r   *gcsapi.Reader
	key string
}

func (r *reader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if err != nil && err != io.EOF {
		if errors.Is(err, gcsapi.ErrObjectNotExist) {
			// A reopen after a broken stream found the generation gone.
			return n, &storage.Error{Op: "get", Key: r.key, Kind: storage.ErrTransient,
				Msg: "the object was replaced or deleted while being read; read again", Err: causeOf(err)}
		}
		return n, mapErr("get", r.key, err)
	}
	return n, err
}

func (r *reader) Close() error { return r.r.Close() }

// Stat returns the object's info.
func (d *Driver) Stat(ctx context.Context, key string) (storage.Info, error) {
	const op = "stat"
	name, err := d.objectName(op, key)
	if err != nil {
		return storage.Info{}, err
	}
	attrs, err := d.bucket.Object(name).Attrs(ctx)
	if err != nil {
		return storage.Info{}, d.mapErr(op, key, err)
	}
	return infoOf(key, attrs), nil
}

// Put writes body under key per opts.Mode.
func (d *Driver) Put(ctx context.Context, key string, body io.Reader, opts storage.PutOptions) (storage.Info, error) {
	const op = "put"
	name, err := d.objectName(op, key)
	if err != nil {
		return storage.Info{}, err
	}
	if d.readOnly {
		return storage.Info{}, storage.ReadOnlyError(op, key)
	}
	switch opts.Mode {
	case storage.PutOverwrite, storage.PutCreateIfAbsent:
		if opts.IfVersion != "" {
			return storage.Info{}, storage.Errorf(op, key, storage.ErrInvalidArgument, "IfVersion is only meaningful with replace-if-version")
		}
	case storage.PutReplaceIfVersion:
		if opts.IfVersion == "" {
			return storage.Info{}, storage.Errorf(op, key, storage.ErrInvalidArgument, "replace-if-version needs the expected version")
		}
	default:
		return storage.Info{}, storage.Errorf(op, key, storage.ErrInvalidArgument, "unknown put mode %d", opts.Mode)
	}
	if body == nil {
		return storage.Info{}, storage.Errorf(op, key, storage.ErrInvalidArgument, "nil body: pass an empty reader for an empty object")
	}
	if err := ctx.Err(); err != nil {
		return storage.Info{}, ctxErr(op, key, err)
	}
	var conds *gcsapi.Conditions
	switch opts.Mode {
	case storage.PutCreateIfAbsent:
		conds = &gcsapi.Conditions{DoesNotExist: true}
	case storage.PutReplaceIfVersion:
		gen, ok := parseGen(opts.IfVersion)
		if !ok {
			// No generation of any object: it cannot match.
			return storage.Info{}, d.neverMatches(ctx, op, key, name, opts.IfVersion)
		}
		conds = &gcsapi.Conditions{GenerationMatch: gen}
	}
	return d.write(ctx, op, key, name, body, conds)
}

// write uploads body to name under conds, reading a 412 back (see
// afterPrecondition). Nothing is stored unless the whole body was read.
func (d *Driver) write(ctx context.Context, op, key, name string, body io.Reader, conds *gcsapi.Conditions) (storage.Info, error) {
	body, chunk, err := prepareBody(body)
	if err != nil {
		return storage.Info{}, d.mapErr(op, key, err)
	}
	writeID := randHex()
	at := attemptRecord{resumable: chunk >= maxChunk}
	obj := d.bucket.Object(name).Retryer(at.option())
	if conds != nil {
		obj = obj.If(*conds)
	} else {
		// An overwrite has no precondition, so the client's policy would
		// not retry it; repeating one ends in the same state, as S3's and
		// Azure's SDKs assume.
		obj = obj.Retryer(gcsapi.WithPolicy(gcsapi.RetryAlways))
	}
	// Cancelling wctx before Close abandons the upload: the way to make
	// sure a body that failed halfway is never stored.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := obj.NewWriter(wctx)
	w.ChunkSize = chunk
	w.ContentType = "application/octet-stream"
	w.Metadata = map[string]string{writeIDKey: writeID}
	_, err = io.Copy(w, body)
	if err != nil && httpCode(err) == 0 {
		// The body failed (a write error is a *googleapi.Error, checked
		// below): abandon the upload.
		cancel()
		w.Close()
		return storage.Info{}, d.mapErr(op, key, err)
	}
	if err == nil {
		err = w.Close()
	} else {
		// A resumable upload can be refused while it is written.
		cancel()
		w.Close()
	}
	if err != nil {
		if httpCode(err) == 412 {
			return d.afterPrecondition(ctx, op, key, name, conds, writeID, at.maybeApplied(), err)
		}
		if httpCode(err) == 404 {
			// Uploads do not 404 for a missing object: the bucket is gone.
			return storage.Info{}, d.bucketGone(op, key, err)
		}
		return storage.Info{}, d.mapErr(op, key, err)
	}
	return infoOf(key, w.Attrs()), nil
}

// afterPrecondition decides what a 412 on a conditional upload means. The
// client retries conditional uploads, so the 412 may answer a retry of our
// own write whose first response was lost: if the live object carries our
// write id, the write landed. Otherwise, when no earlier attempt can have
// been applied (one attempt, or retries only after 429s), a create lost
// (the key exists) and a replace found another generation or no object;
// when one may have been, the outcome is unknown: our write may have
// landed and been replaced since.
func (d *Driver) afterPrecondition(ctx context.Context, op, key, name string, conds *gcsapi.Conditions, writeID string, maybeApplied bool, cause error) (storage.Info, error) {
	create := conds.DoesNotExist
	attrs, err := d.bucket.Object(name).Attrs(ctx)
	switch {
	case err == nil && attrs.Metadata[writeIDKey] == writeID:
		return infoOf(key, attrs), nil
	case (err == nil || errors.Is(err, gcsapi.ErrObjectNotExist)) && maybeApplied:
		// Reporting "exists" or "stale" could make the caller give up a
		// key it holds or apply its change twice.
		return storage.Info{}, &storage.Error{Op: op, Key: key, Kind: storage.ErrUnknown,
			Msg: "outcome unknown: the write was retried after an attempt whose answer was lost and GCS answered 412; the object does not hold this write now, so whether it landed (and was replaced or deleted since) is unknown: read the object before acting", Err: cause}
	case err == nil || errors.Is(err, gcsapi.ErrObjectNotExist):
		exists := err == nil
		if create {
			// It existed when GCS refused the upload; whether it has been
			// deleted since does not make this create a winner.
			return storage.Info{}, &storage.Error{Op: op, Key: key, Kind: storage.ErrAlreadyExists,
				Msg: "create-if-absent: the key exists; nothing was written", Err: cause}
		}
		if !exists {
			return storage.Info{}, &storage.Error{Op: op, Key: key, Kind: storage.ErrNotFound,
				Msg: "replace-if-version: the key does not exist; nothing was written", Err: cause}
		}
		return storage.Info{}, &storage.Error{Op: op, Key: key, Kind: storage.ErrPreconditionFailed,
			Msg: "replace-if-version: the object has generation " + genString(attrs.Generation) + ", not " + genString(conds.GenerationMatch) + "; nothing was written", Err: cause}
	default:
		if create && !maybeApplied {
			// A 412 no earlier attempt can explain is definite.
			return storage.Info{}, &storage.Error{Op: op, Key: key, Kind: storage.ErrAlreadyExists,
				Msg: "create-if-absent: the key exists; nothing was written", Err: cause}
		}
		e := d.mapErr(op, key, err)
		e.Msg = "GCS answered 412 and reading the object back to interpret it failed; the outcome of this write is unknown"
		if e.Kind == storage.ErrNotFound {
			e.Kind = storage.ErrUnknown
		}
		return storage.Info{}, e
	}
}

// neverMatches answers a conditional call whose version is not a
// generation: not found if the key is absent, else precondition failed.
func (d *Driver) neverMatches(ctx context.Context, op, key, name, version string) error {
	_, err := d.bucket.Object(name).Attrs(ctx)
	switch {
	case errors.Is(err, gcsapi.ErrObjectNotExist):
		return storage.Errorf(op, key, storage.ErrNotFound, "the key does not exist; nothing was changed")
	case err != nil:
		return d.mapErr(op, key, err)
	}
	return storage.Errorf(op, key, storage.ErrPreconditionFailed,
		"version %q is not a GCS generation, so it is not the object's version; nothing was changed", version)
}

// prepareBody returns the body and the ChunkSize to upload it with. A body
// of known length, or one that ends within smallBody, gets a buffer just
// larger than itself, so it goes up in one request the client can retry
// without a 16 MiB buffer per write.
func prepareBody(body io.Reader) (io.Reader, int, error) {
	if l, ok := body.(interface{ Len() int }); ok {
		return body, chunkFor(l.Len()), nil
	}
	head, err := io.ReadAll(io.LimitReader(body, smallBody+1))
	if err != nil {
		return nil, 0, err
	}
	if len(head) <= smallBody {
		return bytes.NewReader(head), chunkFor(len(head)), nil
	}
	return io.MultiReader(bytes.NewReader(head), body), maxChunk, nil
}

// chunkFor is the smallest ChunkSize that sends n bytes in one request,
// capped at the client's default (beyond it: a resumable upload).
func chunkFor(n int) int {
	if n >= maxChunk {
		return maxChunk
	}
	return (n/chunkUnit + 1) * chunkUnit
}

// Delete removes key per opts.
func (d *Driver) Delete(ctx context.Context, key string, opts storage.DeleteOptions) error {
	const op = "delete"
	name, err := d.objectName(op, key)
	if err != nil {
		return err
	}
	if d.readOnly {
		return storage.ReadOnlyError(op, key)
	}
	if err := ctx.Err(); err != nil {
		return ctxErr(op, key, err)
	}
	if opts.IfVersion == "" {
		return d.deleteAny(ctx, op, key, name)
	}
	if d.del == delNone {
		return storage.Errorf(op, key, storage.ErrUnsupported,
			"delete-if-version is not provided here: %s; nothing was deleted", d.caps.DeleteIfVersion.Reason)
	}
	gen, ok := parseGen(opts.IfVersion)
	if !ok {
		return d.neverMatches(ctx, op, key, name, opts.IfVersion)
	}
	return d.deleteIfGen(ctx, op, key, name, gen)
}

// deleteAny deletes unconditionally; a missing key is not an error. The
// call is retried on transient failures even though GCS counts it as not
// idempotent: a repeated delete of the same key ends in the same state.
func (d *Driver) deleteAny(ctx context.Context, op, key, name string) error {
	var at attemptRecord
	err := d.bucket.Object(name).Retryer(gcsapi.WithPolicy(gcsapi.RetryAlways), at.option()).Delete(ctx)
	if err == nil || errors.Is(err, gcsapi.ErrObjectNotExist) {
		return nil
	}
	return d.mapErr(op, key, err)
}

// deleteIfGen deletes the object only if gen is its live generation, with
// the strategy the probe (or the conditional-delete option) chose. A
// refusal is read back to tell a stale version from a missing key.
func (d *Driver) deleteIfGen(ctx context.Context, op, key, name string, gen int64) error {
	var at attemptRecord
	obj := d.bucket.Object(name).Retryer(at.option())
	err := deleteWith(ctx, obj, d.del, gen)
	if err == nil {
		return nil
	}
	if !errors.Is(err, gcsapi.ErrObjectNotExist) && httpCode(err) != 412 {
		return d.mapErr(op, key, err)
	}
	attrs, aerr := d.bucket.Object(name).Attrs(ctx)
	switch {
	case errors.Is(aerr, gcsapi.ErrObjectNotExist):
		if at.maybeApplied() {
			// The first attempt may have deleted it and its answer was lost:
			// generation gen is gone either way, which is what was asked.
			return nil
		}
		return &storage.Error{Op: op, Key: key, Kind: storage.ErrNotFound, Msg: "the key does not exist; nothing was deleted", Err: causeOf(err)}
	case aerr != nil:
		e := d.mapErr(op, key, aerr)
		e.Msg = "the conditional delete was refused and reading the object back to interpret it failed"
		if e.Kind == storage.ErrNotFound {
			e.Kind = storage.ErrUnknown
		}
		return e
	case attrs.Generation == gen:
		return &storage.Error{Op: op, Key: key, Kind: storage.ErrUnknown,
			Msg: "GCS refused to delete generation " + genString(gen) + " although it is the live one; nothing was deleted", Err: causeOf(err)}
	}
	return &storage.Error{Op: op, Key: key, Kind: storage.ErrPreconditionFailed,
		Msg: "the object has generation " + genString(attrs.Generation) + ", not " + genString(gen) + "; nothing was deleted", Err: causeOf(err)}
}

// deleteWith issues one conditional delete of generation gen.
func deleteWith(ctx context.Context, obj *gcsapi.ObjectHandle, s deleteStrategy, gen int64) error {
	switch s {
	case delByGeneration:
		return obj.Generation(gen).Delete(ctx)
	case delByMatch:
		return obj.If(gcsapi.Conditions{GenerationMatch: gen}).Delete(ctx)
	}
	return storage.Errorf("delete", "", storage.ErrUnsupported, "no conditional delete strategy")
}

// DeleteMany deletes keys unconditionally, deleteConcurrency at a time,
// with one result per key in the order given.
func (d *Driver) DeleteMany(ctx context.Context, keys []string) ([]storage.DeleteResult, error) {
	const op = "delete-many"
	if len(keys) > maxDeleteBatch {
		return nil, storage.Errorf(op, "", storage.ErrLimitExceeded, "%d keys exceeds the batch limit of %d", len(keys), maxDeleteBatch)
	}
	if d.readOnly {
		return nil, storage.ReadOnlyError(op, "")
	}
	if err := ctx.Err(); err != nil {
		return nil, ctxErr(op, "", err)
	}
	res := make([]storage.DeleteResult, len(keys))
	sem := make(chan struct{}, deleteConcurrency)
	var wg sync.WaitGroup
	for i, k := range keys {
		res[i].Key = k
		name, err := d.objectName("delete", k)
		if err != nil {
			res[i].Err = err
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			res[i].Err = d.deleteAny(ctx, "delete", k, name)
		}()
	}
	wg.Wait()
	return res, nil
}

// List returns one page of keys in byte order (GCS lists in UTF-8 byte
// order of names). StartAfter is exclusive where GCS's startOffset is
// inclusive, so an exact match is skipped.
func (d *Driver) List(ctx context.Context, opts storage.ListOptions) (storage.ListPage, error) {
	const op = "list"
	if err := storage.ValidatePrefix(op, opts.Prefix); err != nil {
		return storage.ListPage{}, err
	}
	if opts.PageSize < 0 {
		return storage.ListPage{}, storage.Errorf(op, opts.Prefix, storage.ErrInvalidArgument, "negative page size %d", opts.PageSize)
	}
	size := opts.PageSize
	if size == 0 || size > maxListPage {
		size = maxListPage
	}
	q := &gcsapi.Query{Prefix: d.prefix + opts.Prefix, Projection: gcsapi.ProjectionNoACL}
	level := opts.Delimiter != ""
	if level {
		if opts.Delimiter != storage.Delimiter {
			return storage.ListPage{}, storage.Errorf(op, opts.Prefix, storage.ErrInvalidArgument, "delimiter %q: only %q is supported", opts.Delimiter, storage.Delimiter)
		}
		q.Delimiter = storage.Delimiter
	}
	var after string
	if opts.StartAfter != "" {
		after = d.prefix + opts.StartAfter
		if level && strings.HasSuffix(after, storage.Delimiter) {
			after = storage.AfterFolder(after) // past every object of that folder
		}
		q.StartOffset = after // inclusive: the entry equal to it is skipped below
	}
	if err := q.SetAttrSelection([]string{"Name", "Size", "Generation", "Updated"}); err != nil {
		return storage.ListPage{}, d.mapErr(op, opts.Prefix, err)
	}
	pager := iterator.NewPager(d.bucket.Objects(ctx, q), size, "")
	var out []storage.Info
	var folders []string
	for {
		var batch []*gcsapi.ObjectAttrs
		token, err := pager.NextPage(&batch)
		if err != nil {
			return storage.ListPage{}, d.mapErrBucket(op, opts.Prefix, err)
		}
		for _, a := range batch {
			if a.Name == "" && a.Prefix != "" { // a folder of the level
				f, ok := strings.CutPrefix(a.Prefix, d.prefix)
				if ok && f != opts.StartAfter && !strings.HasPrefix(f, probeDir+"/") {
					folders = append(folders, f)
				}
				continue
			}
			if a.Name == after || !strings.HasPrefix(a.Name, d.prefix) {
				continue
			}
			k := strings.TrimPrefix(a.Name, d.prefix)
			if strings.HasPrefix(k, probeDir+"/") {
				continue
			}
			out = append(out, infoOf(k, a))
		}
		// A page left empty by the skipping must not claim more: go on.
		if len(out)+len(folders) > 0 || token == "" {
			return storage.ClampLevel(storage.ListPage{Objects: out, Folders: folders, More: token != ""}, size), nil
		}
	}
}

func infoOf(key string, a *gcsapi.ObjectAttrs) storage.Info {
	return storage.Info{Key: key, Size: a.Size, Version: genString(a.Generation), ModTime: a.Updated}
}

func genString(g int64) string { return strconv.FormatInt(g, 10) }

// parseGen reads a version token; only a positive decimal is a generation.
func parseGen(v string) (int64, bool) {
	g, err := strconv.ParseInt(v, 10, 64)
	if err != nil || g <= 0 || genString(g) != v {
		return 0, false
	}
	return g, true
}
