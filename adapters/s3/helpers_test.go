package s3

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/storagetest"
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
	emulator.IsolateAWS(t, e.Env())
	c := rawClient(e)
	if _, err := c.CreateBucket(bg, &awss3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatalf("create bucket %s on %s: %v", bucket, e.Name, err)
	}
	return c
}

// openT opens the adapter on s3://bucket/prefix?query.
func openT(t testing.TB, uri string) *Driver {
	t.Helper()
	loc, err := storage.ParseLocation(uri)
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

func putS(d storage.Driver, key, body string, mode storage.PutMode, ifv string) (storage.Info, error) {
	return d.Put(bg, key, strings.NewReader(body), storage.PutOptions{Mode: mode, IfVersion: ifv})
}

func readS(d storage.Driver, key string) (string, storage.Info, error) {
	r, err := d.Get(bg, key)
	if err != nil {
		return "", storage.Info{}, err
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	return string(b), r.Info, err
}

func wantBody(t testing.TB, d storage.Driver, key, want string) storage.Info {
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

func wantAbsent(t testing.TB, d storage.Driver, key string) {
	t.Helper()
	_, err := d.Stat(bg, key)
	storagetest.WantKind(t, "stat "+key, err, storage.ErrNotFound)
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
