//go:build linux

package localfs

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/storagetest"
	"github.com/retain-dev/retain/internal/adapterbench"
)

// Benchmarks of localfs in process against localfs through the plugin
// boundary (this test binary re-executed as a plugin of itself serving localfs, as
// the retain binary serves its bundled adapters). Every benchmark has an
// /inprocess and a /plugin sub-benchmark doing the same calls on a
// storage.Driver wrapped in storagetest.Counting, so each reports req/op too
// (adapterbench.Run; the measured loops are adapterbench's). The raw
// unix-socket round trip is here as well, so the boundary's cost and its
// floor come from the same `go test -bench` run. docs/performance.md has
// the commands and the figures.

// benchRoot is a store root for one benchmark, shared by its sub-benchmarks.
func benchRoot(b *testing.B) storage.Location {
	return storage.Location{Scheme: "file", Path: b.TempDir()}
}

// BenchmarkPutCreateDelete is a create-if-absent Put of 1 KiB and an
// unconditional Delete per op: localfs fsyncs the temp file and the
// directory for the create and the directory again for the delete.
func BenchmarkPutCreateDelete(b *testing.B) {
	adapterbench.Run(b, Adapter, benchRoot(b), adapterbench.PutCreateDelete)
}

// BenchmarkGet1KiB opens a 1 KiB object and reads it to the end.
func BenchmarkGet1KiB(b *testing.B) {
	adapterbench.Run(b, Adapter, benchRoot(b), adapterbench.Get1KiB)
}

// BenchmarkStat stats a 1 KiB object: a unary call through the plugin,
// where Get is a server stream, so the two show what the stream costs.
func BenchmarkStat(b *testing.B) {
	adapterbench.Run(b, Adapter, benchRoot(b), func(b *testing.B, d storage.Driver) {
		if _, err := d.Put(context.Background(), "bench/stat", bytes.NewReader(bytes.Repeat([]byte("x"), 1024)), storage.PutOptions{}); err != nil {
			b.Fatal(err)
		}
		adapterbench.Loop(b, d, func(ctx context.Context) error {
			if info, err := d.Stat(ctx, "bench/stat"); err != nil || info.Size != 1024 {
				return fmt.Errorf("stat: %+v, %v", info, err)
			}
			return nil
		})
	})
}

// BenchmarkList1000 lists one page of 1,000 keys. Both sub-benchmarks list
// the same directory tree, filled once.
func BenchmarkList1000(b *testing.B) {
	root := benchRoot(b)
	adapterbench.Fill1000(b, adapterbench.InProcess(Adapter)(b, root))
	adapterbench.Run(b, Adapter, root, func(b *testing.B, d storage.Driver) { adapterbench.List1000(b, d, false) })
}

// BenchmarkRawUnixSocketRoundTrip is the floor under the boundary: a 1 KiB
// write and a 1 KiB echo back over a unix socket, with no gRPC, TLS or
// protobuf. /goroutines echoes from another goroutine of this process (the
// same code as pluginproto's BenchmarkRawUnixSocketRoundTrip); /processes
// echoes from another process, as the plugin does.
func BenchmarkRawUnixSocketRoundTrip(b *testing.B) {
	b.Run("goroutines", adapterbench.RawRoundTripGoroutines)
	b.Run("processes", adapterbench.RawRoundTripProcesses)
}

// BenchmarkCleanupReads is a cleanup's read pattern on one table: list
// 1,000 manifests of 40 KB, read them all, stat them all
// (adapterbench.CleanupReads), in batches (/inprocess, /plugin) and, for
// comparison, key by key through the plugin (/plugin-keybykey: what a
// plugin without batch reads costs, the Store's fallback).
func BenchmarkCleanupReads(b *testing.B) {
	root := benchRoot(b)
	adapterbench.FillCleanup(b, adapterbench.InProcess(Adapter)(b, root))
	adapterbench.Run(b, Adapter, root, adapterbench.CleanupReads)
	b.Run("plugin-keybykey", func(b *testing.B) {
		d := adapterbench.Plugin(Adapter.Name)(b, root)
		adapterbench.CleanupReads(b, storagetest.NewCounting(struct{ storage.Driver }{d}))
	})
}
