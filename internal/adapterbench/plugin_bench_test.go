package adapterbench_test

import (
	"os"
	"testing"

	"github.com/retain-dev/retain/adapters/localfs"
	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/memstore"
	"github.com/retain-dev/retain/internal/adapterbench"
)

// The benchmarks are adapterbench's loops, written against storage.Driver, so
// the same body measures a driver in process and the same driver through a
// plugin: the memory driver served by this test binary (Plugin).

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

// benchPlugin launches this test binary as a plugin serving memstore. It is
// not wrapped in storagetest.Counting, so these benchmarks report no req/op.
func benchPlugin(b *testing.B) storage.Driver {
	return adapterbench.Plugin(memstore.Adapter.Name)(b, storage.Location{Scheme: "mem", Path: "bench"})
}

// TestMain serves localfs and memstore as plugins of this test binary, for
// the benchmarks through the plugin boundary.
func TestMain(m *testing.M) {
	adapterbench.Dispatch(localfs.Adapter, memstore.Adapter)
	os.Exit(m.Run())
}
