package s3

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/retain-dev/retain/core"
	"github.com/retain-dev/retain/core/claim"
	"github.com/retain-dev/retain/internal/emulator"
	"github.com/retain-dev/retain/pluginproto"
)

// Benchmarks of the s3 adapter in process against the same adapter through
// the plugin boundary (this test binary re-executed as `__adapter-plugin
// s3`, as the retain binary serves its bundled adapters), on each emulator.
// Every driver is wrapped in core.Counting, so each reports req/op: the
// contract calls per op (the S3 requests behind them are in the notes of
// each benchmark). Run with e.g.
//
//	go test -p 1 -run '^$' -bench . -benchtime 200x ./adapters/s3

var benchEmulators = []struct {
	name  string
	start func(testing.TB) *emulator.S3
}{
	{"versitygw", emulator.Versitygw},
	{"gofakes3", emulator.GoFakeS3},
}

var benchModes = []struct {
	name string
	open func(b *testing.B, loc core.Location) core.Driver
}{
	{"inprocess", openInProcess},
	{"plugin", openPlugin},
}

func openInProcess(b *testing.B, loc core.Location) core.Driver {
	b.Helper()
	d, err := Open(context.Background(), loc)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { d.Close() })
	return d
}

func openPlugin(b *testing.B, loc core.Location) core.Driver {
	b.Helper()
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pluginproto.Launch(ctx, pluginproto.LaunchConfig{
		Adapter:  Name,
		Path:     exe,
		Args:     []string{pluginproto.BundledSubcommand, Name},
		Location: loc,
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return c
}

// benchEach runs fn for every emulator and mode on a fresh prefix of a
// bucket made for it; setup (if set) runs once per emulator, before.
func benchEach(b *testing.B, setup func(b *testing.B, d core.Driver), fn func(b *testing.B, c *core.Counting)) {
	for _, em := range benchEmulators {
		b.Run(em.name, func(b *testing.B) {
			e := em.start(b)
			useEmulator(b, e, "bench")
			loc := core.Location{Scheme: Scheme, Bucket: "bench", Prefix: "b"}
			if setup != nil {
				setup(b, openInProcess(b, loc))
			}
			for _, m := range benchModes {
				b.Run(m.name, func(b *testing.B) {
					c := core.NewCounting(m.open(b, loc))
					fn(b, c)
					b.ReportMetric(float64(c.Counts().Total())/float64(b.N), "req/op")
				})
			}
		})
	}
}

// BenchmarkPutCreateDelete: a create-if-absent Put of 1 KiB (PutObject with
// If-None-Match: *) and an unconditional Delete (DeleteObject) per op.
func BenchmarkPutCreateDelete(b *testing.B) {
	body := bytes.Repeat([]byte("x"), 1024)
	benchEach(b, nil, func(b *testing.B, c *core.Counting) {
		ctx := context.Background()
		for b.Loop() {
			if _, err := c.Put(ctx, "bench/cas", bytes.NewReader(body), core.PutOptions{Mode: core.PutCreateIfAbsent}); err != nil {
				b.Fatal(err)
			}
			if err := c.Delete(ctx, "bench/cas", core.DeleteOptions{}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkClaimCycle: acquire and release the retention claim. Acquire is
// one create-if-absent; Release is one delete-if-version where that is
// native (versitygw: HeadObject + DeleteObject, since versitygw answers a
// conditional delete of a missing key with success), or Get + Delete
// (verify, then an unconditional delete) where it is none (gofakes3).
func BenchmarkClaimCycle(b *testing.B) {
	benchEach(b, nil, func(b *testing.B, c *core.Counting) {
		ctx := context.Background()
		s, err := core.NewStore(ctx, Name, c)
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			h, err := claim.Acquire(ctx, s, claim.Request{Action: "bench", Scope: core.ScopeGlobal})
			if err != nil {
				b.Fatal(err)
			}
			if err := h.Release(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkList1000: one ListObjectsV2 page of 1,000 keys.
func BenchmarkList1000(b *testing.B) {
	fill := func(b *testing.B, d core.Driver) {
		ctx := context.Background()
		for i := range 1000 {
			if _, err := d.Put(ctx, fmt.Sprintf("bench/list/%04d", i), bytes.NewReader([]byte("x")), core.PutOptions{}); err != nil {
				b.Fatal(err)
			}
		}
	}
	benchEach(b, fill, func(b *testing.B, c *core.Counting) {
		ctx := context.Background()
		for b.Loop() {
			page, err := c.List(ctx, core.ListOptions{Prefix: "bench/list/", PageSize: 1000})
			if err != nil {
				b.Fatal(err)
			}
			if len(page.Objects) != 1000 || page.More {
				b.Fatalf("listed %d objects, more=%v", len(page.Objects), page.More)
			}
		}
	})
}
