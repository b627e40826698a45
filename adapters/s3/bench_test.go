package s3

import (
	"testing"

	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/internal/adapterbench"
	"github.com/retain-dev/retain/internal/emulator"
)

// Benchmarks of the s3 adapter in process against the same adapter through
// the plugin boundary (this test binary re-executed as a plugin of itself serving s3,
// as the retain binary serves its bundled adapters), on each emulator.
// Every driver is wrapped in storagetest.Counting, so each reports req/op: the
// contract calls per op (the S3 requests behind them are in the notes of
// each benchmark). The runner and the measured loops are adapterbench's.
// Run with e.g.
//
//	go test -p 1 -run '^$' -bench . -benchtime 200x ./adapters/s3

var benchEmulators = []struct {
	name  string
	start func(testing.TB) *emulator.S3
}{
	{"versitygw", emulator.Versitygw},
	{"gofakes3", emulator.GoFakeS3},
}

// benchEach runs fn in process and through the plugin for every emulator,
// on a prefix of a bucket made for it; with fill, the 1,000 keys
// BenchmarkList1000 lists are put first, once per emulator.
func benchEach(b *testing.B, fill bool, fn func(b *testing.B, d storage.Driver)) {
	for _, em := range benchEmulators {
		b.Run(em.name, func(b *testing.B) {
			useEmulator(b, em.start(b), "bench")
			loc := storage.Location{Scheme: Scheme, Bucket: "bench", Prefix: "b"}
			if fill {
				adapterbench.Fill1000(b, adapterbench.InProcess(Adapter)(b, loc))
			}
			adapterbench.Run(b, Adapter, loc, fn)
		})
	}
}

// BenchmarkPutCreateDelete: a create-if-absent Put of 1 KiB (PutObject with
// If-None-Match: *) and an unconditional Delete (DeleteObject) per op.
func BenchmarkPutCreateDelete(b *testing.B) {
	benchEach(b, false, adapterbench.PutCreateDelete)
}

// BenchmarkClaimCycle: acquire and release the retention claim. Acquire is
// one create-if-absent; Release is one delete-if-version where that is
// native (versitygw: HeadObject + DeleteObject, since versitygw answers a
// conditional delete of a missing key with success), or Get + Delete
// (verify, then an unconditional delete) where it is none (gofakes3).
func BenchmarkClaimCycle(b *testing.B) {
	benchEach(b, false, func(b *testing.B, d storage.Driver) { adapterbench.ClaimCycle(b, d, storage.ScopeGlobal) })
}

// BenchmarkList1000: one ListObjectsV2 page of 1,000 keys, which must say
// it is the last.
func BenchmarkList1000(b *testing.B) {
	benchEach(b, true, func(b *testing.B, d storage.Driver) { adapterbench.List1000(b, d, true) })
}
