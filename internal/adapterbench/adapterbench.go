// Package adapterbench is benchmark support for adapter packages, imported
// only by their tests. It opens an adapter's driver in process or through
// the plugin boundary (the test binary re-executed as `__adapterbench-plugin
// <name>`, as the retain binary serves its bundled adapters) and runs a
// benchmark both ways on a driver wrapped in testkit.Counting (Run); it has the
// measured loops the adapters share, each reporting req/op on a counting
// driver (ops.go); and the raw unix-socket round trip under the boundary
// (rawsock.go). A test binary that uses Plugin or RawRoundTripProcesses
// calls Dispatch first in its TestMain.
package adapterbench

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/retain-dev/retain/sdk/conformance"
	"github.com/retain-dev/retain/sdk/core"
	"github.com/retain-dev/retain/sdk/pluginproto"
	"github.com/retain-dev/retain/sdk/testkit"
)

// pluginSubcommand is what Plugin runs this test binary with.
const pluginSubcommand = "__adapterbench-plugin"

// Opener opens a driver on loc, closed when the benchmark ends.
type Opener func(tb testing.TB, loc core.Location) core.Driver

// InProcess opens a's driver in this process.
func InProcess(a core.Adapter) Opener {
	return func(b testing.TB, loc core.Location) core.Driver {
		b.Helper()
		d, err := a.Open(context.Background(), loc)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { d.Close() })
		return d
	}
}

// Plugin opens the adapter named adapter through the plugin boundary: this
// test binary launched as `<exe> __adapterbench-plugin <adapter>`, which
// Dispatch serves.
func Plugin(adapter string) Opener {
	return func(b testing.TB, loc core.Location) core.Driver {
		b.Helper()
		exe, err := os.Executable()
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pluginproto.Launch(ctx, pluginproto.LaunchConfig{
			Adapter:  adapter,
			Path:     exe,
			Args:     []string{pluginSubcommand, adapter},
			Location: loc,
		})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { c.Close() })
		return c
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
func Drivers(a core.Adapter) []Named {
	return []Named{{"inprocess", InProcess(a)}, {"plugin", Plugin(a.Name)}}
}

// Run runs fn as a sub-benchmark for each of Drivers(a), /inprocess and
// /plugin, on the driver opened at loc that way and wrapped in
// testkit.Counting (for the plugin, around the host-side client: it counts
// the requests crossing the boundary).
func Run(b *testing.B, a core.Adapter, loc core.Location, fn func(b *testing.B, d core.Driver)) {
	for _, nd := range Drivers(a) {
		b.Run(nd.Name, func(b *testing.B) {
			fn(b, testkit.NewCounting(nd.Open(b, loc)))
		})
	}
}

// Dispatch makes this test binary what Plugin and RawRoundTripProcesses
// start, when its arguments or environment say so, and exits: a plugin
// serving adapters (conformance.Dispatch, as the adapters' own TestMain
// use) or an echo server. Otherwise it returns.
func Dispatch(adapters ...core.Adapter) {
	if len(os.Args) >= 3 && os.Args[1] == pluginSubcommand {
		for _, a := range adapters {
			if a.Name == os.Args[2] {
				pluginproto.Serve(a)
				os.Exit(0)
			}
		}
		fmt.Fprintf(os.Stderr, "adapterbench: this test binary serves no adapter %q\n", os.Args[2])
		os.Exit(2)
	}
	conformance.Dispatch(adapters)
	if sock := os.Getenv(echoEnv); sock != "" {
		os.Exit(serveEcho(sock))
	}
}
