package gcs

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/fsouza/fake-gcs-server/fakestorage"

	"github.com/retain-dev/retain/core"
	"github.com/retain-dev/retain/core/claim"
	"github.com/retain-dev/retain/internal/emulator"
	"github.com/retain-dev/retain/pluginproto"
)

// Benchmarks of the gcs adapter against fake-gcs-server (in this process,
// over loopback HTTP), in process and through the plugin boundary (this
// test binary re-executed as `__adapter-plugin gcs`, as the retain binary
// serves its bundled adapters). The driver is wrapped in core.Counting so
// each reports req/op: the calls that reached the driver (for the plugin,
// the calls crossing the boundary), not the HTTP requests to GCS.

var benchDrivers = []struct {
	name string
	open func(b *testing.B, loc core.Location) core.Driver
}{
	{"inprocess", benchOpenInProcess},
	{"plugin", benchOpenPlugin},
}

// benchEmu starts the emulator with a bucket and points this process and
// its plugin children at it.
func benchEmu(b *testing.B) *emulator.GCS {
	b.Helper()
	emu := emulator.FakeGCS(b)
	for k, v := range emu.Env() {
		b.Setenv(k, v)
	}
	emu.Server.CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: "retain-bench"})
	return emu
}

func benchOpenInProcess(b *testing.B, loc core.Location) core.Driver {
	b.Helper()
	d, err := Adapter.Open(context.Background(), loc)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { d.Close() })
	return d
}

func benchOpenPlugin(b *testing.B, loc core.Location) core.Driver {
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

func benchLoc(prefix string) core.Location {
	return core.Location{Scheme: Scheme, Bucket: "retain-bench", Prefix: prefix}
}

func reportReqs(b *testing.B, c *core.Counting, before int64) {
	b.ReportMetric(float64(c.Counts().Total()-before)/float64(b.N), "req/op")
}

// BenchmarkPutCreateDelete is a create-if-absent Put of 1 KiB and an
// unconditional Delete per op.
func BenchmarkPutCreateDelete(b *testing.B) {
	benchEmu(b)
	for _, bd := range benchDrivers {
		b.Run(bd.name, func(b *testing.B) {
			c := core.NewCounting(bd.open(b, benchLoc("put-"+bd.name)))
			ctx := context.Background()
			body := bytes.Repeat([]byte("x"), 1024)
			for b.Loop() {
				if _, err := c.Put(ctx, "bench/cas", bytes.NewReader(body), core.PutOptions{Mode: core.PutCreateIfAbsent}); err != nil {
					b.Fatal(err)
				}
				if err := c.Delete(ctx, "bench/cas", core.DeleteOptions{}); err != nil {
					b.Fatal(err)
				}
			}
			reportReqs(b, c, 0)
		})
	}
}

// BenchmarkClaimCycle is claim.Acquire then Handle.Release: create-if-absent
// of the claim object, then delete-if-version (the probe found it honoured).
func BenchmarkClaimCycle(b *testing.B) {
	benchEmu(b)
	for _, bd := range benchDrivers {
		b.Run(bd.name, func(b *testing.B) {
			ctx := context.Background()
			c := core.NewCounting(bd.open(b, benchLoc("claim-"+bd.name)))
			s, err := core.NewStore(ctx, Name, c)
			if err != nil {
				b.Fatal(err)
			}
			req := claim.Request{Action: "bench", Actor: "bench@host", Scope: core.ScopeGlobal}
			before := c.Counts().Total()
			for b.Loop() {
				h, err := claim.Acquire(ctx, s, req)
				if err != nil {
					b.Fatal(err)
				}
				if err := h.Release(ctx); err != nil {
					b.Fatal(err)
				}
			}
			reportReqs(b, c, before)
		})
	}
}

// BenchmarkList1000 lists one page of 1,000 keys, filled once.
func BenchmarkList1000(b *testing.B) {
	benchEmu(b)
	ctx := context.Background()
	loc := benchLoc("list")
	d, err := Open(ctx, loc)
	if err != nil {
		b.Fatal(err)
	}
	keys := make([]string, 1000)
	for i := range keys {
		keys[i] = fmt.Sprintf("bench/list/%04d", i)
	}
	// Fill 16 at a time.
	errs := make(chan error, len(keys))
	sem := make(chan struct{}, 16)
	for _, k := range keys {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			_, err := d.Put(ctx, k, bytes.NewReader([]byte("x")), core.PutOptions{})
			errs <- err
		}()
	}
	for range keys {
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
	}
	d.Close()
	for _, bd := range benchDrivers {
		b.Run(bd.name, func(b *testing.B) {
			c := core.NewCounting(bd.open(b, loc))
			for b.Loop() {
				page, err := c.List(ctx, core.ListOptions{Prefix: "bench/list/", PageSize: 1000})
				if err != nil {
					b.Fatal(err)
				}
				if len(page.Objects) != 1000 {
					b.Fatalf("listed %d objects", len(page.Objects))
				}
			}
			reportReqs(b, c, 0)
		})
	}
}
