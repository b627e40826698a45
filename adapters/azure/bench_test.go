package azure

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/service"

	"github.com/retain-dev/retain/core"
	"github.com/retain-dev/retain/core/claim"
	"github.com/retain-dev/retain/internal/emulator"
	"github.com/retain-dev/retain/pluginproto"
)

// Benchmarks of the adapter against Azurite, in process and through the
// plugin boundary (this test binary re-executed as `__adapter-plugin
// azure`, as the retain binary serves its bundled adapters). Each driver is
// wrapped in core.Counting so every benchmark reports req/op: the requests
// that reached the driver (for the plugin, the ones crossing the boundary).

// benchStore starts Azurite with a container and points the environment
// (inherited by the plugin process) at it.
func benchStore(b *testing.B) core.Location {
	b.Helper()
	az := emulator.Azurite(b)
	for _, v := range []string{envAccount, envKey} {
		b.Setenv(v, "")
	}
	b.Setenv(envConnectionString, az.ConnectionString)
	svc, err := service.NewClientFromConnectionString(az.ConnectionString, nil)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := svc.CreateContainer(context.Background(), "bench", nil); err != nil {
		b.Fatal(err)
	}
	return core.Location{Scheme: Scheme, Bucket: "bench", Prefix: "b", Options: map[string]string{OptConditionalDelete: "on"}}
}

var benchDrivers = []struct {
	name string
	open func(b *testing.B, loc core.Location) core.Driver
}{
	{"inprocess", openInProcess},
	{"plugin", openPlugin},
}

func openInProcess(b *testing.B, loc core.Location) core.Driver {
	b.Helper()
	d, err := Adapter.Open(context.Background(), loc)
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
		Adapter: Name, Path: exe, Args: []string{pluginproto.BundledSubcommand, Name}, Location: loc,
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return c
}

func reportReqs(b *testing.B, c *core.Counting) {
	b.ReportMetric(float64(c.Counts().Total())/float64(b.N), "req/op")
}

// BenchmarkPutCreateDelete is a create-if-absent Put of 1 KiB (one Put Blob
// with If-None-Match: *) and an unconditional Delete per op.
func BenchmarkPutCreateDelete(b *testing.B) {
	loc := benchStore(b)
	body := bytes.Repeat([]byte("x"), 1024)
	for _, bd := range benchDrivers {
		b.Run(bd.name, func(b *testing.B) {
			c := core.NewCounting(bd.open(b, loc))
			ctx := context.Background()
			for b.Loop() {
				if _, err := c.Put(ctx, "bench/cia-"+bd.name, bytes.NewReader(body), core.PutOptions{Mode: core.PutCreateIfAbsent}); err != nil {
					b.Fatal(err)
				}
				if err := c.Delete(ctx, "bench/cia-"+bd.name, core.DeleteOptions{}); err != nil {
					b.Fatal(err)
				}
			}
			reportReqs(b, c)
		})
	}
}

// BenchmarkClaimCycle is claim.Acquire then Handle.Release: create-if-absent
// of the claim, then delete-if-version.
func BenchmarkClaimCycle(b *testing.B) {
	loc := benchStore(b)
	for _, bd := range benchDrivers {
		b.Run(bd.name, func(b *testing.B) {
			ctx := context.Background()
			sub, err := core.Sub(bd.open(b, loc), "claim-"+bd.name)
			if err != nil {
				b.Fatal(err)
			}
			c := core.NewCounting(sub)
			s, err := core.NewStore(ctx, Name, c)
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				h, err := claim.Acquire(ctx, s, claim.Request{Action: "bench", Scope: claim.ScopeFor(loc)})
				if err != nil {
					b.Fatal(err)
				}
				if err := h.Release(ctx); err != nil {
					b.Fatal(err)
				}
			}
			reportReqs(b, c)
		})
	}
}

// BenchmarkList1000 lists one page of 1,000 keys (one List Blobs request).
func BenchmarkList1000(b *testing.B) {
	loc := benchStore(b)
	ctx := context.Background()
	d, err := Adapter.Open(ctx, loc)
	if err != nil {
		b.Fatal(err)
	}
	keys := make([]string, 1000)
	for i := range keys {
		keys[i] = fmt.Sprintf("bench/list/%04d", i)
	}
	sem := make(chan error, 16)
	for i, k := range keys {
		if i >= 16 {
			if err := <-sem; err != nil {
				b.Fatal(err)
			}
		}
		go func() {
			_, err := d.Put(ctx, k, bytes.NewReader([]byte("x")), core.PutOptions{})
			sem <- err
		}()
	}
	for range min(16, len(keys)) {
		if err := <-sem; err != nil {
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
			reportReqs(b, c)
		})
	}
}
