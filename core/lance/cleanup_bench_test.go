package lance

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/retain-dev/retain/adapters/localfs"
	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/storagetest"
	"github.com/retain-dev/retain/internal/adapterbench"
	"github.com/retain-dev/retain/internal/lancetest"
)

// The cleanup benchmark: a LanceDB table of 1,000 single-row appends,
// compacted once without cleanup (so the 1,000 small data files are
// referenced only by old versions), cleaned on identical copies by retain
// and by Lance's own cleanup (optimize with a cut-off of now; nothing is
// left to compact, so it is Lance's cleanup that runs). Both must leave the
// same files. Run:
//
//	go test -run '^$' -bench BenchmarkCleanup1000Versions -benchtime 1x ./core/lance/
//
// The dataset is built once (about a minute) into .tools/ and reused.
// retain runs in a child process (the test binary, TestCleanupBenchChild)
// so its peak RSS (VmHWM) is its own, not the benchmark's or Node's.
//
// RETAIN_CLEANUP_BENCH_PLUGIN=1 runs retain's side through the plugin
// boundary instead; =both runs it both ways in every iteration, on
// identical copies and in alternating order, and reports the ratio of
// the two: a machine whose speed drifts between invocations (a shared
// one does, by ±15 %) moves both sides of it alike.

const benchVersions = 1000

// benchCleanupDataset returns the cached dataset's directory (holding
// db/t.lance), building it on first use into a temporary folder renamed
// into place when complete (a concurrent builder loses the rename and
// uses the winner's).
func benchCleanupDataset(b *testing.B) string {
	tools := filepath.Dir(lancetest.Dir(b))
	dir := filepath.Join(tools, fmt.Sprintf("lance-cleanup-bench-%d-lancedb-%s", benchVersions, lancetest.LanceDBVersion))
	if _, err := os.Stat(dir); err == nil {
		return dir
	}
	tmp, err := os.MkdirTemp(tools, ".building-")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	start := time.Now()
	b.Logf("building the benchmark dataset (%d versions) into %s, once", benchVersions, dir)
	oracleRun(b, map[string]any{"kind": "build", "dir": filepath.Join(tmp, "db"), "table": "t", "skipVersions": true,
		"steps": []step{
			{"op": "create", "rows": 1},
			{"op": "addMany", "count": benchVersions - 1},
			// Compaction and index optimization only: a cut-off at the
			// epoch removes no version.
			{"op": "optimize", "cleanupOlderThanAt": 0},
		}})
	if err := os.Rename(tmp, dir); err != nil {
		if _, serr := os.Stat(dir); serr != nil {
			b.Fatal(err)
		}
	}
	b.Logf("built in %v", time.Since(start).Round(time.Second))
	return dir
}

// benchChildReport is what TestCleanupBenchChild prints.
type benchChildReport struct {
	PlanMs, ExecMs  float64
	Counts          storagetest.Counts
	Versions        int
	VersionsRemoved int
	FilesDeleted    int
	BytesDeleted    int64
	ManifestBytes   int64 // manifests read in full
	TxnBytes        int64 // transaction files read
	RemovedBytes    int64 // every removed version's manifest: what reading them all reads
	ManifestsRead   int64
	TxnsRead        int64
	Replayed        int
	LargestManifest int64
	RSSStartKB      int64
	HWMKB           int64  // peak RSS of the process (VmHWM)
	PeakHeapBytes   uint64 // heap objects, dead ones not yet swept included
	PeakLiveBytes   uint64 // heap marked live by a GC cycle
	PlanBytes       int    // the plan's JSON form, for scale
}

func BenchmarkCleanup1000Versions(b *testing.B) {
	src := benchCleanupDataset(b)
	mode := os.Getenv("RETAIN_CLEANUP_BENCH_PLUGIN")
	paired := mode == "both"
	// Sums over iterations, reported as means.
	var retainMs, planMs, lanceMs, reqs, hwm, heap, liveHeap, lanceRSS float64
	var pluginMs, pluginPlanMs float64
	var manifestBytes, txnBytes, removedBytes float64
	iters := 0
	for b.Loop() {
		b.StopTimer()
		tmp := b.TempDir()
		retainDir, lanceDir := filepath.Join(tmp, "retain"), filepath.Join(tmp, "lance")
		pluginDir := filepath.Join(tmp, "retain-plugin")
		copyTree(b, filepath.Join(src, "db"), filepath.Join(retainDir, "db"))
		copyTree(b, filepath.Join(src, "db"), filepath.Join(lanceDir, "db"))
		if paired {
			copyTree(b, filepath.Join(src, "db"), filepath.Join(pluginDir, "db"))
		}
		// Flush the copies: else retain's durable deletes (directory
		// fsyncs) wait for the copy's writeback, which Lance's unlinks
		// never do, and a faster plan only moves that wait into execute.
		syscall.Sync()
		b.StartTimer()

		// retain, in a child process; paired, both ways, the first of them
		// alternating.
		var rep, prep benchChildReport
		switch {
		case !paired:
			rep = runCleanupBenchChild(b, retainDir, mode != "")
		case iters%2 == 0:
			rep = runCleanupBenchChild(b, retainDir, false)
			prep = runCleanupBenchChild(b, pluginDir, true)
		default:
			prep = runCleanupBenchChild(b, pluginDir, true)
			rep = runCleanupBenchChild(b, retainDir, false)
		}

		// Lance's own cleanup on the identical copy.
		var lance struct {
			Before, After uint64
			Ms            float64
			MaxRssKb      int64
			RSSBeforeKb   int64 `json:"rssBeforeKb"`
			Stats         struct {
				Prune struct{ BytesRemoved, OldVersionsRemoved int64 }
			}
		}
		res := oracleRun(b, map[string]any{"kind": "optimize", "dir": filepath.Join(lanceDir, "db"), "table": "t",
			"olderThanAt": time.Now().UnixMilli(), "deleteUnverified": false})
		if err := json.Unmarshal(res[0], &lance); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()

		// Identical copies end identical: the same files removed.
		la := treeStat(b, filepath.Join(lanceDir, "db", "t.lance"))
		dirs := []string{retainDir}
		if paired {
			dirs = append(dirs, pluginDir)
		}
		for _, dir := range dirs {
			ra := treeStat(b, filepath.Join(dir, "db", "t.lance"))
			var onlyR, onlyL []string
			for k := range ra {
				if _, ok := la[k]; !ok && !isHint(k) {
					onlyR = append(onlyR, k)
				}
			}
			for k := range la {
				if _, ok := ra[k]; !ok && !isHint(k) {
					onlyL = append(onlyL, k)
				}
			}
			if len(onlyR)+len(onlyL) > 0 || lance.After != lance.Before {
				b.Errorf("after the cleanups: %d files only in retain's copy %s (%.3v), %d only in Lance's (%.3v); Lance's optimize v%d→v%d",
					len(onlyR), filepath.Base(dir), onlyR, len(onlyL), onlyL, lance.Before, lance.After)
			}
		}
		iters++
		pluginMs += prep.PlanMs + prep.ExecMs
		pluginPlanMs += prep.PlanMs
		retainMs += rep.PlanMs + rep.ExecMs
		planMs += rep.PlanMs
		lanceMs += lance.Ms
		reqs += float64(rep.Counts.Total()) / float64(rep.VersionsRemoved)
		hwm += float64(rep.HWMKB) / 1024
		heap += float64(rep.PeakHeapBytes) / (1 << 20)
		liveHeap += float64(rep.PeakLiveBytes) / (1 << 20)
		lanceRSS += float64(lance.MaxRssKb) / 1024
		manifestBytes += float64(rep.ManifestBytes)
		txnBytes += float64(rep.TxnBytes)
		removedBytes += float64(rep.RemovedBytes)
		b.Logf("retain: %d versions, %d removed, %d objects deleted (%d bytes), plan %.0f ms + execute %.0f ms; requests %+v (total %d); "+
			"%d manifests read in full (%d bytes, largest %d), %d transactions (%d bytes), %d versions replayed; every removed manifest: %d bytes; RSS at start %d KiB, peak %d KiB; peak Go heap %d KiB, peak live heap %d KiB; plan JSON %d bytes",
			rep.Versions, rep.VersionsRemoved, rep.FilesDeleted, rep.BytesDeleted, rep.PlanMs, rep.ExecMs, rep.Counts, rep.Counts.Total(),
			rep.ManifestsRead, rep.ManifestBytes, rep.LargestManifest, rep.TxnsRead, rep.TxnBytes, rep.Replayed, rep.RemovedBytes, rep.RSSStartKB, rep.HWMKB, rep.PeakHeapBytes>>10, rep.PeakLiveBytes>>10, rep.PlanBytes)
		b.Logf("Lance: optimize %.0f ms, removed %d versions and %d bytes; Node RSS with the table open %d KiB, peak %d KiB",
			lance.Ms, lance.Stats.Prune.OldVersionsRemoved, lance.Stats.Prune.BytesRemoved, lance.RSSBeforeKb, lance.MaxRssKb)
		b.StartTimer()
	}
	n := float64(iters)
	b.ReportMetric(retainMs/n, "retain-ms")
	b.ReportMetric(planMs/n, "retain-plan-ms")
	b.ReportMetric(lanceMs/n, "lance-ms")
	b.ReportMetric(lanceMs/retainMs, "lance/retain")
	b.ReportMetric(retainMs/lanceMs, "retain/lance")
	b.ReportMetric(manifestBytes/n, "manifest-bytes/op")
	b.ReportMetric(txnBytes/n, "txn-bytes/op")
	b.ReportMetric(removedBytes/n, "removed-manifest-bytes/op")
	b.ReportMetric((manifestBytes+txnBytes)/removedBytes, "read/removed-manifests")
	b.ReportMetric(reqs/n, "req/removed-version")
	b.ReportMetric(hwm/n, "retain-peak-RSS-MiB")
	b.ReportMetric(heap/n, "retain-peak-heap-MiB")
	b.ReportMetric(liveHeap/n, "retain-peak-live-heap-MiB")
	b.ReportMetric(lanceRSS/n, "lance-node-peak-RSS-MiB")
	if paired {
		b.ReportMetric(pluginMs/n, "plugin-ms")
		b.ReportMetric(pluginPlanMs/n, "plugin-plan-ms")
		b.ReportMetric(pluginMs/retainMs, "plugin/inprocess")
	}
}

// runCleanupBenchChild cleans the copy under dir with retain in a child
// process (TestCleanupBenchChild), through the plugin boundary or in
// process, and returns its report.
func runCleanupBenchChild(b *testing.B, dir string, plugin bool) benchChildReport {
	b.Helper()
	through := ""
	if plugin {
		through = "1"
	}
	cmd := storagetest.Child("TestCleanupBenchChild", []string{"RETAIN_CLEANUP_BENCH_DIR=" + dir, "RETAIN_CLEANUP_BENCH_CHILD_PLUGIN=" + through})
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		b.Fatalf("child: %v\n%s\n%s", err, out.String(), errb.String())
	}
	var rep benchChildReport
	_, js, ok := strings.Cut(out.String(), "BENCH ")
	if !ok {
		b.Fatalf("child printed no report:\n%s", out.String())
	}
	js, _, _ = strings.Cut(js, "\n")
	if err := json.Unmarshal([]byte(js), &rep); err != nil {
		b.Fatal(err)
	}
	return rep
}

// TestCleanupBenchChild is the benchmark's retain side, run in a child
// process: it plans and executes the cleanup of the dataset under
// $RETAIN_CLEANUP_BENCH_DIR through a counting localfs store and prints a
// report with its request counts and peak memory.
func TestCleanupBenchChild(t *testing.T) {
	dir := os.Getenv("RETAIN_CLEANUP_BENCH_DIR")
	if dir == "" {
		t.Skip("the cleanup benchmark's child process")
	}
	rep := benchChildReport{RSSStartKB: procStatusKB(t, "VmRSS")}
	// Sample the live heap: VmHWM also counts memory the Go runtime holds
	// but does not use.
	var peak, live atomic.Uint64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/gc/heap/live:bytes"}}
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			metrics.Read(s)
			if v := s[0].Value.Uint64(); v > peak.Load() {
				peak.Store(v)
			}
			if v := s[1].Value.Uint64(); v > live.Load() {
				live.Store(v)
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	// RETAIN_CLEANUP_BENCH_CPUPROFILE=file writes a CPU profile of the plan
	// and execution to file and, through the plugin, one of the plugin's
	// life to file.plugin.
	prof := os.Getenv("RETAIN_CLEANUP_BENCH_CPUPROFILE")
	var drv storage.Driver
	if os.Getenv("RETAIN_CLEANUP_BENCH_CHILD_PLUGIN") != "" {
		if prof != "" {
			t.Setenv(adapterbench.EnvPluginCPUProfile, prof+".plugin")
		}
		// The same driver through the plugin boundary, as the retain
		// binary runs its bundled adapters: this test binary as the plugin.
		drv = adapterbench.Plugin(localfs.Adapter.Name)(t, storage.Location{Scheme: "file", Path: dir})
	} else {
		d, err := localfs.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		drv = d
	}
	counting := storagetest.NewCounting(drv)
	s, err := storage.NewStore(bg, "localfs", counting)
	if err != nil {
		t.Fatal(err)
	}
	d := mustOpen(t, s, "db/t.lance")
	stopProfile := func() {}
	if prof != "" {
		var err error
		if stopProfile, err = adapterbench.StartCPUProfile(prof); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	// Keep only the latest: what Lance's cut-off of now keeps here (the
	// benchmark checks both copies end identical), and a policy that
	// needs no commit times, so removed versions are planned from their
	// transactions. RETAIN_CLEANUP_BENCH_FULL=1 reads every manifest.
	plan, err := d.PlanCleanup(bg, Policy{KeepLast: 1, FromTransactions: os.Getenv("RETAIN_CLEANUP_BENCH_FULL") == ""})
	if err != nil {
		t.Fatal(err)
	}
	rep.PlanMs = float64(time.Since(start).Microseconds()) / 1000
	start = time.Now()
	res, err := d.ExecuteCleanup(bg, plan)
	if err != nil {
		t.Fatal(err)
	}
	rep.ExecMs = float64(time.Since(start).Microseconds()) / 1000
	stopProfile()
	close(stop)
	<-sampled
	rep.Counts = counting.Counts()
	rep.Versions, rep.VersionsRemoved = len(plan.Versions), plan.Totals.VersionsRemoved
	rep.FilesDeleted, rep.BytesDeleted = res.FilesDeleted, res.BytesDeleted
	for _, v := range plan.Versions {
		if !v.Keep {
			rep.RemovedBytes += v.Size
		}
		rep.LargestManifest = max(rep.LargestManifest, v.Size)
	}
	rep.ManifestBytes, rep.TxnBytes = plan.stats.manifestBytes, plan.stats.txnBytes
	rep.ManifestsRead, rep.TxnsRead, rep.Replayed = plan.stats.manifestsRead, plan.stats.txnsRead, plan.stats.replayed
	runtime.KeepAlive(plan)
	rep.HWMKB = procStatusKB(t, "VmHWM")
	rep.PeakHeapBytes, rep.PeakLiveBytes = peak.Load(), live.Load()
	pj, _ := json.Marshal(plan)
	rep.PlanBytes = len(pj)
	js, _ := json.Marshal(rep)
	fmt.Printf("BENCH %s\n", js)
}

// procStatusKB reads one "kB" field of /proc/self/status.
func procStatusKB(t testing.TB, field string) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no %s in /proc/self/status", field)
	return 0
}
