package httpstore_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/retain-dev/retain/conformance"
	"github.com/retain-dev/retain/conformance/examples/httpstore"
	"github.com/retain-dev/retain/conformance/examples/httpstore/server"
	"github.com/retain-dev/retain/core/storage"
)

// testAdapters are what this test binary serves as plugins of itself and
// opens in its worker processes: the adapter, and a lying copy of it.
func testAdapters() []storage.Adapter {
	return []storage.Adapter{httpstore.Adapter, headThenPutAdapter}
}

func TestMain(m *testing.M) {
	// First: this binary is also the plugin and the racing workers.
	conformance.Dispatch(testAdapters())
	os.Exit(m.Run())
}

// startServer runs the object store on 127.0.0.1 and returns the store URI
// of its bucket.
func startServer(t *testing.T, cfg server.Config) (*server.Server, string) {
	t.Helper()
	srv := server.New(cfg, "bucket")
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	return srv, ts.URL + "/bucket"
}

// TestConformanceThroughPlugin runs the whole suite through the plugin
// boundary (this test binary serving the adapter), with 4 worker processes
// racing in the cross-process cases.
func TestConformanceThroughPlugin(t *testing.T) {
	_, store := startServer(t, server.Config{})
	conformance.RunTests(t, conformance.Config{
		Adapter: "httpstore", Adapters: testAdapters(), Store: store,
		Timeout: 2 * time.Minute, ReportDir: t.TempDir(), // the default rounds (767 with 4 processes)
	})
}

// TestConformanceOnBinary builds the plugin binary and runs the suite on it
// by path and digest, as a vendor or user would with
// `conformance run --adapter ./retain-adapter-httpstore --sha256 ...`.
func TestConformanceOnBinary(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "retain-adapter-httpstore")
	build := exec.Command("go", "build", "-o", bin, "./cmd/retain-adapter-httpstore")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	f, err := os.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	_, err = io.Copy(h, f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	digest := hex.EncodeToString(h.Sum(nil))
	_, store := startServer(t, server.Config{})
	rep := conformance.Check(t, conformance.Config{
		Adapter: bin, SHA256: digest, Store: store, Backend: "httpstore example server",
		Adapters: testAdapters(), Rounds: 20, Timeout: 2 * time.Minute, ReportDir: t.TempDir(),
	}, "httpstore-binary")
	if rep.AdapterSHA256 != digest {
		t.Fatalf("report names digest %s, built %s", rep.AdapterSHA256, digest)
	}
	if pass, _, _ := rep.Counts(); pass == 0 {
		t.Fatal("no case passed")
	}
}

// headThenPutAdapter is httpstore with one lie: it still declares
// create-if-absent native, but does it as a HEAD and then a plain PUT, so
// two writers can both see the key missing and both "create" it.
var headThenPutAdapter = storage.Adapter{
	Name:    "httpstore-head-then-put",
	Schemes: []string{"http"},
	Open: func(ctx context.Context, loc storage.Location) (storage.Driver, error) {
		d, err := httpstore.Adapter.Open(ctx, loc)
		if err != nil {
			return nil, err
		}
		return headThenPut{d}, nil
	},
}

type headThenPut struct{ storage.Driver }

func (h headThenPut) Put(ctx context.Context, key string, body io.Reader, opts storage.PutOptions) (storage.Info, error) {
	if opts.Mode != storage.PutCreateIfAbsent {
		return h.Driver.Put(ctx, key, body, opts)
	}
	if _, err := h.Driver.Stat(ctx, key); err == nil {
		return storage.Info{}, storage.Errorf("put", key, storage.ErrAlreadyExists, "exists")
	} else if storage.KindOf(err) != storage.ErrNotFound {
		return storage.Info{}, err
	}
	// The gap a real network puts between the check and the write.
	time.Sleep(2 * time.Millisecond)
	return h.Driver.Put(ctx, key, body, storage.PutOptions{})
}

// TestSuiteCatchesHeadThenPut: the suite must fail the lying adapter in the
// cross-process create race (and the linearizability check of its history).
func TestSuiteCatchesHeadThenPut(t *testing.T) {
	_, store := startServer(t, server.Config{})
	rep, err := conformance.Run(context.Background(), conformance.Config{
		Adapter: headThenPutAdapter.Name, Adapters: testAdapters(), Store: store,
		Run: "create-if-absent-race|linearizability", Rounds: 30, Timeout: time.Minute, ReportDir: t.TempDir(),
	})
	if err != nil {
		t.Fatal(err)
	}
	res, ok := rep.Case("create-if-absent-race")
	if !ok {
		t.Fatal("case create-if-absent-race did not run")
	}
	if res.Result != conformance.Fail {
		var sb strings.Builder
		rep.WriteTable(&sb)
		t.Fatalf("the suite passed create-if-absent done as HEAD then PUT:\n%s", sb.String())
	}
	t.Logf("caught by create-if-absent-race: %s", res.Reason)
}
