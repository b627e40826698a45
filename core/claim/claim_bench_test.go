package claim_test

import (
	"os"
	"runtime"
	"testing"

	"github.com/retain-dev/retain/adapters/localfs"
	"github.com/retain-dev/retain/core"
	"github.com/retain-dev/retain/core/claim"
	"github.com/retain-dev/retain/core/memstore"
	"github.com/retain-dev/retain/internal/adapterbench"
)

// TestMain lets this test binary serve localfs as a plugin, as the retain
// binary does (`<exe> __adapter-plugin localfs`), for the claim benchmark
// through the plugin boundary.
func TestMain(m *testing.M) {
	adapterbench.Dispatch(localfs.Adapter)
	os.Exit(m.Run())
}

// BenchmarkAcquireRelease is one claim cycle, claim.Acquire then
// Handle.Release, on memstore, on localfs in process and on localfs through
// the plugin. The driver is wrapped in core.Counting (for the plugin, the
// host-side client: it counts requests crossing the boundary), and req/op
// is the requests per cycle: 2 where the adapter has conditional delete
// (create-if-absent, then delete-if-version).
func BenchmarkAcquireRelease(b *testing.B) {
	b.Run("memstore", func(b *testing.B) {
		adapterbench.ClaimCycle(b, core.NewCounting(memstore.New()), core.ScopeGlobal)
	})
	for _, nd := range adapterbench.Drivers(localfs.Adapter) {
		b.Run("localfs-"+nd.Name, func(b *testing.B) {
			if runtime.GOOS != "linux" {
				b.Skip("localfs is linux-only")
			}
			loc := core.Location{Scheme: "file", Path: b.TempDir()}
			adapterbench.ClaimCycle(b, core.NewCounting(nd.Open(b, loc)), claim.ScopeFor(loc))
		})
	}
}
