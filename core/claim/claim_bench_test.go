package claim_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/retain-dev/retain/adapters/localfs"
	"github.com/retain-dev/retain/core"
	"github.com/retain-dev/retain/core/claim"
	"github.com/retain-dev/retain/core/memstore"
	"github.com/retain-dev/retain/pluginproto"
)

// TestMain lets this test binary serve localfs as a plugin, as the retain
// binary does (`<exe> __adapter-plugin localfs`), for the claim benchmark
// through the plugin boundary.
func TestMain(m *testing.M) {
	if len(os.Args) == 3 && os.Args[1] == pluginproto.BundledSubcommand {
		if err := pluginproto.ServeBundled([]core.Adapter{localfs.Adapter}, os.Args[2]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
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
		benchCycle(b, memstore.New(), claim.Request{})
	})
	b.Run("localfs-inprocess", func(b *testing.B) {
		skipNoLocalfs(b)
		loc := core.Location{Scheme: "file", Path: b.TempDir()}
		d, err := localfs.Adapter.Open(context.Background(), loc)
		if err != nil {
			b.Fatal(err)
		}
		benchCycle(b, d, claim.Request{Scope: claim.ScopeFor(loc)})
	})
	b.Run("localfs-plugin", func(b *testing.B) {
		skipNoLocalfs(b)
		exe, err := os.Executable()
		if err != nil {
			b.Fatal(err)
		}
		loc := core.Location{Scheme: "file", Path: b.TempDir()}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pluginproto.Launch(ctx, pluginproto.LaunchConfig{
			Adapter:  "localfs",
			Path:     exe,
			Args:     []string{pluginproto.BundledSubcommand, "localfs"},
			Location: loc,
		})
		if err != nil {
			b.Fatal(err)
		}
		benchCycle(b, c, claim.Request{Scope: claim.ScopeFor(loc)})
	})
}

func skipNoLocalfs(b *testing.B) {
	if runtime.GOOS != "linux" {
		b.Skip("localfs is linux-only")
	}
}

// benchCycle acquires and releases the claim on d (which it closes), and
// reports the requests per cycle that reached d.
func benchCycle(b *testing.B, d core.Driver, req claim.Request) {
	ctx := context.Background()
	c := core.NewCounting(d)
	s, err := core.NewStore(ctx, "bench", c)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	req.Action, req.Actor = "bench", "bench@host"
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
	b.ReportMetric(float64(c.Counts().Total()-before)/float64(b.N), "req/op")
}
