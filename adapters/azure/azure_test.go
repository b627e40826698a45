package azure

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/service"

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

var bg = context.Background()

// clearEnv unsets every credential variable the adapter reads.
func clearEnv(t testing.TB) {
	t.Helper()
	for _, v := range []string{envConnectionString, envAccount, envKey} {
		t.Setenv(v, "")
	}
}

func loc(container, prefix string, opts map[string]string) storage.Location {
	return storage.Location{Scheme: Scheme, Bucket: container, Prefix: prefix, Options: opts}
}

// --- without an emulator --------------------------------------------------

func TestOpenRefusesBadConfiguration(t *testing.T) {
	clearEnv(t)
	ep := "http://127.0.0.1:1/devstoreaccount1"
	cases := []struct {
		name string
		env  map[string]string
		loc  storage.Location
		kind storage.Kind
		want string // in the message
	}{
		{"wrong scheme", nil, storage.Location{Scheme: "s3", Bucket: "abc"}, storage.ErrInvalidArgument, "az://"},
		{"unknown option", nil, loc("abc", "", map[string]string{"region": "x", "colour": "y", OptEndpoint: ep}), storage.ErrInvalidArgument, "colour, region"},
		{"bad container", nil, loc("Bad_Container", "", nil), storage.ErrInvalidArgument, "container name"},
		{"short container", nil, loc("ab", "", nil), storage.ErrInvalidArgument, "3 to 63"},
		{"bad conditional-delete", nil, loc("abc", "", map[string]string{OptConditionalDelete: "maybe", OptAccount: "acct"}), storage.ErrInvalidArgument, "auto, on or off"},
		{"endpoint with SAS", nil, loc("abc", "", map[string]string{OptEndpoint: ep + "?sv=2020&sig=SECRET"}), storage.ErrInvalidArgument, "must not carry"},
		{"endpoint not a URL", nil, loc("abc", "", map[string]string{OptEndpoint: "ftp://x"}), storage.ErrInvalidArgument, "http(s) URL"},
		{"token over http", nil, loc("abc", "", map[string]string{OptEndpoint: ep}), storage.ErrInvalidArgument, "only sent over https"},
		{"no account", nil, loc("abc", "", nil), storage.ErrInvalidArgument, "no storage account"},
		{"bad account", nil, loc("abc", "", map[string]string{OptAccount: "Not_An_Account"}), storage.ErrInvalidArgument, "account names"},
		{"key without account", map[string]string{envKey: emulator.AzuriteKey}, loc("abc", "", map[string]string{OptEndpoint: ep}), storage.ErrInvalidArgument, "no account names it"},
		{"key of another account", map[string]string{envKey: emulator.AzuriteKey, envAccount: "other"}, loc("abc", "", map[string]string{OptAccount: "devstoreaccount1", OptEndpoint: ep}), storage.ErrInvalidArgument, "holds the key of account other"},
		{"key not base64", map[string]string{envKey: "not base64!", envAccount: "devstoreaccount1"}, loc("abc", "", map[string]string{OptEndpoint: ep}), storage.ErrInvalidArgument, "not a base64"},
		{"connection string and endpoint", map[string]string{envConnectionString: "AccountName=devstoreaccount1;AccountKey=" + emulator.AzuriteKey}, loc("abc", "", map[string]string{OptEndpoint: ep}), storage.ErrInvalidArgument, "drop account= and endpoint="},
		{"malformed connection string", map[string]string{envConnectionString: "SECRET-garbage"}, loc("abc", "", nil), storage.ErrInvalidArgument, "malformed"},
		{"prefix with trailing-dot segment", nil, loc("abc", "p./q", map[string]string{OptAccount: "acct"}), storage.ErrInvalidArgument, "ends in '.'"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			_, err := Open(bg, c.loc)
			storagetest.WantKind(t, c.name, err, c.kind)
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("%s: message %q does not say %q", c.name, err, c.want)
			}
			for _, secret := range []string{"SECRET", emulator.AzuriteKey} {
				if strings.Contains(err.Error(), secret) {
					t.Fatalf("%s: message carries a secret: %q", c.name, err)
				}
			}
		})
	}
}

// offline opens a driver that never reaches the network at Open.
func offline(t *testing.T, prefix string) *Driver {
	t.Helper()
	clearEnv(t)
	t.Setenv(envAccount, emulator.AzuriteAccount)
	t.Setenv(envKey, emulator.AzuriteKey)
	d, err := Open(bg, loc("abc", prefix, map[string]string{OptEndpoint: "http://127.0.0.1:1/devstoreaccount1", OptConditionalDelete: "on"}))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestDriverRefusesKeysBeforeSending(t *testing.T) {
	d := offline(t, "pre")
	keys := append([]string{"a./b", "a/b.", "x/..."}, conformance.InvalidKeys...)
	keys = append(keys, strings.Repeat("k/", 260)+"k", strings.Repeat("é", 1020))
	for _, k := range keys {
		name := fmt.Sprintf("%.20q", k)
		_, err := d.Put(bg, k, strings.NewReader("x"), storage.PutOptions{})
		storagetest.WantKind(t, "put "+name, err, storage.ErrInvalidArgument)
		_, err = d.Get(bg, k)
		storagetest.WantKind(t, "get "+name, err, storage.ErrInvalidArgument)
		_, err = d.Stat(bg, k)
		storagetest.WantKind(t, "stat "+name, err, storage.ErrInvalidArgument)
		storagetest.WantKind(t, "delete "+name, d.Delete(bg, k, storage.DeleteOptions{}), storage.ErrInvalidArgument)
	}
	_, err := d.List(bg, storage.ListOptions{Prefix: "a//"})
	storagetest.WantKind(t, "list of a bad prefix", err, storage.ErrInvalidArgument)
	_, err = d.Put(bg, "k", strings.NewReader("x"), storage.PutOptions{Mode: storage.PutReplaceIfVersion})
	storagetest.WantKind(t, "replace without a version", err, storage.ErrInvalidArgument)
	_, err = d.Put(bg, "k", strings.NewReader("x"), storage.PutOptions{Mode: storage.PutCreateIfAbsent, IfVersion: "v"})
	storagetest.WantKind(t, "create with a version", err, storage.ErrInvalidArgument)
	_, err = d.AcquireGate(bg, "metadata")
	storagetest.WantKind(t, "acquire gate", err, storage.ErrUnsupported)
	_, err = d.DeleteMany(bg, make([]string, maxDeleteBatch+1))
	storagetest.WantKind(t, "delete-many over the batch limit", err, storage.ErrLimitExceeded)
}

func TestUnreachableEndpointIsTransient(t *testing.T) {
	d := offline(t, "")
	ctx, cancel := context.WithTimeout(bg, 300*time.Millisecond)
	defer cancel()
	_, err := d.Stat(ctx, "k")
	storagetest.WantKind(t, "stat on a closed port", err, storage.ErrTransient)
	// A transport error must not quote the request URL's query (a SAS).
	clearEnv(t)
	t.Setenv(envConnectionString, "BlobEndpoint=http://127.0.0.1:1/devstoreaccount1;SharedAccessSignature=sv=2020-02-10&sig=SECRETSIG")
	sd, err := openWith(bg, loc("abc", "", map[string]string{OptConditionalDelete: "on"}), openOptions{retry: &policy.RetryOptions{MaxRetries: -1}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = sd.Put(bg, "k", strings.NewReader("x"), storage.PutOptions{})
	storagetest.WantKind(t, "put on a closed port with a SAS", err, storage.ErrTransient)
	if !strings.Contains(err.Error(), "connection refused") || !strings.Contains(err.Error(), "127.0.0.1:1/devstoreaccount1/abc/k") {
		t.Fatalf("want the redacted URL and the cause: %v", err)
	}
	if strings.Contains(err.Error(), "SECRETSIG") {
		t.Fatalf("the error carries the SAS: %v", err)
	}
}

// sizedSeeker claims a size without holding the bytes.
type sizedSeeker struct{ size, off int64 }

func (s *sizedSeeker) ReadAt(p []byte, off int64) (int, error) { return 0, io.EOF }
func (s *sizedSeeker) Read(p []byte) (int, error)              { return 0, io.EOF }
func (s *sizedSeeker) Seek(off int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
		s.off = off
	case io.SeekCurrent:
		s.off += off
	case io.SeekEnd:
		s.off = s.size + off
	}
	return s.off, nil
}

func TestSpool(t *testing.T) {
	// A seekable body is measured, not read.
	_, _, err := spool("put", "k", &sizedSeeker{size: MaxObjectSize + 1})
	storagetest.WantKind(t, "seekable body over the limit", err, storage.ErrLimitExceeded)
	s, n, err := spool("put", "k", &sizedSeeker{size: MaxObjectSize})
	if err != nil || n != MaxObjectSize {
		t.Fatalf("seekable body at the limit: %d, %v", n, err)
	}
	s.release()
	// A bytes.Reader is used from its current offset.
	br := bytes.NewReader([]byte("0123456789"))
	br.Seek(4, io.SeekStart)
	s, n, err = spool("put", "k", br)
	if err != nil || n != 6 {
		t.Fatalf("partly read bytes.Reader: %d, %v", n, err)
	}
	if b, _ := io.ReadAll(s); string(b) != "456789" {
		t.Fatalf("spooled %q", b)
	}
	// A stream over the memory threshold goes to an unlinked temp file and
	// rewinds.
	body := bytes.Repeat([]byte("x"), memSpool+5)
	s, n, err = spool("put", "k", io.MultiReader(bytes.NewReader(body)))
	if err != nil || n != int64(len(body)) || s.f == nil {
		t.Fatalf("large stream: %d, %v, file %v", n, err, s.f)
	}
	for range 2 {
		s.Seek(0, io.SeekStart)
		if b, _ := io.ReadAll(s); !bytes.Equal(b, body) {
			t.Fatalf("temp file holds %d bytes, want %d", len(b), len(body))
		}
	}
	s.release()
	// A body read error keeps its kind.
	_, _, err = spool("put", "k", io.MultiReader(strings.NewReader("abc"), errReader{storage.Errorf("x", "", storage.ErrTransient, "broken")}))
	storagetest.WantKind(t, "failing body", err, storage.ErrTransient)
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// --- against Azurite ------------------------------------------------------

// azurite starts one Azurite for the test and makes a container in it.
func azurite(t testing.TB) (*emulator.Azure, *service.Client) {
	t.Helper()
	az := emulator.Azurite(t)
	svc, err := service.NewClientFromConnectionString(az.ConnectionString, nil)
	if err != nil {
		t.Fatal(err)
	}
	return az, svc
}

func makeContainer(t testing.TB, svc *service.Client, name string) {
	t.Helper()
	if _, err := svc.CreateContainer(bg, name, nil); err != nil && !bloberror.HasCode(err, bloberror.ContainerAlreadyExists) {
		t.Fatal(err)
	}
}

// openAz opens a driver on Azurite with the shared key from the
// environment and the endpoint in the URI.
func openAz(t *testing.T, az *emulator.Azure, container, prefix string, opts map[string]string, o openOptions) *Driver {
	t.Helper()
	clearEnv(t)
	t.Setenv(envAccount, az.Account)
	t.Setenv(envKey, az.Key)
	all := map[string]string{OptEndpoint: az.Endpoint}
	for k, v := range opts {
		all[k] = v
	}
	d, err := openWith(bg, loc(container, prefix, all), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
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

func TestAzurite(t *testing.T) {
	az, svc := azurite(t)
	makeContainer(t, svc, "retain-test")

	t.Run("ErrorMapping", func(t *testing.T) { testErrorMapping(t, az) })
	t.Run("Versions", func(t *testing.T) { testVersions(t, az) })
	t.Run("Credentials", func(t *testing.T) { testCredentials(t, az) })
	t.Run("MissingContainer", func(t *testing.T) { testMissingContainer(t, az) })
	t.Run("ConditionalDeleteSetting", func(t *testing.T) { testConditionalDeleteSetting(t, az) })
	t.Run("RetriedWriteFindsItself", func(t *testing.T) { testRetriedWrite(t, az) })
	t.Run("Throttling", func(t *testing.T) { testThrottling(t, az) })
	t.Run("ListStartAfter", func(t *testing.T) { testListStartAfter(t, az) })
	t.Run("DeleteMany", func(t *testing.T) { testDeleteMany(t, az) })
	t.Run("Conformance", func(t *testing.T) {
		clearEnv(t)
		t.Setenv(envConnectionString, az.ConnectionString)
		rep := conformance.Check(t, conformance.Config{Adapter: Name, Adapters: []storage.Adapter{Adapter},
			Store: "az://retain-test/conformance", Backend: az.Name, ReportDir: t.TempDir()}, "azure-azurite")
		for _, c := range rep.Cases {
			if c.Name == "claim" && c.Result != conformance.Pass {
				t.Errorf("the claim case must run and pass on Azurite: %s %s", c.Result, c.Reason)
			}
		}
		if rep.Capabilities.DeleteIfVersion.Level != storage.LevelNative {
			t.Errorf("delete-if-version on Azurite: %+v", rep.Capabilities.DeleteIfVersion)
		}
	})
	t.Run("ConformanceInProcess", func(t *testing.T) {
		clearEnv(t)
		t.Setenv(envAccount, az.Account)
		t.Setenv(envKey, az.Key)
		conformance.Check(t, conformance.Config{Adapter: Name, Adapters: []storage.Adapter{Adapter}, InProcess: true,
			Store: "az://retain-test/conformance-inproc?endpoint=" + az.Endpoint, Backend: az.Name, ReportDir: t.TempDir()}, "azure-azurite-inprocess")
	})
}

func testErrorMapping(t *testing.T, az *emulator.Azure) {
	d := openAz(t, az, "retain-test", "errors", nil, openOptions{})

	_, err := d.Get(bg, "missing")
	storagetest.WantKind(t, "get missing", err, storage.ErrNotFound)
	_, err = d.Stat(bg, "missing")
	storagetest.WantKind(t, "stat missing", err, storage.ErrNotFound)
	if err := d.Delete(bg, "missing", storage.DeleteOptions{}); err != nil {
		t.Fatalf("unconditional delete of a missing key: %v", err)
	}

	v1, err := put(d, "k", "one", storage.PutCreateIfAbsent, "")
	if err != nil {
		t.Fatal(err)
	}
	_, err = put(d, "k", "two", storage.PutCreateIfAbsent, "")
	storagetest.WantKind(t, "create on an existing key (409 BlobAlreadyExists)", err, storage.ErrAlreadyExists)
	if b, _ := read(t, d, "k"); b != "one" {
		t.Fatalf("a refused create wrote: %q", b)
	}
	v2, err := put(d, "k", "two", storage.PutReplaceIfVersion, v1.Version)
	if err != nil {
		t.Fatal(err)
	}
	_, err = put(d, "k", "stale", storage.PutReplaceIfVersion, v1.Version)
	storagetest.WantKind(t, "replace with a stale version (412 ConditionNotMet)", err, storage.ErrPreconditionFailed)
	_, err = put(d, "absent", "x", storage.PutReplaceIfVersion, v1.Version)
	storagetest.WantKind(t, "replace of a missing key (Azurite: 412)", err, storage.ErrNotFound)
	if _, err := d.Stat(bg, "absent"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("a refused replace created the key: %v", err)
	}
	storagetest.WantKind(t, "delete with a stale version", d.Delete(bg, "k", storage.DeleteOptions{IfVersion: v1.Version}), storage.ErrPreconditionFailed)
	if b, _ := read(t, d, "k"); b != "two" {
		t.Fatalf("a refused delete changed the body: %q", b)
	}
	if err := d.Delete(bg, "k", storage.DeleteOptions{IfVersion: v2.Version}); err != nil {
		t.Fatal(err)
	}
	storagetest.WantKind(t, "delete-if-version of a missing key (Azurite: 412)", d.Delete(bg, "k", storage.DeleteOptions{IfVersion: v2.Version}), storage.ErrNotFound)

	// A version no ETag can be never reaches a header.
	storagetest.MustPut(t, d, "k2", "x")
	for _, v := range []string{"bad\nversion", `a"b`, "é"} {
		_, err = put(d, "k2", "y", storage.PutReplaceIfVersion, v)
		storagetest.WantKind(t, fmt.Sprintf("replace with version %q", v), err, storage.ErrPreconditionFailed)
		_, err = put(d, "absent", "y", storage.PutReplaceIfVersion, v)
		storagetest.WantKind(t, fmt.Sprintf("replace of a missing key with version %q", v), err, storage.ErrNotFound)
		storagetest.WantKind(t, fmt.Sprintf("delete with version %q", v), d.Delete(bg, "k2", storage.DeleteOptions{IfVersion: v}), storage.ErrPreconditionFailed)
		storagetest.WantKind(t, fmt.Sprintf("delete of a missing key with version %q", v), d.Delete(bg, "absent", storage.DeleteOptions{IfVersion: v}), storage.ErrNotFound)
	}
	if b, _ := read(t, d, "k2"); b != "x" {
		t.Fatalf("a refused write changed the body: %q", b)
	}

	// Bad credentials: Azurite answers 403 AuthorizationFailure.
	bad := []byte(az.Key)
	bad[0] ^= 1
	clearEnv(t)
	t.Setenv(envAccount, az.Account)
	t.Setenv(envKey, string(bad))
	bd, err := Open(bg, loc("retain-test", "errors", map[string]string{OptEndpoint: az.Endpoint, OptConditionalDelete: "on"}))
	if err != nil {
		t.Fatal(err)
	}
	_, err = bd.Stat(bg, "k")
	storagetest.WantKind(t, "stat with a wrong key", err, storage.ErrPermissionDenied)
	_, err = put(bd, "k", "x", storage.PutOverwrite, "")
	storagetest.WantKind(t, "put with a wrong key", err, storage.ErrPermissionDenied)
	if strings.Contains(err.Error(), string(bad)) || strings.Contains(err.Error(), az.Key) {
		t.Fatalf("the error carries the key: %v", err)
	}
	// With auto, the probe meets the refusal: delete-if-version none, says why.
	pd, err := Open(bg, loc("retain-test", "errors", map[string]string{OptEndpoint: az.Endpoint}))
	if err != nil {
		t.Fatalf("open with a wrong key and conditional-delete=auto: %v", err)
	}
	if c := pd.caps.DeleteIfVersion; c.Level != storage.LevelNone || !strings.Contains(c.Reason, "conditional-delete=on") {
		t.Fatalf("probe with a refused key: %+v", c)
	}
	storagetest.WantKind(t, "delete-if-version declared none", pd.Delete(bg, "k", storage.DeleteOptions{IfVersion: "x"}), storage.ErrUnsupported)
}

func testVersions(t *testing.T, az *emulator.Azure) {
	d := openAz(t, az, "retain-test", "versions", nil, openOptions{})
	a := storagetest.MustPut(t, d, "v", "same")
	b := storagetest.MustPut(t, d, "v", "same")
	if a.Version == b.Version || strings.Contains(a.Version, `"`) {
		t.Fatalf("versions %q then %q: want distinct, unquoted", a.Version, b.Version)
	}
	st, err := d.Stat(bg, "v")
	if err != nil {
		t.Fatal(err)
	}
	_, got := read(t, d, "v")
	page, err := d.List(bg, storage.ListOptions{Prefix: "v"})
	if err != nil || len(page.Objects) != 1 {
		t.Fatalf("list: %+v, %v", page, err)
	}
	for what, v := range map[string]string{"stat": st.Version, "get": got.Version, "list": page.Objects[0].Version} {
		if v != b.Version {
			t.Fatalf("%s version %q, put returned %q", what, v, b.Version)
		}
	}
	if got.Size != 4 || page.Objects[0].Size != 4 || got.ModTime.IsZero() {
		t.Fatalf("info: get %+v list %+v", got, page.Objects[0])
	}
	// A token as listed (unquoted) and as a header (quoted) both work.
	if _, err := put(d, "v", "next", storage.PutReplaceIfVersion, `"`+b.Version+`"`); err != nil {
		t.Fatalf("replace with a quoted ETag: %v", err)
	}
}

func testCredentials(t *testing.T, az *emulator.Azure) {
	// Connection string.
	clearEnv(t)
	t.Setenv(envConnectionString, az.ConnectionString)
	d, err := Open(bg, loc("retain-test", "creds", nil))
	if err != nil {
		t.Fatal(err)
	}
	storagetest.MustPut(t, d, "cs", "x")
	caps, _ := d.Capabilities(bg)
	notes := strings.Join(caps.Notes, "\n")
	if !strings.Contains(notes, envConnectionString) || strings.Contains(notes, az.Key) {
		t.Fatalf("notes should name the credential source and not the key:\n%s", notes)
	}
	// Account and key, account given in the URI.
	clearEnv(t)
	t.Setenv(envKey, az.Key)
	d, err = Open(bg, loc("retain-test", "creds", map[string]string{OptAccount: az.Account, OptEndpoint: az.Endpoint}))
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := read(t, d, "cs"); b != "x" {
		t.Fatalf("read %q", b)
	}
}

func testMissingContainer(t *testing.T, az *emulator.Azure) {
	clearEnv(t)
	t.Setenv(envAccount, az.Account)
	t.Setenv(envKey, az.Key)
	// auto: the probe meets the missing container at Open.
	_, err := Open(bg, loc("no-such-container", "p", map[string]string{OptEndpoint: az.Endpoint}))
	storagetest.WantKind(t, "open on a missing container", err, storage.ErrNotFound)
	if !strings.Contains(err.Error(), `container "no-such-container" does not exist`) {
		t.Fatalf("message does not name the container: %v", err)
	}
	d := openAz(t, az, "no-such-container", "p", map[string]string{OptConditionalDelete: "on"}, openOptions{})
	for what, err := range map[string]error{
		"get":    func() error { _, err := d.Get(bg, "k"); return err }(),
		"stat":   func() error { _, err := d.Stat(bg, "k"); return err }(),
		"put":    func() error { _, err := put(d, "k", "x", storage.PutCreateIfAbsent, ""); return err }(),
		"delete": d.Delete(bg, "k", storage.DeleteOptions{}),
		"list":   func() error { _, err := d.List(bg, storage.ListOptions{}); return err }(),
	} {
		storagetest.WantKind(t, what+" in a missing container", err, storage.ErrNotFound)
		if !strings.Contains(err.Error(), "no-such-container") {
			t.Fatalf("%s: message does not name the container: %v", what, err)
		}
	}
}

func testConditionalDeleteSetting(t *testing.T, az *emulator.Azure) {
	d := openAz(t, az, "retain-test", "cdel", nil, openOptions{})
	caps, _ := d.Capabilities(bg)
	if caps.DeleteIfVersion.Level != storage.LevelNative || !strings.Contains(strings.Join(caps.Notes, "\n"), "probed at open") {
		t.Fatalf("auto on Azurite: %+v\n%v", caps.DeleteIfVersion, caps.Notes)
	}
	// The probe cleaned up after itself.
	page, err := d.List(bg, storage.ListOptions{Prefix: probeDir + "/"})
	if err != nil || len(page.Objects) != 0 {
		t.Fatalf("probe left %+v, %v", page.Objects, err)
	}
	off := openAz(t, az, "retain-test", "cdel", map[string]string{OptConditionalDelete: "off"}, openOptions{})
	caps, _ = off.Capabilities(bg)
	if caps.DeleteIfVersion.Level != storage.LevelNone {
		t.Fatalf("off: %+v", caps.DeleteIfVersion)
	}
	v := storagetest.MustPut(t, off, "k", "x")
	storagetest.WantKind(t, "delete-if-version with off", off.Delete(bg, "k", storage.DeleteOptions{IfVersion: v.Version}), storage.ErrUnsupported)
	if b, _ := read(t, off, "k"); b != "x" {
		t.Fatal("an unsupported delete deleted")
	}
}

// flaky is a transport that spoils the next PUT or DELETE of a blob once
// armed. "lose": the request reaches the server, then the answer is lost
// (a broken connection), as when a response is lost; after runs then,
// before the SDK's retry. "busy": the request is answered 503 ServerBusy
// without reaching the server. The SDK retries both.
type flaky struct {
	method string
	mode   string
	after  func()
	hit    atomic.Int32
	arm    atomic.Bool
}

func (f *flaky) Do(req *http.Request) (*http.Response, error) {
	if !(req.Method == f.method && req.URL.Query().Get("comp") == "" && f.arm.CompareAndSwap(true, false)) {
		return http.DefaultClient.Do(req)
	}
	f.hit.Add(1)
	if f.mode == "busy" {
		h := http.Header{}
		h.Set("x-ms-error-code", "ServerBusy")
		return &http.Response{StatusCode: http.StatusServiceUnavailable, Status: "503 Server Busy", Header: h,
			Body: io.NopCloser(strings.NewReader("")), Request: req}, nil
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if f.after != nil {
		f.after()
	}
	return nil, io.ErrUnexpectedEOF
}

func testRetriedWrite(t *testing.T, az *emulator.Azure) {
	fast := &policy.RetryOptions{RetryDelay: 5 * time.Millisecond, MaxRetryDelay: 20 * time.Millisecond}
	lp := &flaky{method: http.MethodPut, mode: "lose"}
	d := openAz(t, az, "retain-test", "retry", map[string]string{OptConditionalDelete: "on"}, openOptions{transport: lp, retry: fast})
	other := openAz(t, az, "retain-test", "retry", map[string]string{OptConditionalDelete: "on"}, openOptions{})

	lp.arm.Store(true)
	info, err := put(d, "created", "mine", storage.PutCreateIfAbsent, "")
	if lp.hit.Load() != 1 {
		t.Fatal("the transport lost nothing: the test tests nothing")
	}
	if err != nil {
		t.Fatalf("a create whose response was lost and whose retry met its own write: %v", err)
	}
	if st, _ := d.Stat(bg, "created"); st.Version != info.Version {
		t.Fatalf("create returned version %q, the blob has %q", info.Version, st.Version)
	}
	lp.arm.Store(true)
	info2, err := put(d, "created", "mine again", storage.PutReplaceIfVersion, info.Version)
	if err != nil || lp.hit.Load() != 2 {
		t.Fatalf("a replace whose response was lost: %v (lost %d)", err, lp.hit.Load())
	}
	if b, st := read(t, d, "created"); b != "mine again" || st.Version != info2.Version {
		t.Fatalf("after the replace: %q %+v, returned %+v", b, st, info2)
	}
	// A create whose lost try met a blob without its write id: that try
	// may have written before someone replaced the blob, so the outcome
	// is unknown, never "exists" for what may have been its own write.
	lp.arm.Store(true)
	_, err = put(d, "created", "intruder", storage.PutCreateIfAbsent, "")
	storagetest.WantKind(t, "retried create on another writer's blob", err, storage.ErrUnknown)

	// A replace whose answer was lost, superseded by another writer before
	// the retry: whether it happened cannot be known.
	v0 := storagetest.MustPut(t, other, "superseded", "zero")
	lp.after = func() { storagetest.MustPut(t, other, "superseded", "intruder") }
	lp.arm.Store(true)
	_, err = put(d, "superseded", "mine", storage.PutReplaceIfVersion, v0.Version)
	storagetest.WantKind(t, "replace lost then superseded", err, storage.ErrUnknown)
	lp.after = nil

	// A 503 is a refusal before any work: the retry's 412 is a plain
	// mismatch, not an unknown outcome.
	busy := &flaky{method: http.MethodPut, mode: "busy"}
	bd := openAz(t, az, "retain-test", "retry", map[string]string{OptConditionalDelete: "on"}, openOptions{transport: busy, retry: fast})
	busy.arm.Store(true)
	_, err = put(bd, "superseded", "stale", storage.PutReplaceIfVersion, v0.Version)
	if busy.hit.Load() != 1 {
		t.Fatal("the transport answered no 503")
	}
	storagetest.WantKind(t, "stale replace retried after a 503", err, storage.ErrPreconditionFailed)

	// A conditional delete whose answer was lost: the retry finds the blob
	// gone and reports success, the blob of that version is gone.
	ld := &flaky{method: http.MethodDelete, mode: "lose"}
	dd := openAz(t, az, "retain-test", "retry", map[string]string{OptConditionalDelete: "on"}, openOptions{transport: ld, retry: fast})
	ld.arm.Store(true)
	if err := dd.Delete(bg, "created", storage.DeleteOptions{IfVersion: info2.Version}); err != nil || ld.hit.Load() != 1 {
		t.Fatalf("a conditional delete whose response was lost: %v (lost %d)", err, ld.hit.Load())
	}
	if _, err := d.Stat(bg, "created"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("after the delete: %v", err)
	}
	// After a 503 the blob was missing all along: not found.
	busyDel := &flaky{method: http.MethodDelete, mode: "busy"}
	bdd := openAz(t, az, "retain-test", "retry", map[string]string{OptConditionalDelete: "on"}, openOptions{transport: busyDel, retry: fast})
	busyDel.arm.Store(true)
	storagetest.WantKind(t, "conditional delete of a missing blob retried after a 503",
		bdd.Delete(bg, "created", storage.DeleteOptions{IfVersion: info2.Version}), storage.ErrNotFound)
}

// countLists counts List Blobs requests.
type countLists struct{ n atomic.Int32 }

func (c *countLists) Do(req *http.Request) (*http.Response, error) {
	if req.URL.Query().Get("comp") == "list" {
		c.n.Add(1)
	}
	return http.DefaultClient.Do(req)
}

func testListStartAfter(t *testing.T, az *emulator.Azure) {
	lists := &countLists{}
	d := openAz(t, az, "retain-test", "list", map[string]string{OptConditionalDelete: "on"}, openOptions{transport: lists})
	var want []string
	for i := range 23 {
		k := fmt.Sprintf("l/%02d", i)
		storagetest.MustPut(t, d, k, k)
		want = append(want, k)
	}
	storagetest.MustPut(t, d, "l0", "outside the prefix")
	collect := func(d *Driver, size int) []string {
		var got []string
		opts := storage.ListOptions{Prefix: "l/", PageSize: size}
		for range 50 {
			page, err := d.List(bg, opts)
			if err != nil {
				t.Fatal(err)
			}
			if len(page.Objects) > size {
				t.Fatalf("page of %d with size %d", len(page.Objects), size)
			}
			for _, o := range page.Objects {
				got = append(got, o.Key)
			}
			if !page.More {
				return got
			}
			opts.StartAfter = page.Objects[len(page.Objects)-1].Key
		}
		t.Fatal("paging does not end")
		return nil
	}
	if got := collect(d, 5); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("paged (cached markers):\n got %v\nwant %v", got, want)
	}
	// 23 keys in pages of 5: each page one request, resumed from its marker.
	if n := lists.n.Load(); n != 5 {
		t.Fatalf("paging 23 keys by 5 took %d List Blobs requests, want 5 (one per page)", n)
	}
	// A fresh driver has no markers: every page after the first lists from
	// the start of the prefix and skips.
	fresh := openAz(t, az, "retain-test", "list", map[string]string{OptConditionalDelete: "on"}, openOptions{})
	page, err := fresh.List(bg, storage.ListOptions{Prefix: "l/", StartAfter: "l/07", PageSize: 3})
	if err != nil || len(page.Objects) != 3 || page.Objects[0].Key != "l/08" || !page.More {
		t.Fatalf("start-after l/07 without a cached marker: %+v, %v", page, err)
	}
	page, err = fresh.List(bg, storage.ListOptions{Prefix: "l/", StartAfter: "l/0", PageSize: 2})
	if err != nil || len(page.Objects) != 2 || page.Objects[0].Key != "l/00" {
		t.Fatalf("start-after a non-key l/0: %+v, %v", page, err)
	}
	page, err = fresh.List(bg, storage.ListOptions{Prefix: "l/", StartAfter: "l/22"})
	if err != nil || len(page.Objects) != 0 || page.More {
		t.Fatalf("start-after the last key: %+v, %v", page, err)
	}
	page, err = fresh.List(bg, storage.ListOptions{Prefix: "l/", StartAfter: "m"})
	if err != nil || len(page.Objects) != 0 || page.More {
		t.Fatalf("start-after past the prefix: %+v, %v", page, err)
	}
	// The contract's byte order, including ~ (0x7e) before é.
	order := []string{"o/a.b", "o/a/b", "o/a0", "o/b", "o/~", "o/é"}
	for i := len(order) - 1; i >= 0; i-- {
		storagetest.MustPut(t, d, order[i], "x")
	}
	page, err = d.List(bg, storage.ListOptions{Prefix: "o/"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range page.Objects {
		got = append(got, o.Key)
	}
	if strings.Join(got, ",") != strings.Join(order, ",") {
		t.Fatalf("order: got %v want %v", got, order)
	}
}

func testDeleteMany(t *testing.T, az *emulator.Azure) {
	d := openAz(t, az, "retain-test", "dm", map[string]string{OptConditionalDelete: "on"}, openOptions{})
	var keys []string
	for i := range 40 {
		k := fmt.Sprintf("k%02d", i)
		if i%3 != 0 {
			storagetest.MustPut(t, d, k, k)
		}
		keys = append(keys, k)
	}
	keys = append(keys, "bad/../key")
	res, err := d.DeleteMany(bg, keys)
	if err != nil || len(res) != len(keys) {
		t.Fatalf("%d results, %v", len(res), err)
	}
	for i, r := range res {
		if r.Key != keys[i] {
			t.Fatalf("result %d names %q, want %q", i, r.Key, keys[i])
		}
		if i == len(keys)-1 {
			storagetest.WantKind(t, "invalid key in delete-many", r.Err, storage.ErrInvalidArgument)
			continue
		}
		if r.Err != nil {
			t.Fatalf("delete %q: %v", r.Key, r.Err)
		}
	}
	page, err := d.List(bg, storage.ListOptions{})
	if err != nil || len(page.Objects) != 0 {
		t.Fatalf("left: %+v, %v", page.Objects, err)
	}
}

func TestNoCredentialsIsPermissionDenied(t *testing.T) {
	clearEnv(t)
	// Keep DefaultAzureCredential from finding anything real on this machine.
	for _, v := range []string{"AZURE_CLIENT_ID", "AZURE_TENANT_ID", "AZURE_CLIENT_SECRET", "AZURE_FEDERATED_TOKEN_FILE", "AZURE_CLIENT_CERTIFICATE_PATH", "AZURE_USERNAME", "IDENTITY_ENDPOINT", "MSI_ENDPOINT"} {
		t.Setenv(v, "")
	}
	t.Setenv("AZURE_TOKEN_CREDENTIALS", "dev") // developer tools only: no IMDS probe
	t.Setenv("PATH", t.TempDir())              // and none of them installed
	d, err := Open(bg, loc("abc", "", map[string]string{OptAccount: "retainnoaccount", OptConditionalDelete: "on"}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(bg, 20*time.Second)
	defer cancel()
	_, err = d.Stat(ctx, "k")
	storagetest.WantKind(t, "stat without any credentials", err, storage.ErrPermissionDenied)
	t.Log(err)
}
