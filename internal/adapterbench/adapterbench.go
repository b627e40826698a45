// Package adapterbench is benchmark support for adapter packages, imported
// only by their tests. It opens an adapter's driver in process or through
// the plugin boundary (the test binary re-executed as a plugin of itself,
// as the conformance suite and the retain binary run their adapters) and runs a
// benchmark both ways on a driver wrapped in storagetest.Counting (Run); it has the
// measured loops the adapters share, each reporting req/op on a counting
// driver (ops.go); and the raw unix-socket round trip under the boundary
// (rawsock.go). A test binary that uses Plugin or RawRoundTripProcesses
// calls Dispatch first in its TestMain.
package adapterbench

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/retain-dev/retain/conformance"
	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/storagetest"
)

// Opener opens a driver on loc, closed when the benchmark ends.
type Opener func(tb testing.TB, loc storage.Location) storage.Driver

// InProcess opens a's driver in this process.
func InProcess(a storage.Adapter) Opener {
	return func(b testing.TB, loc storage.Location) storage.Driver {
		b.Helper()
		d, err := a.Open(context.Background(), loc)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { d.Close() })
		return d
	}
}

// Plugin opens the adapter named adapter through the plugin boundary, as
// the conformance suite does: this test binary launched as a plugin of
// itself, which Dispatch serves.
func Plugin(adapter string) Opener {
	return func(b testing.TB, loc storage.Location) storage.Driver {
		b.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		d, err := (&conformance.Config{Adapter: adapter}).Open(ctx, loc)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { d.Close() })
		return d
	}
}

// Named is one way of opening an adapter's driver, named for its
// sub-benchmark.
type Named struct {
	Name string
	Open Opener
}

// Drivers are the two ways of reaching a's driver: "inprocess" and
// "plugin".
func Drivers(a storage.Adapter) []Named {
	return []Named{{"inprocess", InProcess(a)}, {"plugin", Plugin(a.Name)}}
}

// Run runs fn as a sub-benchmark for each of Drivers(a), /inprocess and
// /plugin, on the driver opened at loc that way and wrapped in
// storagetest.Counting (for the plugin, around the host-side client: it counts
// the requests crossing the boundary).
func Run(b *testing.B, a storage.Adapter, loc storage.Location, fn func(b *testing.B, d storage.Driver)) {
	for _, nd := range Drivers(a) {
		b.Run(nd.Name, func(b *testing.B) {
			fn(b, storagetest.NewCounting(nd.Open(b, loc)))
		})
	}
}

// Dispatch makes this test binary what Plugin and RawRoundTripProcesses
// start, when its arguments or environment say so, and exits: a plugin
// serving adapters or a conformance worker (conformance.Dispatch), or an
// echo server. Otherwise it returns.
func Dispatch(adapters ...storage.Adapter) {
	conformance.Dispatch(profiled(adapters))
	if sock := os.Getenv(echoEnv); sock != "" {
		os.Exit(serveEcho(sock))
	}
}
