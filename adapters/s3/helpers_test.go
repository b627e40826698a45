package s3

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/retain-dev/retain/core"
	"github.com/retain-dev/retain/internal/emulator"
)

var bg = context.Background()

// rawClient is an SDK client of the emulator, independent of the adapter.
func rawClient(e *emulator.S3) *awss3.Client {
	return awss3.New(awss3.Options{Region: e.Region, BaseEndpoint: aws.String(e.Endpoint), UsePathStyle: true,
		Credentials: aws.NewCredentialsCache(aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: e.AccessKey, SecretAccessKey: e.SecretKey}, nil
		}))})
}

// useEmulator points the AWS environment (inherited by plugin and worker
// processes) at e, isolated from any shared config on the machine, and
// creates the bucket.
func useEmulator(t testing.TB, e *emulator.S3, bucket string) *awss3.Client {
	t.Helper()
	isolateAWS(t)
	for k, v := range e.Env() {
		t.Setenv(k, v)
	}
	c := rawClient(e)
	if _, err := c.CreateBucket(bg, &awss3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatalf("create bucket %s on %s: %v", bucket, e.Name, err)
	}
	return c
}

// isolateAWS keeps the machine's AWS files, profile and instance metadata
// out of a test.
func isolateAWS(t testing.TB) {
	dir := t.TempDir()
	t.Setenv("AWS_CONFIG_FILE", dir+"/config")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", dir+"/credentials")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_PROFILE", "")
	for _, k := range []string{"AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL_S3", "AWS_ROLE_ARN", "AWS_WEB_IDENTITY_TOKEN_FILE"} {
		t.Setenv(k, "")
	}
}

// openT opens the adapter on s3://bucket/prefix?query.
func openT(t testing.TB, uri string) *Driver {
	t.Helper()
	loc, err := core.ParseLocation(uri)
	if err != nil {
		t.Fatal(err)
	}
	d, err := Open(bg, loc)
	if err != nil {
		t.Fatalf("open %s: %v", uri, err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func putS(d core.Driver, key, body string, mode core.PutMode, ifv string) (core.Info, error) {
	return d.Put(bg, key, strings.NewReader(body), core.PutOptions{Mode: mode, IfVersion: ifv})
}

func mustPut(t testing.TB, d core.Driver, key, body string) core.Info {
	t.Helper()
	info, err := putS(d, key, body, core.PutOverwrite, "")
	if err != nil {
		t.Fatalf("put %q: %v", key, err)
	}
	return info
}

func readS(d core.Driver, key string) (string, core.Info, error) {
	r, err := d.Get(bg, key)
	if err != nil {
		return "", core.Info{}, err
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	return string(b), r.Info, err
}

func wantBody(t testing.TB, d core.Driver, key, want string) core.Info {
	t.Helper()
	got, info, err := readS(d, key)
	if err != nil {
		t.Fatalf("get %q: %v", key, err)
	}
	if got != want {
		t.Fatalf("get %q = %q, want %q", key, got, want)
	}
	return info
}

func wantAbsent(t testing.TB, d core.Driver, key string) {
	t.Helper()
	_, err := d.Stat(bg, key)
	wantKind(t, "stat "+key, err, core.ErrNotFound)
}

func wantKind(t testing.TB, what string, err error, kind core.Kind) {
	t.Helper()
	if !errors.Is(err, kind) {
		t.Fatalf("%s: want %s, got %v (kind %s)", what, kind, err, core.KindOf(err))
	}
	var ce *core.Error
	if !errors.As(err, &ce) {
		t.Fatalf("%s: %T is not a *core.Error", what, err)
	}
}

// wrappedGoFakeS3 serves gofakes3 over a memory backend, with the backend
// and the HTTP handler wrapped by the test to provoke answers the stock
// emulators never give (409, lost responses, ignored conditions).
func wrappedGoFakeS3(t testing.TB, wrapBackend func(gofakes3.Backend) gofakes3.Backend, wrapHandler func(http.Handler) http.Handler) (*emulator.S3, gofakes3.Backend) {
	t.Helper()
	var be gofakes3.Backend = s3mem.New()
	if wrapBackend != nil {
		be = wrapBackend(be)
	}
	h := gofakes3.New(be, gofakes3.WithAutoBucket(true)).Server()
	if wrapHandler != nil {
		h = wrapHandler(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &emulator.S3{Name: "gofakes3 " + emulator.GoFakeS3Version + " (wrapped by the test)", Endpoint: srv.URL,
		Region: "us-east-1", AccessKey: "retain-test-access", SecretKey: "retain-test-secret-key"}, be
}
