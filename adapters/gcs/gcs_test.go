package gcs

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gcsapi "cloud.google.com/go/storage"
	"github.com/fsouza/fake-gcs-server/fakestorage"
	"google.golang.org/api/googleapi"

	"github.com/retain-dev/retain/conformance"
	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/storagetest"
	"github.com/retain-dev/retain/internal/emulator"
)

func TestMain(m *testing.M) {
	// The test binary serves this adapter as a plugin of itself and runs
	// the conformance worker processes.
	conformance.Dispatch([]storage.Adapter{Adapter})
	os.Exit(m.Run())
}

// --- helpers ------------------------------------------------------------

var bg = context.Background()

// startEmu starts fake-gcs-server in this process, points the client (and
// any plugin or worker process started later) at it, and creates buckets.
func startEmu(t testing.TB, buckets ...string) *emulator.GCS {
	t.Helper()
	emu := emulator.FakeGCS(t)
	for k, v := range emu.Env() {
		t.Setenv(k, v)
	}
	for _, b := range buckets {
		emu.Server.CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: b})
	}
	return emu
}

func openURI(t *testing.T, uri string) *Driver {
	t.Helper()
	d, err := openURIErr(uri)
	if err != nil {
		t.Fatalf("open %s: %v", uri, err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func openURIErr(uri string) (*Driver, error) {
	loc, err := storage.ParseLocation(uri)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(bg, 30*time.Second)
	defer cancel()
	return Open(ctx, loc)
}

func put(d *Driver, key, body string, mode storage.PutMode, ifv string) (storage.Info, error) {
	return d.Put(bg, key, strings.NewReader(body), storage.PutOptions{Mode: mode, IfVersion: ifv})
}

func read(t *testing.T, d *Driver, key string) (string, storage.Info) {
	t.Helper()
	r, err := d.Get(bg, key)
	if err != nil {
		t.Fatalf("get %q: %v", key, err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("read %q: %v", key, err)
	}
	return string(b), r.Info
}

// objectsIn lists every object of the bucket on the emulator, every
// generation included.
func objectsIn(t *testing.T, emu *emulator.GCS, bucket, prefix string) []string {
	t.Helper()
	objs, _, err := emu.Server.ListObjectsWithOptions(bucket, fakestorage.ListOptions{Prefix: prefix, Versions: true})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, o := range objs {
		names = append(names, fmt.Sprintf("%s#%d", o.Name, o.Generation))
	}
	return names
}

// --- options ------------------------------------------------------------

func TestOptionsAndLocation(t *testing.T) {
	for _, tc := range []struct {
		uri, want string
	}{
		{"gs://bucket/p?colour=blue&flavour=x", "unknown option(s) colour, flavour"},
		{"gs://bucket/p?conditional-delete=maybe", "conditional-delete=\"maybe\""},
		{"gs://bucket/p?endpoint=ftp://host", "http(s) URL"},
		{"gs://bucket/p?endpoint=https://user:s3cret@host/", "must not carry user information"},
		{"gs://Bucket/p", "not a GCS bucket name"},
		{"gs://b/p", "not a GCS bucket name"},
		{"s3://bucket/p", "serves gs://"},
	} {
		loc, err := storage.ParseLocation(tc.uri)
		if err != nil {
			t.Fatalf("%s: %v", tc.uri, err)
		}
		_, err = Open(bg, loc)
		storagetest.WantKind(t, tc.uri, err, storage.ErrInvalidArgument)
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %q does not say %q", tc.uri, err, tc.want)
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%s: the error carries the endpoint's password: %q", tc.uri, err)
		}
	}
	for in, want := range map[string]string{
		"http://127.0.0.1:4443":            "http://127.0.0.1:4443/storage/v1/",
		"https://example.com/":             "https://example.com/storage/v1/",
		"https://example.com/storage/v1":   "https://example.com/storage/v1/",
		"https://example.com/custom/path/": "https://example.com/custom/path/",
	} {
		if got, err := normalizeEndpoint(in); err != nil || got != want {
			t.Errorf("normalizeEndpoint(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

// --- error mapping against the emulator's answers ------------------------

func TestErrorMappingEmulator(t *testing.T) {
	startEmu(t, "retain-test")
	d := openURI(t, "gs://retain-test/errs")
	ctx := bg

	_, err := d.Get(ctx, "missing")
	storagetest.WantKind(t, "get of a missing key", err, storage.ErrNotFound)
	_, err = d.Stat(ctx, "missing")
	storagetest.WantKind(t, "stat of a missing key", err, storage.ErrNotFound)
	if err := d.Delete(ctx, "missing", storage.DeleteOptions{}); err != nil {
		t.Fatalf("unconditional delete of a missing key: %v", err)
	}

	v1, err := put(d, "k", "one", storage.PutCreateIfAbsent, "")
	if err != nil {
		t.Fatal(err)
	}
	_, err = put(d, "k", "two", storage.PutCreateIfAbsent, "")
	storagetest.WantKind(t, "create on an existing key", err, storage.ErrAlreadyExists)
	if body, _ := read(t, d, "k"); body != "one" {
		t.Fatalf("a lost create changed the body to %q", body)
	}
	v2, err := put(d, "k", "two", storage.PutReplaceIfVersion, v1.Version)
	if err != nil {
		t.Fatal(err)
	}
	_, err = put(d, "k", "stale", storage.PutReplaceIfVersion, v1.Version)
	storagetest.WantKind(t, "replace with a stale generation", err, storage.ErrPreconditionFailed)
	_, err = put(d, "nope", "x", storage.PutReplaceIfVersion, v1.Version)
	storagetest.WantKind(t, "replace of a missing key", err, storage.ErrNotFound)
	_, err = put(d, "k", "x", storage.PutReplaceIfVersion, "not-a-generation")
	storagetest.WantKind(t, "replace with a token that is no generation", err, storage.ErrPreconditionFailed)
	_, err = put(d, "nope", "x", storage.PutReplaceIfVersion, "not-a-generation")
	storagetest.WantKind(t, "replace of a missing key with a token that is no generation", err, storage.ErrNotFound)

	err = d.Delete(ctx, "k", storage.DeleteOptions{IfVersion: v1.Version})
	storagetest.WantKind(t, "delete with a stale generation", err, storage.ErrPreconditionFailed)
	if body, _ := read(t, d, "k"); body != "two" {
		t.Fatalf("a refused delete changed the body to %q", body)
	}
	err = d.Delete(ctx, "nope", storage.DeleteOptions{IfVersion: v1.Version})
	storagetest.WantKind(t, "delete-if-version of a missing key", err, storage.ErrNotFound)
	if err := d.Delete(ctx, "k", storage.DeleteOptions{IfVersion: v2.Version}); err != nil {
		t.Fatalf("delete with the live generation: %v", err)
	}
	_, err = d.Stat(ctx, "k")
	storagetest.WantKind(t, "stat after delete", err, storage.ErrNotFound)

	for _, k := range []string{".retain-probe/x", ".retain-probe", "a//b", strings.Repeat("k", 1020)} {
		_, err := put(d, k, "x", storage.PutOverwrite, "")
		storagetest.WantKind(t, "put of key "+k[:min(len(k), 20)], err, storage.ErrInvalidArgument)
	}
	_, err = d.AcquireGate(ctx, "metadata")
	storagetest.WantKind(t, "acquire of an undeclared gate", err, storage.ErrUnsupported)

	_, err = openURIErr("gs://no-such-bucket/p")
	ce := storagetest.WantKind(t, "open of a missing bucket", err, storage.ErrNotFound)
	t.Log(ce)
	if !strings.Contains(ce.Error(), `"no-such-bucket"`) {
		t.Fatalf("the error does not name the bucket: %v", ce)
	}
}

// An emulator that is not listening: the client retries until the context
// ends, and the error is transient.
func TestUnreachableIsTransient(t *testing.T) {
	t.Setenv(emulatorEnv, fmt.Sprintf("127.0.0.1:%d", emulator.FreePort(t)))
	loc, _ := storage.ParseLocation("gs://retain-test/p?conditional-delete=off")
	ctx, cancel := context.WithTimeout(bg, 2*time.Second)
	defer cancel()
	_, err := Open(ctx, loc)
	t.Log(storagetest.WantKind(t, "open against a closed port", err, storage.ErrTransient))
}

// --- credentials ----------------------------------------------------------

// serviceAccountKey writes a service-account key file whose token_uri is
// tokenURL, with a fresh RSA key.
func serviceAccountKey(t *testing.T, tokenURL string) (path, privateKey string) {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	pk := string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: must(x509.MarshalPKCS8PrivateKey(k))}))
	b, _ := json.Marshal(map[string]string{
		"type": "service_account", "project_id": "retain-test", "private_key_id": "0123456789abcdef",
		"private_key": pk, "client_email": "retain-test@retain-test.iam.gserviceaccount.com",
		"client_id": "1", "token_uri": tokenURL,
	})
	path = filepath.Join(t.TempDir(), "key.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path, pk
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestBadCredentials(t *testing.T) {
	emu := startEmu(t, "retain-test")
	// No emulator variable: the adapter must authenticate, and the
	// endpoint option sends the storage calls to the emulator.
	t.Setenv(emulatorEnv, "")
	t.Setenv("GOOGLE_CLOUD_PROJECT", "retain-test")
	uri := "gs://retain-test/p?conditional-delete=off&endpoint=http://" + emu.Host

	t.Run("unusable key file", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "key.json")
		os.WriteFile(path, []byte(`{"type":"service_account","private_key":"-----BEGIN PRIVATE KEY-----\nc2VjcmV0\n-----END PRIVATE KEY-----\n"}`), 0o600)
		t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", path)
		_, err := openURIErr(uri)
		ce := storagetest.WantKind(t, "open with an unusable key file", err, storage.ErrPermissionDenied)
		t.Log(ce)
		if strings.Contains(ce.Error(), "c2VjcmV0") {
			t.Fatalf("the error carries the key: %v", ce)
		}
	})

	t.Run("refused by the token endpoint", func(t *testing.T) {
		// A stand-in for oauth2.googleapis.com/token refusing a revoked
		// key, with Google's answer; fake-gcs-server itself does not
		// authenticate.
		var calls atomic.Int32
		tok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			calls.Add(1)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			io.WriteString(w, `{"error":"invalid_grant","error_description":"Invalid JWT Signature."}`)
		}))
		defer tok.Close()
		path, pk := serviceAccountKey(t, tok.URL)
		t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", path)
		_, err := openURIErr(uri)
		ce := storagetest.WantKind(t, "open with credentials the token endpoint refuses", err, storage.ErrPermissionDenied)
		t.Log(ce)
		if calls.Load() == 0 {
			t.Fatal("the token endpoint was never asked")
		}
		if strings.Contains(ce.Error(), pk[40:80]) {
			t.Fatalf("the error carries the private key: %v", ce)
		}
	})
}

// --- injected answers and lost responses ----------------------------------

// faultProxy stands between the client and the emulator. hook, when set,
// sees every request first and may answer it itself (after forwarding it,
// to simulate a response lost on the way back).
type faultProxy struct {
	*httptest.Server
	mu   sync.Mutex
	hook func(w http.ResponseWriter, r *http.Request, forward func() *http.Response) bool
}

func newFaultProxy(t *testing.T, emu *emulator.GCS) *faultProxy {
	t.Helper()
	target, _ := url.Parse("http://" + emu.Host)
	rp := httputil.NewSingleHostReverseProxy(target)
	// fake-gcs-server routes XML reads by the Host header: keep its own.
	direct := rp.Director
	rp.Director = func(r *http.Request) { direct(r); r.Host = target.Host }
	p := &faultProxy{}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		h := p.hook
		p.mu.Unlock()
		if h != nil {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			forward := func() *http.Response {
				req := r.Clone(context.Background())
				req.RequestURI = ""
				req.URL.Scheme, req.URL.Host, req.Host = target.Scheme, target.Host, target.Host
				req.Body = io.NopCloser(bytes.NewReader(body))
				resp, err := http.DefaultTransport.RoundTrip(req)
				if err != nil {
					t.Errorf("forwarding: %v", err)
					return nil
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				return resp
			}
			if h(w, r, forward) {
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(p.Close)
	return p
}

func (p *faultProxy) set(h func(w http.ResponseWriter, r *http.Request, forward func() *http.Response) bool) {
	p.mu.Lock()
	p.hook = h
	p.mu.Unlock()
}

func isUpload(r *http.Request) bool {
	return r.Method == http.MethodPost && strings.Contains(r.URL.Path, "/upload/storage/v1/")
}

// gcsError answers like GCS's JSON API does.
func gcsError(w http.ResponseWriter, code int, reason string) {
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(code)
	fmt.Fprintf(w, `{"error":{"code":%d,"message":"%s","errors":[{"message":"%s","domain":"global","reason":"%s"}]}}`,
		code, reason, reason, reason)
}

// A conditional write whose response is lost is retried by the client and
// comes back 412; the adapter reads its write id back and reports success.
func TestLostResponseReadBack(t *testing.T) {
	emu := startEmu(t, "retain-test")
	p := newFaultProxy(t, emu)
	t.Setenv(emulatorEnv, strings.TrimPrefix(p.URL, "http://"))
	d := openURI(t, "gs://retain-test/lost")

	// loseFirst forwards the first matching request, then tells the client
	// the server failed: the write landed, the answer did not.
	loseFirst := func(match func(*http.Request) bool, meanwhile func()) *atomic.Int32 {
		var n atomic.Int32
		p.set(func(w http.ResponseWriter, r *http.Request, forward func() *http.Response) bool {
			if !match(r) || n.Add(1) != 1 {
				return false
			}
			if resp := forward(); resp == nil || resp.StatusCode != 200 && resp.StatusCode != 204 {
				t.Errorf("the first attempt itself failed: %v", resp)
			}
			if meanwhile != nil {
				meanwhile()
			}
			gcsError(w, http.StatusServiceUnavailable, "backendError")
			return true
		})
		return &n
	}

	t.Run("create", func(t *testing.T) {
		n := loseFirst(isUpload, nil)
		info, err := put(d, "c", "mine", storage.PutCreateIfAbsent, "")
		if err != nil {
			t.Fatalf("create whose first answer was lost: %v", err)
		}
		if n.Load() < 2 {
			t.Fatalf("the client did not retry (%d upload requests)", n.Load())
		}
		body, got := read(t, d, "c")
		if body != "mine" || got.Version != info.Version {
			t.Fatalf("read %q version %s, put reported version %s", body, got.Version, info.Version)
		}
	})

	t.Run("replace", func(t *testing.T) {
		p.set(nil)
		v := storagetest.MustPut(t, d, "r", "one")
		n := loseFirst(isUpload, nil)
		info, err := put(d, "r", "two", storage.PutReplaceIfVersion, v.Version)
		if err != nil || n.Load() < 2 {
			t.Fatalf("replace whose first answer was lost: %v (%d upload requests)", err, n.Load())
		}
		if body, got := read(t, d, "r"); body != "two" || got.Version != info.Version {
			t.Fatalf("read %q version %s, put reported %s", body, got.Version, info.Version)
		}
	})

	t.Run("replace overtaken", func(t *testing.T) {
		// Our write lands, another writer replaces it, then the retry gets
		// 412: whether our write happened cannot be told from the object.
		p.set(nil)
		v := storagetest.MustPut(t, d, "o", "one")
		loseFirst(isUpload, func() {
			other := openURIWith(t, "gs://retain-test/lost", emu)
			storagetest.MustPut(t, other, "o", "someone else")
		})
		_, err := put(d, "o", "two", storage.PutReplaceIfVersion, v.Version)
		storagetest.WantKind(t, "replace retried after being overtaken", err, storage.ErrUnknown)
	})

	t.Run("delete-if-version", func(t *testing.T) {
		p.set(nil)
		v := storagetest.MustPut(t, d, "dv", "one")
		n := loseFirst(func(r *http.Request) bool { return r.Method == http.MethodDelete }, nil)
		if err := d.Delete(bg, "dv", storage.DeleteOptions{IfVersion: v.Version}); err != nil || n.Load() < 2 {
			t.Fatalf("delete whose first answer was lost: %v (%d delete requests)", err, n.Load())
		}
		_, err := d.Stat(bg, "dv")
		storagetest.WantKind(t, "stat after delete", err, storage.ErrNotFound)
	})

	t.Run("injected statuses", func(t *testing.T) {
		// GCS answers the emulator never gives, in GCS's JSON form.
		for code, kind := range map[int]storage.Kind{
			403: storage.ErrPermissionDenied, 401: storage.ErrPermissionDenied,
			413: storage.ErrLimitExceeded, 400: storage.ErrInvalidArgument,
		} {
			p.set(func(w http.ResponseWriter, r *http.Request, _ func() *http.Response) bool {
				gcsError(w, code, "injected")
				return true
			})
			_, err := put(d, "s", "x", storage.PutOverwrite, "")
			storagetest.WantKind(t, fmt.Sprintf("put answered %d", code), err, kind)
			_, err = d.Stat(bg, "s")
			storagetest.WantKind(t, fmt.Sprintf("stat answered %d", code), err, kind)
		}
		p.set(nil)
	})
}

// openURIWith opens a second driver straight on the emulator (not through
// the proxy), for a competing writer.
func openURIWith(t *testing.T, uri string, emu *emulator.GCS) *Driver {
	t.Helper()
	sep := "?"
	if strings.Contains(uri, "?") {
		sep = "&"
	}
	return openURI(t, uri+sep+"conditional-delete=off&endpoint=http://"+emu.Host)
}

// --- probe ------------------------------------------------------------------

// notFoundErr is the error the client returns for a 404 on an object.
func notFoundErr() error {
	return fmt.Errorf("%w: %w", gcsapi.ErrObjectNotExist, &googleapi.Error{Code: 404})
}

func TestDecideDelete(t *testing.T) {
	e404 := notFoundErr()
	e412 := &googleapi.Error{Code: 412}
	good := &delObservation{strategy: delByGeneration, name: "b/p/.retain-probe/x", staleErr: e404, staleKept: true, currentGone: true}
	// A versioned bucket: the stale generation exists as a noncurrent
	// version, so deleting it succeeds and the live object stays.
	versioned := &delObservation{strategy: delByGeneration, name: "b/p/.retain-probe/x", staleErr: nil, staleKept: true, currentGone: true}
	matchOK := &delObservation{strategy: delByMatch, name: "b/p/.retain-probe/y", staleErr: e412, staleKept: true, currentGone: true}
	// An endpoint ignoring ifGenerationMatch: the stale delete removes it.
	matchIgnored := &delObservation{strategy: delByMatch, name: "b/p/.retain-probe/y", staleErr: nil, staleKept: false}
	keptLive := &delObservation{strategy: delByGeneration, name: "b/p/.retain-probe/z", staleErr: e404, staleKept: true, currentErr: e404, currentGone: false}
	skipped := &delObservation{strategy: delByGeneration, skipped: "writing b/p/.retain-probe/x: permission denied"}
	for _, tc := range []struct {
		name       string
		mode       string
		gen, match *delObservation
		want       deleteStrategy
		level      storage.Level
		reason     string
	}{
		{"off", modeOff, nil, nil, delNone, storage.LevelNone, "conditional-delete=off"},
		{"on", modeOn, nil, nil, delByGeneration, storage.LevelNative, "not probed"},
		{"auto, generation honoured", modeAuto, good, nil, delByGeneration, storage.LevelNative, "probed at open"},
		{"auto, versioned bucket, match honoured", modeAuto, versioned, matchOK, delByMatch, storage.LevelNative, "ifGenerationMatch"},
		{"auto, versioned bucket, match ignored", modeAuto, versioned, matchIgnored, delNone, storage.LevelNone, "answered success and the live object was gone"},
		{"auto, versioned bucket, match not probed", modeAuto, versioned, nil, delNone, storage.LevelNone, "answered success and the object was kept"},
		{"auto, live generation not deleted", modeAuto, keptLive, nil, delNone, storage.LevelNone, "with the live generation answered 404 and the object was kept"},
		{"auto, probe skipped", modeAuto, skipped, nil, delNone, storage.LevelNone, "permission denied"},
		{"auto, no probe", modeAuto, nil, nil, delNone, storage.LevelNone, "not probed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, c, note := decideDelete(tc.mode, tc.gen, tc.match)
			if s != tc.want || c.Level != tc.level {
				t.Fatalf("got %v %v, want %v %v (%s)", s, c.Level, tc.want, tc.level, c.Reason)
			}
			if c.Level == storage.LevelNative && c.Scope != storage.ScopeGlobal {
				t.Fatalf("native with scope %v", c.Scope)
			}
			if !strings.Contains(c.Reason+" | "+note, tc.reason) {
				t.Fatalf("reason %q / note %q does not say %q", c.Reason, note, tc.reason)
			}
		})
	}
}

// The probe runs on the emulator, declares what it found, and leaves no
// object behind, not even a noncurrent generation.
func TestProbe(t *testing.T) {
	emu := startEmu(t, "retain-test")
	emu.Server.CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: "retain-versioned", VersioningEnabled: true})

	d := openURI(t, "gs://retain-test/pr")
	c, _ := d.Capabilities(bg)
	if c.DeleteIfVersion.Level != storage.LevelNative || d.del != delByGeneration {
		t.Fatalf("fake-gcs-server honours a delete naming the generation; declared %v (%s)", c.DeleteIfVersion, c.DeleteIfVersion.Reason)
	}
	if left := objectsIn(t, emu, "retain-test", ""); len(left) > 0 {
		t.Fatalf("the probe left %v", left)
	}

	// On a versioned bucket the named stale generation exists, and
	// fake-gcs-server ignores ifGenerationMatch on delete: nothing is
	// honoured, so none, and a conditional delete deletes nothing.
	v := openURI(t, "gs://retain-versioned/pr")
	c, _ = v.Capabilities(bg)
	if c.DeleteIfVersion.Level != storage.LevelNone {
		t.Fatalf("versioned bucket on fake-gcs-server: declared %v (%s)", c.DeleteIfVersion, c.DeleteIfVersion.Reason)
	}
	t.Logf("versioned bucket: %s", c.DeleteIfVersion.Reason)
	if left := objectsIn(t, emu, "retain-versioned", ""); len(left) > 0 {
		t.Fatalf("the probes left %v", left)
	}
	info := storagetest.MustPut(t, v, "k", "x")
	err := v.Delete(bg, "k", storage.DeleteOptions{IfVersion: info.Version})
	storagetest.WantKind(t, "delete-if-version declared none", err, storage.ErrUnsupported)
	if body, _ := read(t, v, "k"); body != "x" {
		t.Fatal("an unsupported delete changed the object")
	}

	off := openURI(t, "gs://retain-test/pr?conditional-delete=off")
	if c, _ := off.Capabilities(bg); c.DeleteIfVersion.Level != storage.LevelNone {
		t.Fatalf("conditional-delete=off declared %v", c.DeleteIfVersion)
	}
	on := openURI(t, "gs://retain-test/pr?conditional-delete=on")
	if c, _ := on.Capabilities(bg); c.DeleteIfVersion.Level != storage.LevelNative {
		t.Fatalf("conditional-delete=on declared %v", c.DeleteIfVersion)
	}
}

// --- reads and listings -------------------------------------------------------

func TestListHidesProbeAndStripsPrefix(t *testing.T) {
	emu := startEmu(t, "retain-test")
	d := openURI(t, "gs://retain-test/a/b")
	// A probe object left by a crashed open, and a neighbour outside the
	// prefix.
	for _, name := range []string{"a/b/.retain-probe/left", "a/bc", "a/b/x"} {
		emu.Server.CreateObject(fakestorage.Object{ObjectAttrs: fakestorage.ObjectAttrs{BucketName: "retain-test", Name: name}, Content: []byte("z")})
	}
	storagetest.MustPut(t, d, "y", "1")
	var keys []string
	opts := storage.ListOptions{PageSize: 1}
	for pages := 0; ; pages++ {
		if pages > 5 {
			t.Fatalf("paging does not end: %v", keys)
		}
		page, err := d.List(bg, opts)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range page.Objects {
			keys = append(keys, o.Key)
		}
		if !page.More {
			break
		}
		opts.StartAfter = page.Objects[len(page.Objects)-1].Key
	}
	if strings.Join(keys, ",") != "x,y" {
		t.Fatalf("listed %v, want x,y", keys)
	}
}

// An object another program stored gzip-encoded is read as stored: the
// bytes match the size Stat and List report.
func TestGetReadsStoredBytes(t *testing.T) {
	emu := startEmu(t, "retain-test")
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(bytes.Repeat([]byte("retain "), 100))
	zw.Close()
	emu.Server.CreateObject(fakestorage.Object{ObjectAttrs: fakestorage.ObjectAttrs{BucketName: "retain-test", Name: "p/gz", ContentEncoding: "gzip"}, Content: gz.Bytes()})
	d := openURI(t, "gs://retain-test/p")
	body, info := read(t, d, "gz")
	st, err := d.Stat(bg, "gz")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal([]byte(body), gz.Bytes()) || info.Size != int64(gz.Len()) || st.Size != info.Size || st.Version != info.Version {
		t.Fatalf("get %d bytes (info %+v), stored %d, stat %+v", len(body), info, gz.Len(), st)
	}
}

// endpoint= wins over STORAGE_EMULATOR_HOST.
func TestEndpointOption(t *testing.T) {
	emu := startEmu(t, "retain-test")
	t.Setenv(emulatorEnv, fmt.Sprintf("127.0.0.1:%d", emulator.FreePort(t)))
	d := openURI(t, "gs://retain-test/ep?endpoint=http://"+emu.Host)
	storagetest.MustPut(t, d, "k", "v")
	if body, _ := read(t, d, "k"); body != "v" {
		t.Fatalf("read %q", body)
	}
}

// --- conformance ----------------------------------------------------------------

func TestConformanceFakeGCS(t *testing.T) {
	emu := startEmu(t, "retain-conformance")
	rep := conformance.Check(t, conformance.Config{
		Adapter:   Name,
		Adapters:  []storage.Adapter{Adapter},
		Store:     "gs://retain-conformance/suite?conditional-delete=auto",
		Backend:   emu.Name,
		ReportDir: t.TempDir(),
	}, "gcs-fake-gcs-server")
	if rep.Capabilities.DeleteIfVersion.Level != storage.LevelNative {
		t.Errorf("delete-if-version declared %v on fake-gcs-server", rep.Capabilities.DeleteIfVersion)
	}
	b, _ := json.MarshalIndent(rep.Capabilities, "", "  ")
	t.Logf("declared: %s", b)
}

func TestConformanceInProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	emu := startEmu(t, "retain-conformance")
	conformance.Check(t, conformance.Config{
		Adapter:   Name,
		Adapters:  []storage.Adapter{Adapter},
		Store:     "gs://retain-conformance/inproc",
		Backend:   emu.Name,
		InProcess: true,
		ReportDir: t.TempDir(),
	}, "gcs-fake-gcs-server-inprocess")
}

// On a versioned bucket of fake-gcs-server nothing conditional about delete
// is honoured: the suite proves the adapter says so and refuses.
func TestConformanceVersionedBucket(t *testing.T) {
	emu := startEmu(t)
	emu.Server.CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: "retain-versioned", VersioningEnabled: true})
	rep := conformance.Check(t, conformance.Config{
		Adapter:   Name,
		Adapters:  []storage.Adapter{Adapter},
		Store:     "gs://retain-versioned/suite",
		Backend:   emu.Name + " (versioned bucket)",
		Run:       "capability-honesty|conditional-delete|contract/",
		ReportDir: t.TempDir(),
	}, "gcs-fake-gcs-server-versioned")
	if rep.Capabilities.DeleteIfVersion.Level != storage.LevelNone {
		t.Errorf("delete-if-version declared %v on a versioned bucket", rep.Capabilities.DeleteIfVersion)
	}
}
