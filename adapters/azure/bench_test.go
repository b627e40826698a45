package azure

import (
	"testing"

	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/internal/adapterbench"
)

// Benchmarks of the adapter against Azurite, in process and through the
// plugin boundary (this test binary re-executed as a plugin of itself serving azure,
// as the retain binary serves its bundled adapters). Each driver is
// wrapped in storagetest.Counting so every benchmark reports req/op: the requests
// that reached the driver (for the plugin, the ones crossing the boundary).
// The runner and the measured loops are adapterbench's.

// benchStore starts Azurite with a container and points the environment
// (inherited by the plugin process) at it.
func benchStore(b *testing.B) storage.Location {
	b.Helper()
	az, svc := azurite(b)
	makeContainer(b, svc, "bench")
	clearEnv(b)
	b.Setenv(envConnectionString, az.ConnectionString)
	return loc("bench", "b", map[string]string{OptConditionalDelete: "on"})
}

// BenchmarkPutCreateDelete is a create-if-absent Put of 1 KiB (one Put Blob
// with If-None-Match: *) and an unconditional Delete per op.
func BenchmarkPutCreateDelete(b *testing.B) {
	adapterbench.Run(b, Adapter, benchStore(b), adapterbench.PutCreateDelete)
}

// BenchmarkClaimCycle is claim.Acquire then Handle.Release: create-if-absent
// of the claim, then delete-if-version.
func BenchmarkClaimCycle(b *testing.B) {
	adapterbench.Run(b, Adapter, benchStore(b), func(b *testing.B, d storage.Driver) {
		adapterbench.ClaimCycle(b, d, storage.ScopeGlobal)
	})
}

// BenchmarkList1000 lists one page of 1,000 keys (one List Blobs request).
func BenchmarkList1000(b *testing.B) {
	loc := benchStore(b)
	adapterbench.Fill1000(b, adapterbench.InProcess(Adapter)(b, loc))
	adapterbench.Run(b, Adapter, loc, func(b *testing.B, d storage.Driver) { adapterbench.List1000(b, d, false) })
}
