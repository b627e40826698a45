package gcs

import (
	"testing"

	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/internal/adapterbench"
)

// Benchmarks of the gcs adapter against fake-gcs-server (in this process,
// over loopback HTTP), in process and through the plugin boundary (this
// test binary re-executed as a plugin of itself serving gcs, as the retain binary
// serves its bundled adapters). The driver is wrapped in storagetest.Counting so
// each reports req/op: the calls that reached the driver (for the plugin,
// the calls crossing the boundary), not the HTTP requests to GCS. The
// runner and the measured loops are adapterbench's.

// benchLoc starts the emulator with a bucket, points this process and its
// plugin children at it, and returns a location on prefix there.
func benchLoc(b *testing.B, prefix string) storage.Location {
	startEmu(b, "retain-bench")
	return storage.Location{Scheme: Scheme, Bucket: "retain-bench", Prefix: prefix}
}

// BenchmarkPutCreateDelete is a create-if-absent Put of 1 KiB and an
// unconditional Delete per op.
func BenchmarkPutCreateDelete(b *testing.B) {
	adapterbench.Run(b, Adapter, benchLoc(b, "put"), adapterbench.PutCreateDelete)
}

// BenchmarkClaimCycle is claim.Acquire then Handle.Release: create-if-absent
// of the claim object, then delete-if-version (the probe found it honoured).
func BenchmarkClaimCycle(b *testing.B) {
	adapterbench.Run(b, Adapter, benchLoc(b, "claim"), func(b *testing.B, d storage.Driver) {
		adapterbench.ClaimCycle(b, d, storage.ScopeGlobal)
	})
}

// BenchmarkList1000 lists one page of 1,000 keys, filled once.
func BenchmarkList1000(b *testing.B) {
	loc := benchLoc(b, "list")
	adapterbench.Fill1000(b, adapterbench.InProcess(Adapter)(b, loc))
	adapterbench.Run(b, Adapter, loc, func(b *testing.B, d storage.Driver) { adapterbench.List1000(b, d, false) })
}
