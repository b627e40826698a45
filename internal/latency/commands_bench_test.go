package latency

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/retain-dev/retain/core/branch"
	"github.com/retain-dev/retain/core/checkpoint"
	"github.com/retain-dev/retain/core/daemon"
	"github.com/retain-dev/retain/core/lease"
	"github.com/retain-dev/retain/core/retention"
	"github.com/retain-dev/retain/core/rotation"
	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/tag"
)

const fixtures = "../../core/lance/testdata"

// rtt is the delay the proxy adds to every request: a realistic S3 round
// trip.
const rtt = 20 * time.Millisecond

// BenchmarkStoreCommands runs the store-wide commands on 30 tables × 3
// versions on versitygw behind a proxy adding 20 ms to every request, in
// the order an operator would: checkpoint create, show --deep, reconcile,
// cleanup preview --keep-last 1 (and the same by window rules) and cleanup
// run --keep-last 1 (the tables are uploaded again, at no delay, before
// each run), then the reapers of leases, expired tags and expired branches,
// checkpoint prune (dry run, then removing two), and a quiet daemon pass
// without and with a schedule whose slot is already taken. rtt/op is wall time
// in round trips of the injected delay; peak-in-flight is the most
// requests the proxy saw at once.
//
//	go test -run '^$' -bench StoreCommands -benchtime 1x ./internal/latency/
//
// RETAIN_LATENCY_TABLES=30,1000 runs the fleet-sized store too (minutes).
func BenchmarkStoreCommands(b *testing.B) {
	sizes := []int{30}
	if v := os.Getenv("RETAIN_LATENCY_TABLES"); v != "" {
		sizes = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				b.Fatalf("RETAIN_LATENCY_TABLES=%q: want table counts separated by commas", v)
			}
			sizes = append(sizes, n)
		}
	}
	for _, tables := range sizes {
		b.Run(fmt.Sprintf("tables=%d", tables), func(b *testing.B) { storeCommands(b, tables) })
	}
}

// logDir (RETAIN_LATENCY_LOG) is where each command's request log goes,
// one line per request: method, path, start and end in ms, status.
var logDir = os.Getenv("RETAIN_LATENCY_LOG")

func writeLog(tb testing.TB, file string, reqs []Request) {
	var sb strings.Builder
	for _, r := range reqs {
		fmt.Fprintf(&sb, "%s\t%s\t%.1f\t%.1f\t%d\n", r.Method, r.Path,
			float64(r.Start)/float64(time.Millisecond), float64(r.End)/float64(time.Millisecond), r.Status)
	}
	if err := os.WriteFile(file, []byte(sb.String()), 0o644); err != nil {
		tb.Fatal(err)
	}
}

func storeCommands(b *testing.B, tables int) {
	st := NewS3(b, rtt)
	upload := func() {
		if err := UploadCopies(st.Fast, fixtures+"/v2-appends.lance", tables); err != nil {
			b.Fatal(err)
		}
	}
	upload()
	ctx := context.Background()
	created := 0
	for _, op := range []struct {
		name  string
		setup func()
		run   func(s *storage.Store) error
	}{
		{"checkpoint-create", nil, func(s *storage.Store) error {
			created++
			_, err := checkpoint.Create(ctx, s, fmt.Sprintf("cp-%d", created), "")
			return err
		}},
		{"checkpoint-show-deep", nil, func(s *storage.Store) error { _, err := checkpoint.Show(ctx, s, "cp-1", true); return err }},
		{"reconcile", nil, func(s *storage.Store) error { _, err := checkpoint.Reconcile(ctx, s); return err }},
		{"cleanup-preview", nil, func(s *storage.Store) error {
			_, err := retention.Preview(ctx, s, retention.Policy{KeepLast: 1})
			return err
		}},
		{"cleanup-preview-rules", nil, func(s *storage.Store) error {
			// The same plan as cleanup-preview, by rules: they cost no request.
			_, err := retention.Preview(ctx, s, retention.Policy{KeepLast: 1,
				Tables: []retention.Rule{{Pattern: "t00*", KeepLast: 1}}, Branches: []retention.Rule{{Pattern: "session/*", KeepLast: 1}}})
			return err
		}},
		{"cleanup-run", upload, func(s *storage.Store) error {
			_, err := retention.Run(ctx, s, retention.Policy{KeepLast: 1}, retention.RunOptions{ConfirmWriteOutage: true})
			return err
		}},
		{"lease-reap", nil, func(s *storage.Store) error { _, err := lease.Reap(ctx, s, lease.ReapOptions{}); return err }},
		{"tag-reap", nil, func(s *storage.Store) error { _, err := tag.ReapExpired(ctx, s, tag.ReapOptions{}); return err }},
		{"branch-reap", nil, func(s *storage.Store) error { _, err := branch.ReapExpired(ctx, s, branch.ReapOptions{}); return err }},
		{"checkpoint-prune-dry-run", nil, func(s *storage.Store) error {
			_, err := retention.PruneCheckpoints(ctx, s, checkpoint.Options{}, checkpoint.PruneRequest{Match: []string{"cp-*"}, Policy: rotation.Policy{Last: 1}, DryRun: true})
			return err
		}},
		{"checkpoint-prune", func() {
			// Two more checkpoints (at no delay) for the prune to remove.
			for range 2 {
				created++
				if _, err := checkpoint.Create(ctx, st.Fast, fmt.Sprintf("cp-%d", created), ""); err != nil {
					b.Fatal(err)
				}
			}
		}, func(s *storage.Store) error {
			_, err := retention.PruneCheckpoints(ctx, s, checkpoint.Options{}, checkpoint.PruneRequest{Match: []string{"cp-*"}, Policy: rotation.Policy{Last: 1}})
			return err
		}},
		{"daemon-pass", func() {
			// Settled first (not counted): what is measured is a quiet pass
			// of a daemon that ran before.
			if err := pass(ctx, st.Slow, ""); err != nil {
				b.Fatal(err)
			}
		}, func(s *storage.Store) error { return pass(ctx, s, "") }},
		{"daemon-pass-scheduled", func() {
			// The slot's checkpoint is taken and the store settled (not
			// counted): what is measured is the quiet pass that finds the
			// slot taken, an hourly daemon's usual one.
			if err := pass(ctx, st.Slow, schedule); err != nil {
				b.Fatal(err)
			}
		}, func(s *storage.Store) error { return pass(ctx, s, schedule) }},
		{"daemon-pass-20-more-checkpoints", func() {
			// 20 more live checkpoints over every table (at no delay), and
			// the store settled (not counted): against daemon-pass-scheduled,
			// what each live checkpoint costs a quiet pass.
			for range 20 {
				created++
				if _, err := checkpoint.Create(ctx, st.Fast, fmt.Sprintf("cp-%d", created), ""); err != nil {
					b.Fatal(err)
				}
			}
			if err := pass(ctx, st.Slow, schedule); err != nil {
				b.Fatal(err)
			}
		}, func(s *storage.Store) error { return pass(ctx, s, schedule) }},
	} {
		b.Run(op.name, func(b *testing.B) {
			var elapsed time.Duration
			var reqs int64
			peak := 0
			for b.Loop() {
				if op.setup != nil {
					op.setup()
				}
				st.Proxy.Reset()
				st.Proxy.Log(logDir != "")
				start := time.Now()
				if err := op.run(st.Slow); err != nil {
					b.Fatal(err)
				}
				elapsed += time.Since(start)
				if logDir != "" {
					writeLog(b, filepath.Join(logDir, fmt.Sprintf("%d-%s.tsv", tables, op.name)), st.Proxy.Requests())
				}
				s := st.Proxy.Stats()
				reqs += s.Requests
				peak = max(peak, s.Peak)
			}
			n := float64(b.N)
			b.ReportMetric(float64(elapsed)/float64(rtt)/n, "rtt/op")
			b.ReportMetric(float64(reqs)/n, "requests/op")
			b.ReportMetric(float64(peak), "peak-in-flight")
			b.ReportMetric(peakRSSMiB(), "peak-RSS-MiB")
		})
	}
}

// schedule is an hourly series kept by rotation, for daemon-pass-scheduled.
const schedule = `checkpoints:
  - name: "hourly/{{.Time}}"
    every: 1h
    keep: {hourly: 24, daily: 7}
`

// daemons are the benchmark's daemons by config: one runs every pass of
// its config, as a long-lived daemon does (it remembers the ref files it
// read), and retention is due every pass.
var daemons = map[string]*daemon.Daemon{}

// pass runs one daemon pass (reconcile, schedules, lease, tag and branch
// reaping, retention by keep-last 1 with the writers stopped).
func pass(ctx context.Context, s *storage.Store, extra string) error {
	d := daemons[extra]
	if d == nil {
		cfg, err := daemon.ParseConfig("bench.yaml", []byte("interval: 1h\nretention:\n  keep_last: 1\n  every: 1ms\n  writers_stopped: true\n"+extra))
		if err != nil {
			return err
		}
		d = &daemon.Daemon{Store: s, Config: cfg}
		daemons[extra] = d
	}
	r := d.Pass(ctx)
	if !r.RetentionCompleted {
		return fmt.Errorf("pass: retention did not complete: %+v", r)
	}
	return nil
}

// peakRSSMiB is this process's peak resident set so far.
func peakRSSMiB() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Maxrss) / 1024 // Linux reports KiB
}
