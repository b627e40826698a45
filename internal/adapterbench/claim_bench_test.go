package adapterbench_test

import (
	"runtime"
	"testing"

	"github.com/retain-dev/retain/adapters/localfs"
	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/claim"
	"github.com/retain-dev/retain/core/storage/memstore"
	"github.com/retain-dev/retain/core/storage/storagetest"
	"github.com/retain-dev/retain/internal/adapterbench"
)

// BenchmarkAcquireRelease is one claim cycle, claim.Acquire then
// Handle.Release, on memstore, on localfs in process and on localfs through
// the plugin. The driver is wrapped in storagetest.Counting (for the plugin, the
// host-side client: it counts requests crossing the boundary), and req/op
// is the requests per cycle: 2 where the adapter has conditional delete
// (create-if-absent, then delete-if-version).
func BenchmarkAcquireRelease(b *testing.B) {
	b.Run("memstore", func(b *testing.B) {
		adapterbench.ClaimCycle(b, storagetest.NewCounting(memstore.New()), storage.ScopeGlobal)
	})
	for _, nd := range adapterbench.Drivers(localfs.Adapter) {
		b.Run("localfs-"+nd.Name, func(b *testing.B) {
			if runtime.GOOS != "linux" {
				b.Skip("localfs is linux-only")
			}
			loc := storage.Location{Scheme: "file", Path: b.TempDir()}
			adapterbench.ClaimCycle(b, storagetest.NewCounting(nd.Open(b, loc)), claim.ScopeFor(loc))
		})
	}
}
