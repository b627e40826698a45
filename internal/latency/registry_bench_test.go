package latency

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/retain-dev/retain/core/checkpoint"
	"github.com/retain-dev/retain/core/checkpoint/registry"
	"github.com/retain-dev/retain/core/storage"
)

// BenchmarkSegmentedRegistry measures the registry's segmented form
// (format 3, forced with RETAIN_REGISTRY_SPILL_BYTES=0) behind the proxy:
// with live checkpoints already there (created without the delay, 2
// tables), one more checkpoint create, and checkpoint list (the head's
// buckets and rows objects, each checkpoint's pins):
//
//	go test -run '^$' -bench SegmentedRegistry -benchtime 1x ./internal/latency/
func BenchmarkSegmentedRegistry(b *testing.B) {
	b.Setenv(registry.SpillEnv, "0")
	for _, live := range []int{10, 100} {
		b.Run(fmt.Sprintf("live=%d", live), func(b *testing.B) {
			st := NewS3(b, rtt)
			ctx := context.Background()
			if err := UploadCopies(st.Fast, fixtures+"/v2-appends.lance", 2); err != nil {
				b.Fatal(err)
			}
			for i := range live {
				if _, err := checkpoint.Create(ctx, st.Fast, fmt.Sprintf("hourly/%04d", i), ""); err != nil {
					b.Fatal(err)
				}
			}
			created := 0
			for _, op := range []struct {
				name string
				run  func(s *storage.Store) error
			}{
				{"checkpoint-create", func(s *storage.Store) error {
					created++
					_, err := checkpoint.Create(ctx, s, fmt.Sprintf("adhoc/%d", created), "")
					return err
				}},
				{"checkpoint-list", func(s *storage.Store) error { _, _, err := checkpoint.List(ctx, s); return err }},
			} {
				b.Run(op.name, func(b *testing.B) {
					var elapsed time.Duration
					var reqs int64
					for b.Loop() {
						st.Proxy.Reset()
						start := time.Now()
						if err := op.run(st.Slow); err != nil {
							b.Fatal(err)
						}
						elapsed += time.Since(start)
						reqs += st.Proxy.Stats().Requests
					}
					n := float64(b.N)
					b.ReportMetric(float64(elapsed)/float64(rtt)/n, "rtt/op")
					b.ReportMetric(float64(reqs)/n, "requests/op")
				})
			}
		})
	}
}
