package pluginproto_test

import (
	"testing"

	"github.com/retain-dev/retain/core"
	"github.com/retain-dev/retain/internal/adapterbench"
	"github.com/retain-dev/retain/pluginproto"
)

// The benchmarks are adapterbench's loops, written against core.Driver, so
// the same body measures a driver in process and the same driver through a
// plugin: add a mode to pluginModes that serves it, launch it with
// pluginproto.LaunchMode and call the loop with each. (This file is an
// external test package because adapterbench imports pluginproto.)

// BenchmarkRawUnixSocketRoundTrip is the floor: a 1 KiB echo over a unix
// socket between two goroutines of one process (the same code as localfs's
// BenchmarkRawUnixSocketRoundTrip/goroutines).
func BenchmarkRawUnixSocketRoundTrip(b *testing.B) { adapterbench.RawRoundTripGoroutines(b) }

func BenchmarkPluginGet1KiB(b *testing.B) { adapterbench.Get1KiB(b, benchPlugin(b)) }

func BenchmarkPluginPutCreateDelete(b *testing.B) {
	adapterbench.PutCreateDelete(b, benchPlugin(b))
}

func BenchmarkPluginList1000(b *testing.B) {
	d := benchPlugin(b)
	adapterbench.Fill1000(b, d)
	adapterbench.List1000(b, d, false)
}

// benchPlugin launches this test binary as a plugin serving the in-test
// memory driver. It is not wrapped in core.Counting, so these benchmarks
// report no req/op.
func benchPlugin(b *testing.B) core.Driver { return pluginproto.LaunchMode(b, "mem") }
