package emulator

import (
	"fmt"
	"io"
	"net/http/httptest"
	"testing"

	"github.com/fsouza/fake-gcs-server/fakestorage"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// GoFakeS3 serves gofakes3 (memory backend) in this process on loopback.
// Plugin and worker processes reach it over HTTP like any endpoint. It
// honours If-None-Match and If-Match on PUT but ignores If-Match on DELETE:
// the conformance suite must catch an adapter that trusts it there.
func GoFakeS3(t testing.TB) *S3 {
	t.Helper()
	srv := httptest.NewServer(gofakes3.New(s3mem.New(), gofakes3.WithAutoBucket(true)).Server())
	t.Cleanup(srv.Close)
	return &S3{Name: "gofakes3 " + GoFakeS3Version, Endpoint: srv.URL, Region: "us-east-1",
		AccessKey: "retain-test-access", SecretKey: "retain-test-secret-key"}
}

// GCS is a GCS-compatible endpoint.
type GCS struct {
	Name string
	// Host is host:port for STORAGE_EMULATOR_HOST.
	Host   string
	Server *fakestorage.Server
}

// Env returns the variable that points the Go client at it.
func (g *GCS) Env() map[string]string { return map[string]string{"STORAGE_EMULATOR_HOST": g.Host} }

// FakeGCS serves fake-gcs-server (memory backend) in this process over
// plain HTTP on loopback, with the public host set so reads work.
func FakeGCS(t testing.TB) *GCS {
	t.Helper()
	port := FreePort(t)
	host := fmt.Sprintf("127.0.0.1:%d", port)
	srv, err := fakestorage.NewServerWithOptions(fakestorage.Options{
		Scheme: "http", Host: "127.0.0.1", Port: uint16(port), PublicHost: host, Writer: io.Discard,
	})
	if err != nil {
		t.Fatalf("starting fake-gcs-server: %v", err)
	}
	t.Cleanup(srv.Stop)
	return &GCS{Name: "fake-gcs-server " + FakeGCSServerVersion, Host: host, Server: srv}
}
