package s3

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/retain-dev/retain/core/storage"
)

// token is the version token of an ETag: the ETag without its quotes.
func token(etag *string) string {
	if etag == nil {
		return ""
	}
	return strings.Trim(*etag, `"`)
}

// quoted is the If-Match value for a version token; ok is false for a token
// that cannot be an ETag (and so matches no object).
func quoted(v string) (string, bool) {
	if v == "" {
		return "", false
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; c <= 0x20 || c >= 0x7f || c == '"' {
			return "", false
		}
	}
	return `"` + v + `"`, true
}

// attempts counts the HTTP attempts of one SDK call (the retryer may send a
// request more than once) and whether a failed one may have been applied.
// It sits after the retry middleware, so it runs once per attempt.
type attempts struct {
	n atomic.Int32
	// last: the latest attempt failed in a way that may have been applied
	// (no answer, or a 500, 502 or 504, which do not say the request was
	// not executed); maybe: such an attempt was followed by another.
	last, maybe atomic.Bool
}

func (a *attempts) ID() string { return "RetainAttemptCounter" }

func (a *attempts) HandleFinalize(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
	if a.n.Add(1) > 1 && a.last.Load() {
		a.maybe.Store(true)
	}
	out, md, err := next.HandleFinalize(ctx, in)
	a.last.Store(err != nil && !refusal(err))
	return out, md, err
}

func (a *attempts) option() func(*awss3.Options) {
	return awss3.WithAPIOptions(func(s *middleware.Stack) error {
		return s.Finalize.Insert(a, "Retry", middleware.After)
	})
}

// maybeApplied says whether an earlier attempt of the call may have
// reached the endpoint and been applied: it failed without an answer that
// says it was refused unexecuted (a throttle is such an answer).
func (a *attempts) maybeApplied() bool { return a.maybe.Load() }

// Get opens the object; the reader streams exactly the version in Info.
func (d *Driver) Get(ctx context.Context, key string) (*storage.Reader, error) {
	const op = "get"
	if err := checkKey(op, key); err != nil {
		return nil, err
	}
	out, err := d.client.GetObject(ctx, &awss3.GetObjectInput{Bucket: &d.bucket, Key: aws.String(d.full(key))})
	if err != nil {
		return nil, d.mapErr(op, key, err)
	}
	if out.ContentLength == nil || out.ETag == nil {
		out.Body.Close()
		return nil, storage.Errorf(op, key, storage.ErrUnknown, "the endpoint answered GetObject without Content-Length or ETag")
	}
	info := storage.Info{Key: key, Size: *out.ContentLength, Version: token(out.ETag), ModTime: aws.ToTime(out.LastModified)}
	br := &bodyReader{rc: out.Body, d: d, key: key}
	if d.verifyMD5 && isMD5(info.Version) {
		br.sum, br.want = md5.New(), info.Version
	}
	return &storage.Reader{Info: info, ReadCloser: br}, nil
}

// isMD5 says whether an ETag can be a plain MD5: multipart ETags end in
// "-N" and are not the MD5 of the body.
func isMD5(etag string) bool {
	if len(etag) != 32 {
		return false
	}
	_, err := hex.DecodeString(etag)
	return err == nil
}

// bodyReader maps a broken body stream to a transient error and, where the
// endpoint's ETags are MD5s, refuses a body that is not the one its ETag
// names: a torn read would otherwise pair one version's bytes with another
// version's token, and a compare-and-swap built on that pair can lose an
// update.
type bodyReader struct {
	rc   io.ReadCloser
	d    *Driver
	key  string
	sum  hash.Hash // nil: no check
	want string
}

func (r *bodyReader) Read(p []byte) (int, error) {
	n, err := r.rc.Read(p)
	if r.sum != nil {
		r.sum.Write(p[:n])
	}
	if err != nil && err != io.EOF {
		err = r.d.mapErr("get", r.key, err)
	}
	if err == io.EOF && r.sum != nil {
		if got := hex.EncodeToString(r.sum.Sum(nil)); got != r.want {
			return n, storage.Errorf("get", r.key, storage.ErrTransient,
				"torn read: the endpoint sent a body whose MD5 is %s under ETag %s (bytes of one version, token of another); nothing was returned as whole: read it again", got, r.want)
		}
	}
	return n, err
}

func (r *bodyReader) Close() error { return r.rc.Close() }

// Stat returns the object's info.
func (d *Driver) Stat(ctx context.Context, key string) (storage.Info, error) {
	const op = "stat"
	if err := checkKey(op, key); err != nil {
		return storage.Info{}, err
	}
	h, err := d.head(ctx, key)
	if err != nil {
		return storage.Info{}, d.mapErr(op, key, err)
	}
	return h.info, nil
}

type headResult struct {
	info    storage.Info
	writeID string
}

// head is HeadObject of a store key.
func (d *Driver) head(ctx context.Context, key string) (headResult, error) {
	out, err := d.client.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: &d.bucket, Key: aws.String(d.full(key))})
	if err != nil {
		return headResult{}, err
	}
	h := headResult{info: storage.Info{Key: key, Size: aws.ToInt64(out.ContentLength), Version: token(out.ETag), ModTime: aws.ToTime(out.LastModified)}}
	for k, v := range out.Metadata {
		if strings.EqualFold(k, metaWriteID) {
			h.writeID = v
		}
	}
	if h.info.Version == "" {
		return h, storage.Errorf("stat", key, storage.ErrUnknown, "the endpoint answered HeadObject without an ETag")
	}
	return h, nil
}

// Put stores body under key per opts.Mode.
func (d *Driver) Put(ctx context.Context, key string, body io.Reader, opts storage.PutOptions) (storage.Info, error) {
	const op = "put"
	if err := checkKey(op, key); err != nil {
		return storage.Info{}, err
	}
	if d.readOnly {
		return storage.Info{}, storage.ReadOnlyError(op, key)
	}
	if err := ctx.Err(); err != nil {
		return storage.Info{}, ctxError(op, key, err)
	}
	// Every write carries a fresh id, overwrites too: some endpoints
	// (gofakes3) merge the old metadata into an overwrite, which would
	// otherwise leave an earlier write's id on the new object.
	writeID := randHex(16)
	in := &awss3.PutObjectInput{Bucket: &d.bucket, Key: aws.String(d.full(key)), ContentType: aws.String("application/octet-stream"),
		Metadata: map[string]string{metaWriteID: writeID}}
	switch opts.Mode {
	case storage.PutOverwrite:
		if opts.IfVersion != "" {
			return storage.Info{}, storage.Errorf(op, key, storage.ErrInvalidArgument, "IfVersion is only meaningful with replace-if-version")
		}
	case storage.PutCreateIfAbsent:
		if c := d.caps.CreateIfAbsent; c.Level == storage.LevelNone {
			return storage.Info{}, storage.Errorf(op, key, storage.ErrUnsupported, "create-if-absent is not provided on this store: %s", c.Reason)
		}
		if opts.IfVersion != "" {
			return storage.Info{}, storage.Errorf(op, key, storage.ErrInvalidArgument, "IfVersion is only meaningful with replace-if-version")
		}
		in.IfNoneMatch = aws.String("*")
	case storage.PutReplaceIfVersion:
		if c := d.caps.ReplaceIfVersion; c.Level == storage.LevelNone {
			return storage.Info{}, storage.Errorf(op, key, storage.ErrUnsupported, "replace-if-version is not provided on this store: %s", c.Reason)
		}
		if opts.IfVersion == "" {
			return storage.Info{}, storage.Errorf(op, key, storage.ErrInvalidArgument, "replace-if-version needs the expected version")
		}
		q, ok := quoted(opts.IfVersion)
		if !ok {
			// No ETag looks like this: it matches nothing, so only
			// missing (not found) and present (mismatch) remain.
			return storage.Info{}, d.mismatch(ctx, op, key, "the expected version %q is not an ETag any object can have", opts.IfVersion)
		}
		in.IfMatch = aws.String(q)
	default:
		return storage.Info{}, storage.Errorf(op, key, storage.ErrInvalidArgument, "unknown put mode %d", opts.Mode)
	}
	sp, err := spool(body, maxObjectSize)
	if errors.Is(err, errTooLarge) {
		return storage.Info{}, storage.Errorf(op, key, storage.ErrLimitExceeded, "the body exceeds %d bytes, the most one PutObject can store", int64(maxObjectSize))
	}
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return storage.Info{}, ctxError(op, key, cerr)
		}
		return storage.Info{}, &storage.Error{Op: op, Key: key, Kind: storage.KindOf(err), Msg: "reading the body", Err: err}
	}
	defer sp.Close()
	in.Body, in.ContentLength = sp.r, aws.Int64(sp.size)

	var at attempts
	out, err := d.client.PutObject(ctx, in, at.option())
	if err == nil {
		if out.ETag == nil || token(out.ETag) == "" {
			return storage.Info{}, storage.Errorf(op, key, storage.ErrUnknown, "the endpoint answered PutObject without an ETag")
		}
		mod := time.Now()
		if t, ok := awsmiddleware.GetServerTime(out.ResultMetadata); ok {
			mod = t
		}
		return storage.Info{Key: key, Size: sp.size, Version: token(out.ETag), ModTime: mod}, nil
	}
	f := failureOf(err)
	switch {
	case opts.Mode == storage.PutCreateIfAbsent && (f.preconditionFailed() || f.conflict()):
		return d.resolveCreate(ctx, key, writeID, &at, f, err)
	case opts.Mode == storage.PutReplaceIfVersion && f.notFound() && at.maybeApplied():
		// An earlier attempt may have replaced it before someone deleted it.
		return storage.Info{}, &storage.Error{Op: op, Key: key, Kind: storage.ErrUnknown, Msg: errOutcomeUnknown, Err: causeOf(err)}
	case opts.Mode == storage.PutReplaceIfVersion && f.notFound():
		return storage.Info{}, &storage.Error{Op: op, Key: key, Kind: storage.ErrNotFound, Msg: "replace-if-version of a missing key", Err: causeOf(err)}
	case opts.Mode == storage.PutReplaceIfVersion && (f.preconditionFailed() || f.conflict()):
		return d.resolveReplace(ctx, key, writeID, &at, f, err)
	}
	return storage.Info{}, d.mapErr(op, key, err)
}

// errOutcomeUnknown is the message for a conditional write refused on a
// retry after an attempt whose answer was lost, when the read-back does not
// show this write: an earlier attempt may have written, then been
// overwritten.
const errOutcomeUnknown = "outcome unknown: the SDK retried this conditional write after an attempt whose answer was lost, and the key does not hold this write now: whether an earlier attempt took effect is unknown; read the key before acting"

// resolveCreate decides a create-if-absent the endpoint refused with 412
// or 409.
func (d *Driver) resolveCreate(ctx context.Context, key, writeID string, at *attempts, f failure, cause error) (storage.Info, error) {
	const op = "put"
	if f.preconditionFailed() && !at.maybeApplied() {
		// No earlier attempt can have written (one attempt, or retries
		// only after throttling): the key existed. No read-back needed.
		return storage.Info{}, &storage.Error{Op: op, Key: key, Kind: storage.ErrAlreadyExists, Err: causeOf(cause)}
	}
	h, herr := d.head(ctx, key)
	exists := herr == nil
	if herr != nil && !failureOf(herr).notFound() {
		return storage.Info{}, &storage.Error{Op: op, Key: key, Kind: d.mapErr(op, key, herr).Kind,
			Msg: fmt.Sprintf("create-if-absent was refused (%s) and reading the key back failed", f.describe()), Err: causeOf(herr)}
	}
	switch {
	case exists && h.writeID == writeID:
		// An earlier attempt of this call created it; the retry saw it.
		return h.info, nil
	case at.maybeApplied():
		return storage.Info{}, &storage.Error{Op: op, Key: key, Kind: storage.ErrUnknown, Msg: errOutcomeUnknown, Err: causeOf(cause)}
	case exists:
		return storage.Info{}, &storage.Error{Op: op, Key: key, Kind: storage.ErrAlreadyExists, Err: causeOf(cause)}
	}
	return storage.Info{}, &storage.Error{Op: op, Key: key, Kind: storage.ErrTransient,
		Msg: "the conditional write did not happen: a concurrent conditional request on the key won (409 ConditionalRequestConflict) and the key is absent now; retry", Err: causeOf(cause)}
}

// resolveReplace decides a replace-if-version the endpoint refused with 412
// or 409. Some endpoints (gofakes3) answer 412 for If-Match on a missing
// key where AWS answers 404, so a read-back tells missing from mismatch.
func (d *Driver) resolveReplace(ctx context.Context, key, writeID string, at *attempts, f failure, cause error) (storage.Info, error) {
	const op = "put"
	h, herr := d.head(ctx, key)
	exists := herr == nil
	if herr != nil && !failureOf(herr).notFound() {
		return storage.Info{}, &storage.Error{Op: op, Key: key, Kind: d.mapErr(op, key, herr).Kind,
			Msg: fmt.Sprintf("replace-if-version was refused (%s) and reading the key back failed", f.describe()), Err: causeOf(herr)}
	}
	switch {
	case exists && h.writeID == writeID:
		return h.info, nil
	case at.maybeApplied():
		return storage.Info{}, &storage.Error{Op: op, Key: key, Kind: storage.ErrUnknown, Msg: errOutcomeUnknown, Err: causeOf(cause)}
	case !exists:
		return storage.Info{}, &storage.Error{Op: op, Key: key, Kind: storage.ErrNotFound, Msg: "replace-if-version of a missing key", Err: causeOf(cause)}
	case f.conflict():
		return storage.Info{}, &storage.Error{Op: op, Key: key, Kind: storage.ErrPreconditionFailed,
			Msg: "lost a race: a concurrent conditional request on the key won (409 ConditionalRequestConflict); nothing was written", Err: causeOf(cause)}
	}
	return storage.Info{}, &storage.Error{Op: op, Key: key, Kind: storage.ErrPreconditionFailed,
		Msg: fmt.Sprintf("the object's version is %q, not the expected one", h.info.Version), Err: causeOf(cause)}
}

// mismatch answers a conditional operation whose expected version matches
// nothing: not found if the key is missing, precondition failed if not.
func (d *Driver) mismatch(ctx context.Context, op, key, format string, args ...any) error {
	_, err := d.head(ctx, key)
	switch {
	case err == nil:
		return storage.Errorf(op, key, storage.ErrPreconditionFailed, format, args...)
	case failureOf(err).notFound():
		return storage.Errorf(op, key, storage.ErrNotFound, "the key does not exist")
	}
	return d.mapErr(op, key, err)
}

// Delete removes key, unconditionally or only at opts.IfVersion.
func (d *Driver) Delete(ctx context.Context, key string, opts storage.DeleteOptions) error {
	const op = "delete"
	if err := checkKey(op, key); err != nil {
		return err
	}
	if d.readOnly {
		return storage.ReadOnlyError(op, key)
	}
	in := &awss3.DeleteObjectInput{Bucket: &d.bucket, Key: aws.String(d.full(key))}
	if opts.IfVersion == "" {
		_, err := d.client.DeleteObject(ctx, in)
		if err != nil && !failureOf(err).notFound() {
			return d.mapErr(op, key, err)
		}
		return nil
	}
	if c := d.caps.DeleteIfVersion; c.Level == storage.LevelNone {
		return storage.Errorf(op, key, storage.ErrUnsupported, "delete-if-version is not provided on this store: %s", c.Reason)
	}
	q, ok := quoted(opts.IfVersion)
	if !ok {
		return d.mismatch(ctx, op, key, "the expected version %q is not an ETag any object can have", opts.IfVersion)
	}
	in.IfMatch = aws.String(q)
	if d.deleteHeadFirst {
		// Only to report a missing key: the version is still compared
		// by the endpoint, atomically, in the DeleteObject below.
		if _, err := d.head(ctx, key); err != nil {
			if failureOf(err).notFound() {
				return &storage.Error{Op: op, Key: key, Kind: storage.ErrNotFound, Msg: "delete-if-version of a missing key", Err: causeOf(err)}
			}
			return d.mapErr(op, key, err)
		}
	}
	var at attempts
	_, err := d.client.DeleteObject(ctx, in, at.option())
	if err == nil {
		return nil
	}
	f := failureOf(err)
	if !f.notFound() && !f.preconditionFailed() && !f.conflict() {
		return d.mapErr(op, key, err)
	}
	missing := f.notFound()
	if !missing {
		// 412 for a missing key on some endpoints, a mismatch on all:
		// read back to tell them apart.
		_, herr := d.head(ctx, key)
		switch {
		case herr != nil && failureOf(herr).notFound():
			missing = true
		case herr != nil:
			return &storage.Error{Op: op, Key: key, Kind: d.mapErr(op, key, herr).Kind,
				Msg: fmt.Sprintf("delete-if-version was refused (%s) and reading the key back failed", f.describe()), Err: causeOf(herr)}
		}
	}
	switch {
	case missing && at.maybeApplied():
		// An earlier attempt whose answer was lost most likely deleted
		// it; either way no object of that version remains.
		return nil
	case missing:
		return &storage.Error{Op: op, Key: key, Kind: storage.ErrNotFound, Msg: "delete-if-version of a missing key", Err: causeOf(err)}
	case f.conflict():
		return &storage.Error{Op: op, Key: key, Kind: storage.ErrPreconditionFailed,
			Msg: "lost a race: a concurrent conditional request on the key won (409 ConditionalRequestConflict); nothing was deleted", Err: causeOf(err)}
	}
	return &storage.Error{Op: op, Key: key, Kind: storage.ErrPreconditionFailed, Msg: "the object's version is not the expected one", Err: causeOf(err)}
}

// DeleteMany deletes up to 1,000 keys with one DeleteObjects request.
func (d *Driver) DeleteMany(ctx context.Context, keys []string) ([]storage.DeleteResult, error) {
	const op = "delete-many"
	if len(keys) > maxDeleteBatch {
		return nil, storage.Errorf(op, "", storage.ErrLimitExceeded, "%d keys: DeleteObjects takes at most %d", len(keys), maxDeleteBatch)
	}
	if d.readOnly {
		return nil, storage.ReadOnlyError(op, "")
	}
	res := make([]storage.DeleteResult, len(keys))
	at := map[string][]int{} // full key -> indexes, for duplicates
	var objs []types.ObjectIdentifier
	for i, k := range keys {
		res[i].Key = k
		if err := checkKey("delete", k); err != nil {
			res[i].Err = err
			continue
		}
		fk := d.full(k)
		if _, dup := at[fk]; !dup {
			objs = append(objs, types.ObjectIdentifier{Key: aws.String(fk)})
		}
		at[fk] = append(at[fk], i)
	}
	if len(objs) == 0 {
		return res, nil
	}
	out, err := d.client.DeleteObjects(ctx, &awss3.DeleteObjectsInput{Bucket: &d.bucket,
		Delete: &types.Delete{Objects: objs, Quiet: aws.Bool(true)}})
	if err != nil {
		return nil, d.mapErr(op, "", err)
	}
	for _, e := range out.Errors {
		f := failure{code: aws.ToString(e.Code)}
		if f.notFound() {
			continue // already absent: what delete wants
		}
		idx, ok := at[aws.ToString(e.Key)]
		if !ok {
			return nil, storage.Errorf(op, "", storage.ErrUnknown, "the endpoint reported an error for a key that was not sent")
		}
		kind, _ := f.kind()
		for _, i := range idx {
			res[i].Err = storage.Errorf("delete", keys[i], kind, "DeleteObjects: %s: %s", f.code, aws.ToString(e.Message))
		}
	}
	return res, nil
}

// List returns one page of keys in byte order.
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
	in := &awss3.ListObjectsV2Input{Bucket: &d.bucket, Prefix: aws.String(d.full(opts.Prefix)), MaxKeys: aws.Int32(int32(size))}
	level := opts.Delimiter != ""
	if level {
		if opts.Delimiter != storage.Delimiter {
			return storage.ListPage{}, storage.Errorf(op, opts.Prefix, storage.ErrInvalidArgument, "delimiter %q: only %q is supported", opts.Delimiter, storage.Delimiter)
		}
		in.Delimiter = aws.String(storage.Delimiter)
	}
	if after := opts.StartAfter; after != "" {
		if level && strings.HasSuffix(after, storage.Delimiter) {
			after = storage.AfterFolder(after) // past every key of that folder
		}
		in.StartAfter = aws.String(d.full(after))
	}
	for {
		out, err := d.client.ListObjectsV2(ctx, in)
		if err != nil {
			return storage.ListPage{}, d.mapErr(op, opts.Prefix, err)
		}
		var page storage.ListPage
		for _, cp := range out.CommonPrefixes {
			fk := aws.ToString(cp.Prefix)
			f, ok := strings.CutPrefix(fk, d.prefix)
			if !ok {
				return storage.ListPage{}, storage.Errorf(op, opts.Prefix, storage.ErrUnknown, "the endpoint listed folder %q outside the requested prefix", fk)
			}
			if reserved(strings.TrimSuffix(f, storage.Delimiter)) || f == opts.StartAfter {
				continue
			}
			page.Folders = append(page.Folders, f)
		}
		for _, o := range out.Contents {
			fk := aws.ToString(o.Key)
			k, ok := strings.CutPrefix(fk, d.prefix)
			if !ok {
				return storage.ListPage{}, storage.Errorf(op, opts.Prefix, storage.ErrUnknown, "the endpoint listed key %q outside the requested prefix", fk)
			}
			if reserved(k) {
				continue
			}
			page.Objects = append(page.Objects, storage.Info{Key: k, Size: aws.ToInt64(o.Size), Version: token(o.ETag), ModTime: aws.ToTime(o.LastModified)})
		}
		page.More = aws.ToBool(out.IsTruncated)
		if len(page.Objects)+len(page.Folders) > size {
			// An endpoint that does not count CommonPrefixes against
			// MaxKeys: keep the page to its size.
			return storage.ClampLevel(page, size), nil
		}
		if len(page.Objects)+len(page.Folders) > 0 || !page.More {
			return page, nil
		}
		// A truncated page that held only hidden probe keys: read on, so
		// no empty page claims more.
		last := ""
		if n := len(out.Contents); n > 0 {
			last = aws.ToString(out.Contents[n-1].Key)
		}
		if n := len(out.CommonPrefixes); n > 0 && aws.ToString(out.CommonPrefixes[n-1].Prefix) > last {
			last = storage.AfterFolder(aws.ToString(out.CommonPrefixes[n-1].Prefix))
		}
		switch {
		case last != "":
			in.StartAfter = aws.String(last)
			in.ContinuationToken = nil
		case out.NextContinuationToken != nil:
			in.ContinuationToken = out.NextContinuationToken
		default:
			return storage.ListPage{}, storage.Errorf(op, opts.Prefix, storage.ErrUnknown, "the endpoint answered an empty truncated listing with no continuation token")
		}
	}
}
