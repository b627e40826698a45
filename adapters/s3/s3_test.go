package s3

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/johannesboyne/gofakes3"

	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/storagetest"
	"github.com/retain-dev/retain/internal/emulator"
)

// Error mapping against real emulator answers: every case the contract
// names, on both emulators (each with its own dialect: versitygw answers
// 404 for If-Match on a missing key and 204 for a conditional delete of
// one; gofakes3 answers 412 and ignores If-Match on DELETE).
func TestErrorMapping(t *testing.T) {
	for _, start := range []func(testing.TB) *emulator.S3{emulator.Versitygw, emulator.GoFakeS3} {
		e := start(t)
		t.Run(strings.Fields(e.Name)[0], func(t *testing.T) {
			useEmulator(t, e, "errs")
			d := openT(t, "s3://errs/p")

			_, err := d.Get(bg, "missing")
			storagetest.WantKind(t, "get missing", err, storage.ErrNotFound)
			_, err = d.Stat(bg, "missing")
			storagetest.WantKind(t, "stat missing", err, storage.ErrNotFound)
			if err := d.Delete(bg, "missing", storage.DeleteOptions{}); err != nil {
				t.Fatalf("unconditional delete of a missing key: %v", err)
			}

			v1, err := putS(d, "k", "one", storage.PutCreateIfAbsent, "")
			if err != nil {
				t.Fatal(err)
			}
			_, err = putS(d, "k", "two", storage.PutCreateIfAbsent, "")
			storagetest.WantKind(t, "create on an existing key", err, storage.ErrAlreadyExists)
			wantBody(t, d, "k", "one")

			v2, err := putS(d, "k", "two", storage.PutReplaceIfVersion, v1.Version)
			if err != nil || v2.Version == v1.Version {
				t.Fatalf("replace with the current version: %+v, %v", v2, err)
			}
			_, err = putS(d, "k", "stale", storage.PutReplaceIfVersion, v1.Version)
			storagetest.WantKind(t, "replace with a stale version", err, storage.ErrPreconditionFailed)
			wantBody(t, d, "k", "two")
			_, err = putS(d, "gone", "x", storage.PutReplaceIfVersion, v1.Version)
			storagetest.WantKind(t, "replace of a missing key", err, storage.ErrNotFound)
			wantAbsent(t, d, "gone")
			// A token that cannot be an ETag matches nothing.
			_, err = putS(d, "k", "x", storage.PutReplaceIfVersion, `bad"token`)
			storagetest.WantKind(t, "replace with a malformed version", err, storage.ErrPreconditionFailed)
			_, err = putS(d, "gone", "x", storage.PutReplaceIfVersion, `bad"token`)
			storagetest.WantKind(t, "replace of a missing key with a malformed version", err, storage.ErrNotFound)

			if d.caps.DeleteIfVersion.Level == storage.LevelNone {
				err = d.Delete(bg, "k", storage.DeleteOptions{IfVersion: v1.Version})
				storagetest.WantKind(t, "delete-if-version declared none", err, storage.ErrUnsupported)
				wantBody(t, d, "k", "two")
			} else {
				err = d.Delete(bg, "k", storage.DeleteOptions{IfVersion: v1.Version})
				storagetest.WantKind(t, "delete with a stale version", err, storage.ErrPreconditionFailed)
				wantBody(t, d, "k", "two")
				if err := d.Delete(bg, "k", storage.DeleteOptions{IfVersion: v2.Version}); err != nil {
					t.Fatalf("delete with the current version: %v", err)
				}
				wantAbsent(t, d, "k")
				err = d.Delete(bg, "k", storage.DeleteOptions{IfVersion: v2.Version})
				storagetest.WantKind(t, "delete-if-version of a missing key", err, storage.ErrNotFound)
			}

			for _, k := range []string{"", "/abs", "a//b", "a/../b", "nul\x00", ".retain-probe", ".retain-probe/x"} {
				_, err := putS(d, k, "x", storage.PutOverwrite, "")
				storagetest.WantKind(t, fmt.Sprintf("put %q", k), err, storage.ErrInvalidArgument)
				_, err = d.Get(bg, k)
				storagetest.WantKind(t, fmt.Sprintf("get %q", k), err, storage.ErrInvalidArgument)
				err = d.Delete(bg, k, storage.DeleteOptions{})
				storagetest.WantKind(t, fmt.Sprintf("delete %q", k), err, storage.ErrInvalidArgument)
			}
			_, err = d.List(bg, storage.ListOptions{Prefix: "a//"})
			storagetest.WantKind(t, "list of an invalid prefix", err, storage.ErrInvalidArgument)
			_, err = d.AcquireGate(bg, "metadata")
			storagetest.WantKind(t, "acquire a gate", err, storage.ErrUnsupported)
		})
	}
}

// gofakes3 answers 412 (not 404) to If-Match on a missing key; the adapter
// reads the key back and reports not found.
func TestPreconditionFailedOnMissingKey(t *testing.T) {
	e := emulator.GoFakeS3(t)
	raw := useEmulator(t, e, "b412")
	_, err := raw.PutObject(bg, &awss3.PutObjectInput{Bucket: aws.String("b412"), Key: aws.String("p/missing"),
		Body: strings.NewReader("x"), IfMatch: aws.String(`"5d41402abc4b2a76b9719d911017c592"`)})
	if f := failureOf(err); f.status != http.StatusPreconditionFailed || f.code != codePreconditionFailed {
		t.Fatalf("gofakes3 answered If-Match on a missing key with %v, the test expects 412 PreconditionFailed", err)
	}
	d := openT(t, "s3://b412/p")
	_, err = putS(d, "missing", "x", storage.PutReplaceIfVersion, "5d41402abc4b2a76b9719d911017c592")
	storagetest.WantKind(t, "replace of a missing key answered 412", err, storage.ErrNotFound)
	wantAbsent(t, d, "missing")
}

// versitygw answers 204 to a conditional delete of a missing key: the
// probe notices, and delete-if-version reads the key first.
func TestConditionalDeleteOfMissingKeyVersitygw(t *testing.T) {
	e := emulator.Versitygw(t)
	raw := useEmulator(t, e, "b204")
	if _, err := raw.DeleteObject(bg, &awss3.DeleteObjectInput{Bucket: aws.String("b204"), Key: aws.String("p/missing"),
		IfMatch: aws.String(`"5d41402abc4b2a76b9719d911017c592"`)}); err != nil {
		t.Fatalf("versitygw answered a conditional delete of a missing key with %v; the test expects 204", err)
	}
	d := openT(t, "s3://b204/p")
	if !d.deleteHeadFirst {
		t.Fatal("the probe did not notice that versitygw answers success to a conditional delete of a missing key")
	}
	err := d.Delete(bg, "missing", storage.DeleteOptions{IfVersion: "5d41402abc4b2a76b9719d911017c592"})
	storagetest.WantKind(t, "delete-if-version of a missing key", err, storage.ErrNotFound)
}

// conflictBackend answers 409 ConditionalRequestConflict, as AWS does to a
// conditional write racing another, for conditional writes under
// "conflict/", without writing.
type conflictBackend struct{ gofakes3.Backend }

func (b conflictBackend) PutObject(bucket, key string, meta map[string]string, input io.Reader, size int64, cond *gofakes3.PutConditions) (gofakes3.PutObjectResult, error) {
	if cond != nil && strings.HasPrefix(key, "p/conflict/") {
		io.Copy(io.Discard, input)
		return gofakes3.PutObjectResult{}, gofakes3.ErrConditionalRequestConflict
	}
	return b.Backend.PutObject(bucket, key, meta, input, size, cond)
}

// A 409 means the write did not happen and the race was lost: never a
// second winner. create-if-absent is already-exists only if the key exists
// now, otherwise transient; replace-if-version is precondition failed.
func TestConditionalRequestConflict(t *testing.T) {
	e, _ := wrappedGoFakeS3(t, func(b gofakes3.Backend) gofakes3.Backend { return conflictBackend{b} }, nil)
	raw := useEmulator(t, e, "b409")
	_, err := raw.PutObject(bg, &awss3.PutObjectInput{Bucket: aws.String("b409"), Key: aws.String("p/conflict/probe"),
		Body: strings.NewReader("x"), IfNoneMatch: aws.String("*")})
	if f := failureOf(err); f.status != http.StatusConflict || !f.conflict() {
		t.Fatalf("the wrapped gofakes3 answered %v, the test expects 409 ConditionalRequestConflict", err)
	}
	d := openT(t, "s3://b409/p")

	_, err = putS(d, "conflict/absent", "x", storage.PutCreateIfAbsent, "")
	storagetest.WantKind(t, "create answered 409 on an absent key", err, storage.ErrTransient)
	if !strings.Contains(err.Error(), "did not happen") {
		t.Errorf("the 409 message does not say the write did not happen: %v", err)
	}
	wantAbsent(t, d, "conflict/absent")

	v := storagetest.MustPut(t, d, "conflict/present", "theirs")
	_, err = putS(d, "conflict/present", "mine", storage.PutCreateIfAbsent, "")
	storagetest.WantKind(t, "create answered 409 on an existing key", err, storage.ErrAlreadyExists)
	_, err = putS(d, "conflict/present", "mine", storage.PutReplaceIfVersion, v.Version)
	storagetest.WantKind(t, "replace answered 409", err, storage.ErrPreconditionFailed)
	wantBody(t, d, "conflict/present", "theirs")
	_, err = putS(d, "conflict/absent", "mine", storage.PutReplaceIfVersion, v.Version)
	storagetest.WantKind(t, "replace answered 409 on a missing key", err, storage.ErrNotFound)
}

// loseFirstResponse performs the first conditional PUT under "p/lost/" and
// then drops the connection without answering, as a network failure after
// the write would; then (if meddle is set) lets someone else write the key.
// The SDK retries, and the retry sees 412.
func loseFirstResponse(dropped *atomic.Int32, meddle func(key string)) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			conditional := r.Header.Get("If-None-Match") != "" || r.Header.Get("If-Match") != ""
			if r.Method == http.MethodPut && conditional && strings.Contains(r.URL.Path, "/p/lost/") && dropped.Add(1) == 1 {
				rec := &discardWriter{h: http.Header{}}
				next.ServeHTTP(rec, r)
				if meddle != nil {
					meddle(r.URL.Path)
				}
				conn, _, err := w.(http.Hijacker).Hijack()
				if err == nil {
					conn.Close()
				}
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

type discardWriter struct {
	h    http.Header
	code int
}

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *discardWriter) WriteHeader(code int)        { w.code = code }

// A conditional write whose first answer was lost is retried by the SDK;
// the retry sees 412 although the write was ours. The write id in the
// object's metadata tells: the Put succeeds.
func TestRetriedConditionalWriteWasOurs(t *testing.T) {
	var dropped atomic.Int32
	e, _ := wrappedGoFakeS3(t, nil, loseFirstResponse(&dropped, nil))
	useEmulator(t, e, "blost")
	d := openT(t, "s3://blost/p")

	info, err := putS(d, "lost/create", "mine", storage.PutCreateIfAbsent, "")
	if err != nil {
		t.Fatalf("create whose first answer was lost: %v", err)
	}
	if dropped.Load() < 2 {
		t.Fatalf("the first answer was not dropped and retried (%d conditional PUTs seen)", dropped.Load())
	}
	if got := wantBody(t, d, "lost/create", "mine"); got.Version != info.Version {
		t.Fatalf("version %q after the create, %q read back", info.Version, got.Version)
	}

	dropped.Store(0)
	info2, err := putS(d, "lost/create", "mine again", storage.PutReplaceIfVersion, info.Version)
	if err != nil {
		t.Fatalf("replace whose first answer was lost: %v", err)
	}
	if dropped.Load() < 2 {
		t.Fatal("the replace's first answer was not dropped")
	}
	if got := wantBody(t, d, "lost/create", "mine again"); got.Version != info2.Version {
		t.Fatalf("version %q after the replace, %q read back", info2.Version, got.Version)
	}
}

// If someone else wrote the key between the lost answer and the retry,
// the adapter cannot know whether its write happened: unknown (the
// contract's kind for an outcome nobody can tell), never a false "already
// exists" or a false success.
func TestRetriedConditionalWriteOutcomeUnknown(t *testing.T) {
	var dropped atomic.Int32
	var be gofakes3.Backend
	meddle := func(path string) {
		key := strings.TrimPrefix(path, "/bunk/")
		// Another writer of this adapter, with its own write id (deleted
		// first: s3mem merges old metadata into an overwrite).
		be.DeleteObject("bunk", key)
		be.PutObject("bunk", key, map[string]string{"X-Amz-Meta-Retain-Write-Id": "someone-else"}, strings.NewReader("theirs"), 6, nil)
	}
	e, b := wrappedGoFakeS3(t, nil, loseFirstResponse(&dropped, meddle))
	be = b
	useEmulator(t, e, "bunk")
	d := openT(t, "s3://bunk/p")

	_, err := putS(d, "lost/k", "mine", storage.PutCreateIfAbsent, "")
	storagetest.WantKind(t, "create retried after a lost answer, key overwritten since", err, storage.ErrUnknown)
	if !strings.Contains(err.Error(), "unknown") {
		t.Errorf("message does not say the outcome is unknown: %v", err)
	}
	wantBody(t, d, "lost/k", "theirs")
}

// stripConditions makes gofakes3 ignore conditional PUTs as an old
// S3-compatible endpoint would: the headers never reach it.
func stripConditions(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Del("If-None-Match")
		r.Header.Del("If-Match")
		next.ServeHTTP(w, r)
	})
}

// An endpoint that ignores conditional writes: the probe finds it and
// declares create-if-absent and replace-if-version none; such a Put is
// refused and writes nothing, never degrading to an overwrite.
func TestProbeFindsIgnoredConditionalWrites(t *testing.T) {
	e, _ := wrappedGoFakeS3(t, nil, stripConditions)
	raw := useEmulator(t, e, "bign")
	d := openT(t, "s3://bign/p")
	c := d.caps
	if c.CreateIfAbsent.Level != storage.LevelNone || !strings.Contains(c.CreateIfAbsent.Reason, "ignores If-None-Match") {
		t.Errorf("create-if-absent declared %s (%s), want none because If-None-Match is ignored", c.CreateIfAbsent, c.CreateIfAbsent.Reason)
	}
	if c.ReplaceIfVersion.Level != storage.LevelNone || !strings.Contains(c.ReplaceIfVersion.Reason, "ignores If-Match") {
		t.Errorf("replace-if-version declared %s (%s), want none because If-Match is ignored", c.ReplaceIfVersion, c.ReplaceIfVersion.Reason)
	}
	if c.DeleteIfVersion.Level != storage.LevelNone {
		t.Errorf("delete-if-version declared %s", c.DeleteIfVersion)
	}
	_, err := putS(d, "k", "x", storage.PutCreateIfAbsent, "")
	storagetest.WantKind(t, "create declared none", err, storage.ErrUnsupported)
	wantAbsent(t, d, "k")
	v := storagetest.MustPut(t, d, "k", "orig")
	_, err = putS(d, "k", "new", storage.PutReplaceIfVersion, v.Version)
	storagetest.WantKind(t, "replace declared none", err, storage.ErrUnsupported)
	wantBody(t, d, "k", "orig")
	wantNoProbeLeft(t, raw, "bign")
}

func wantNoProbeLeft(t *testing.T, raw *awss3.Client, bucket string) {
	t.Helper()
	out, err := raw.ListObjectsV2(bg, &awss3.ListObjectsV2Input{Bucket: aws.String(bucket)})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range out.Contents {
		if strings.Contains(aws.ToString(o.Key), probeDir) {
			t.Errorf("probe object %s left behind", aws.ToString(o.Key))
		}
	}
}

// Modes: on declares without probing, off declares none; auto probes and
// cleans up after itself.
func TestModes(t *testing.T) {
	e := emulator.Versitygw(t)
	raw := useEmulator(t, e, "modes")
	auto := openT(t, "s3://modes/p")
	wantNoProbeLeft(t, raw, "modes")
	if c := auto.caps; c.CreateIfAbsent.Level != storage.LevelNative || c.ReplaceIfVersion.Level != storage.LevelNative || c.DeleteIfVersion.Level != storage.LevelNative {
		t.Fatalf("versitygw auto declared %s %s %s", c.CreateIfAbsent, c.ReplaceIfVersion, c.DeleteIfVersion)
	}
	if !strings.Contains(strings.Join(auto.caps.Notes, "\n"), "If-Match (wrong) on DeleteObject: refused (412 PreconditionFailed), object kept") {
		t.Errorf("the notes do not report the probe: %q", auto.caps.Notes)
	}

	off := openT(t, "s3://modes/p?conditional-write=off&conditional-delete=off")
	for _, c := range []storage.Capability{off.caps.CreateIfAbsent, off.caps.ReplaceIfVersion, off.caps.DeleteIfVersion} {
		if c.Level != storage.LevelNone || !strings.Contains(c.Reason, "=off") {
			t.Errorf("off declared %s (%s)", c, c.Reason)
		}
	}
	_, err := putS(off, "k", "x", storage.PutCreateIfAbsent, "")
	storagetest.WantKind(t, "create with conditional-write=off", err, storage.ErrUnsupported)
	wantAbsent(t, off, "k")
	v := storagetest.MustPut(t, off, "k", "orig")
	storagetest.WantKind(t, "delete-if-version with conditional-delete=off", off.Delete(bg, "k", storage.DeleteOptions{IfVersion: v.Version}), storage.ErrUnsupported)
	wantBody(t, off, "k", "orig")

	// on: no probe request at all, so even a missing bucket opens.
	on := openT(t, "s3://no-such-bucket/p?conditional-write=on&conditional-delete=on")
	if c := on.caps; c.CreateIfAbsent.Level != storage.LevelNative || c.DeleteIfVersion.Level != storage.LevelNative || !on.deleteHeadFirst {
		t.Fatalf("on declared %s %s (head first %v)", c.CreateIfAbsent, c.DeleteIfVersion, on.deleteHeadFirst)
	}
}

// A bucket that does not exist is not found, and the message names it.
func TestNoSuchBucket(t *testing.T) {
	e := emulator.Versitygw(t)
	useEmulator(t, e, "exists")
	loc, _ := storage.ParseLocation("s3://no-such-bucket/p")
	_, err := Open(bg, loc)
	storagetest.WantKind(t, "open (probe) of a missing bucket", err, storage.ErrNotFound)
	if !strings.Contains(err.Error(), `bucket "no-such-bucket" does not exist`) {
		t.Errorf("message does not name the bucket: %v", err)
	}
	d := openT(t, "s3://no-such-bucket/p?conditional-write=on&conditional-delete=on")
	for what, err := range map[string]error{
		"put":  func() error { _, err := putS(d, "k", "x", storage.PutOverwrite, ""); return err }(),
		"list": func() error { _, err := d.List(bg, storage.ListOptions{}); return err }(),
		"get":  func() error { _, err := d.Get(bg, "k"); return err }(),
	} {
		storagetest.WantKind(t, what+" in a missing bucket", err, storage.ErrNotFound)
		if !strings.Contains(err.Error(), `bucket "no-such-bucket" does not exist`) {
			t.Errorf("%s: message does not name the bucket: %v", what, err)
		}
	}
	// HEAD answers carry no error code: still not found.
	_, err = d.Stat(bg, "k")
	storagetest.WantKind(t, "stat in a missing bucket", err, storage.ErrNotFound)
	res, err := d.DeleteMany(bg, []string{"a", "b"})
	storagetest.WantKind(t, "delete-many in a missing bucket", err, storage.ErrNotFound)
	if res != nil {
		t.Errorf("delete-many returned results with a whole-call error: %+v", res)
	}
}

// Bad credentials are permission denied, and no error carries a secret.
// With auto, the refused probe leaves the conditional capabilities none
// (with the reason) rather than failing Open: a read-only use still works
// where reads are allowed.
func TestBadCredentials(t *testing.T) {
	e := emulator.Versitygw(t)
	useEmulator(t, e, "creds")
	good := openT(t, "s3://creds/p")
	storagetest.MustPut(t, good, "k", "x")

	for name, env := range map[string]map[string]string{
		"wrong secret":     {"AWS_SECRET_ACCESS_KEY": "not-the-secret-key-at-all"},
		"unknown key id":   {"AWS_ACCESS_KEY_ID": "AKIDNOSUCHKEY", "AWS_SECRET_ACCESS_KEY": "not-the-secret-key-at-all"},
		"no credentials":   {"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": ""},
		"near-miss secret": {"AWS_SECRET_ACCESS_KEY": e.SecretKey + "x"},
	} {
		t.Run(name, func(t *testing.T) {
			for k, v := range env {
				t.Setenv(k, v)
			}
			d := openT(t, "s3://creds/p")
			if c := d.caps.CreateIfAbsent; c.Level != storage.LevelNone || !strings.Contains(c.Reason, "permission denied") {
				t.Errorf("create-if-absent after a refused probe: %s (%s)", c, c.Reason)
			}
			if c := d.caps.DeleteIfVersion; c.Level != storage.LevelNone || !strings.Contains(c.Reason, "conditional-delete=on") {
				t.Errorf("delete-if-version after a refused probe: %s (%s)", c, c.Reason)
			}
			var errs []error
			_, err := d.Get(bg, "k")
			errs = append(errs, err)
			_, err = d.Stat(bg, "k")
			errs = append(errs, err)
			_, err = putS(d, "k", "y", storage.PutOverwrite, "")
			errs = append(errs, err)
			_, err = d.List(bg, storage.ListOptions{})
			errs = append(errs, err)
			errs = append(errs, d.Delete(bg, "k", storage.DeleteOptions{}))
			for i, err := range errs {
				if i == 1 && name == "unknown key id" {
					// versitygw answers an unknown key id with 404
					// XAdminUserNotFound; a HEAD answer has no body to
					// carry the code, so Stat cannot tell it from a
					// missing key (documented in docs/backend-s3.md).
					storagetest.WantKind(t, "stat with an unknown key id on versitygw", err, storage.ErrNotFound)
					continue
				}
				storagetest.WantKind(t, fmt.Sprintf("call %d with %s", i, name), err, storage.ErrPermissionDenied)
				for _, secret := range []string{e.SecretKey, "not-the-secret-key-at-all", e.AccessKey} {
					if strings.Contains(err.Error(), secret) {
						t.Errorf("error carries a credential: %v", err)
					}
				}
			}
			for _, n := range d.caps.Notes {
				if strings.Contains(n, e.SecretKey) {
					t.Errorf("a note carries the secret: %s", n)
				}
			}
		})
	}
	wantBody(t, good, "k", "x")
}

// Options: unknown ones are refused by name; an endpoint with user info is
// refused without echoing it.
func TestOptions(t *testing.T) {
	emulator.IsolateAWS(t, nil)
	t.Setenv("AWS_REGION", "us-east-1")
	for uri, want := range map[string]string{
		"s3://b/p?colour=blue&zone=2":                     "unknown option(s) colour, zone",
		"s3://b/p?path-style=maybe":                       "path-style",
		"s3://b/p?conditional-delete=sometimes":           "conditional-delete",
		"s3://b/p?conditional-write=yes":                  "conditional-write",
		"s3://b/p?endpoint=ftp://host":                    "http:// or https://",
		"s3://b/p?endpoint=http://user:hunter2@host:9000": "user info",
	} {
		loc, err := storage.ParseLocation(uri)
		if err != nil {
			t.Fatal(err)
		}
		_, err = Open(bg, loc)
		storagetest.WantKind(t, uri, err, storage.ErrInvalidArgument)
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v does not say %q", uri, err, want)
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s: the error echoes the secret: %v", uri, err)
		}
	}
	t.Setenv("AWS_ENDPOINT_URL", "http://user:hunter2@host:9000")
	_, err := Open(bg, storage.Location{Scheme: "s3", Bucket: "b"})
	storagetest.WantKind(t, "AWS_ENDPOINT_URL with user info", err, storage.ErrInvalidArgument)
	if strings.Contains(err.Error(), "hunter2") {
		t.Errorf("the error echoes the secret: %v", err)
	}
	t.Setenv("AWS_ENDPOINT_URL", "")
	t.Setenv("AWS_REGION", "")
	_, err = Open(bg, storage.Location{Scheme: "s3", Bucket: "b", Options: map[string]string{"conditional-write": "on", "conditional-delete": "on"}})
	storagetest.WantKind(t, "no region and no endpoint", err, storage.ErrInvalidArgument)
	_, err = Open(bg, storage.Location{Scheme: "gs", Bucket: "b"})
	storagetest.WantKind(t, "a gs:// location", err, storage.ErrInvalidArgument)
}

// List: prefix stripped, byte order, paging with start-after, and the
// reserved probe directory hidden even when a page holds nothing else.
func TestList(t *testing.T) {
	e := emulator.Versitygw(t)
	raw := useEmulator(t, e, "lists")
	d := openT(t, "s3://lists/p")
	for _, k := range []string{".retain-probe/left-1", ".retain-probe/left-2"} {
		if _, err := raw.PutObject(bg, &awss3.PutObjectInput{Bucket: aws.String("lists"), Key: aws.String("p/" + k), Body: strings.NewReader("x")}); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range []string{"z", "a/b", "a.b", "a0"} {
		storagetest.MustPut(t, d, k, k)
	}
	// Outside the store's prefix: never listed.
	if _, err := raw.PutObject(bg, &awss3.PutObjectInput{Bucket: aws.String("lists"), Key: aws.String("pz"), Body: strings.NewReader("x")}); err != nil {
		t.Fatal(err)
	}
	var got []string
	opts := storage.ListOptions{PageSize: 1}
	for range 10 {
		page, err := d.List(bg, opts)
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Objects) == 0 && page.More {
			t.Fatal("an empty page claims more")
		}
		for _, o := range page.Objects {
			if o.Size != int64(len(o.Key)) || o.Version == "" {
				t.Fatalf("info %+v", o)
			}
			got = append(got, o.Key)
		}
		if !page.More {
			break
		}
		opts.StartAfter = got[len(got)-1]
	}
	if s := strings.Join(got, ","); s != "a.b,a/b,a0,z" {
		t.Fatalf("listed %s", s)
	}
	page, err := d.List(bg, storage.ListOptions{Prefix: "a", StartAfter: "a.b"})
	if err != nil || len(page.Objects) != 2 || page.Objects[0].Key != "a/b" || page.More {
		t.Fatalf("list a after a.b: %+v, %v", page, err)
	}
}

// DeleteMany: one result per key in order, missing keys and duplicates are
// fine, invalid keys get their own result and are never sent.
func TestDeleteMany(t *testing.T) {
	e := emulator.Versitygw(t)
	useEmulator(t, e, "delmany")
	d := openT(t, "s3://delmany/p")
	storagetest.MustPut(t, d, "a", "a")
	storagetest.MustPut(t, d, "b", "b")
	keys := []string{"a", "missing", "a/../x", "b", "a"}
	res, err := d.DeleteMany(bg, keys)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Key != keys[i] {
			t.Fatalf("result %d names %q", i, r.Key)
		}
		if i == 2 {
			storagetest.WantKind(t, "invalid key", r.Err, storage.ErrInvalidArgument)
		} else if r.Err != nil {
			t.Fatalf("%q: %v", r.Key, r.Err)
		}
	}
	wantAbsent(t, d, "a")
	wantAbsent(t, d, "b")
	_, err = d.DeleteMany(bg, make([]string, maxDeleteBatch+1))
	storagetest.WantKind(t, "delete-many over the batch limit", err, storage.ErrLimitExceeded)
}

// A body of unknown length over the in-memory spool size goes through a
// temp file; the limit is checked before anything is sent.
func TestSpool(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789abcdef"), (memSpool+3<<10)/16)
	sp, err := spool(io.MultiReader(bytes.NewReader(big)), int64(len(big)))
	if err != nil {
		t.Fatal(err)
	}
	if sp.file == nil || sp.size != int64(len(big)) {
		t.Fatalf("spooled %d bytes, file %v", sp.size, sp.file != nil)
	}
	name := sp.file.Name()
	sp.Close()
	if _, err := os.Stat(name); err == nil {
		t.Errorf("temp file %s left behind", name)
	}
	for _, r := range []io.Reader{io.MultiReader(bytes.NewReader(big)), io.MultiReader(bytes.NewReader(big[:100]))} {
		if _, err := spool(r, 99); !errors.Is(err, errTooLarge) {
			t.Errorf("over the limit: %v", err)
		}
	}

	e := emulator.Versitygw(t)
	useEmulator(t, e, "spool")
	d := openT(t, "s3://spool/p")
	info, err := d.Put(bg, "big", io.MultiReader(bytes.NewReader(big)), storage.PutOptions{Mode: storage.PutCreateIfAbsent})
	if err != nil || info.Size != int64(len(big)) {
		t.Fatalf("put of %d bytes from a plain reader: %+v, %v", len(big), info, err)
	}
	got, ginfo, err := readS(d, "big")
	if err != nil || got != string(big) || ginfo.Version != info.Version {
		t.Fatalf("read back %d bytes (version %q, put %q): %v", len(got), ginfo.Version, info.Version, err)
	}
}

// The service-specific AWS_ENDPOINT_URL_S3 is honoured like AWS_ENDPOINT_URL
// (and so turns path-style on).
func TestServiceSpecificEndpoint(t *testing.T) {
	e := emulator.GoFakeS3(t)
	useEmulator(t, e, "svc")
	t.Setenv("AWS_ENDPOINT_URL", "")
	t.Setenv("AWS_ENDPOINT_URL_S3", e.Endpoint)
	d := openT(t, "s3://svc/p")
	if d.endpoint != e.Endpoint || !strings.Contains(d.caps.Notes[0], "path-style") {
		t.Fatalf("endpoint %q, notes %q", d.endpoint, d.caps.Notes[0])
	}
	storagetest.MustPut(t, d, "k", "x")
}

// Credentials that may write but not delete conditionally (AWS needs
// s3:GetObject as well for that): the probe's refusal leaves only
// delete-if-version none; what the write steps proved stays native.
func TestProbeDeleteDenied(t *testing.T) {
	deny := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodDelete && r.Header.Get("If-Match") != "" {
				w.Header().Set("Content-Type", "application/xml")
				w.WriteHeader(http.StatusForbidden)
				io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>`)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
	e, _ := wrappedGoFakeS3(t, nil, deny)
	raw := useEmulator(t, e, "bdeny")
	d := openT(t, "s3://bdeny/p")
	c := d.caps
	if c.CreateIfAbsent.Level != storage.LevelNative || c.ReplaceIfVersion.Level != storage.LevelNative {
		t.Errorf("writes declared %s %s after the delete probe was denied", c.CreateIfAbsent, c.ReplaceIfVersion)
	}
	if c.DeleteIfVersion.Level != storage.LevelNone || !strings.Contains(c.DeleteIfVersion.Reason, "permission denied") {
		t.Errorf("delete-if-version declared %s (%s)", c.DeleteIfVersion, c.DeleteIfVersion.Reason)
	}
	wantNoProbeLeft(t, raw, "bdeny")
}
