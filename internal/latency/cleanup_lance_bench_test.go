package latency

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/retain-dev/retain/core/retention"
	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/internal/lancetest"
)

// lanceVersions is the history of the compared table: a create, 299
// single-row appends and one optimize without cleanup (its compaction and
// its index optimization are a version each), so the 300 small data files
// are referenced only by old versions.
const lanceVersions = 302

// BenchmarkCleanupVersusLance: one table of 302 versions on versitygw
// behind the proxy adding 20 ms per request, cleaned on identical copies
// by retain (`cleanup run --keep-last 1`) and by Lance's own cleanup
// (LanceDB optimize with cleanupOlderThan now, through the Node oracle the
// lance tests use, pointed at the same proxy by its S3 storage options).
// Both must leave the same files. retain-rtt/op and lance-rtt are wall
// time in round trips (Lance's: its optimize call alone, the table already
// open); requests are what crossed the proxy (Lance's: the optimize job
// less a job that only opens the table); retain/lance is the ratio of
// the round trips.
//
//	go test -run '^$' -bench CleanupVersusLance -benchtime 1x ./internal/latency/
func BenchmarkCleanupVersusLance(b *testing.B) {
	st := NewS3(b, rtt)
	lanceStore := OpenS3(b, st.Emulator.Endpoint, "lance")
	storageOpts := func(endpoint string) map[string]string {
		return map[string]string{
			"aws_endpoint": endpoint, "allow_http": "true", "aws_region": st.Emulator.Region,
			"aws_access_key_id": st.Emulator.AccessKey, "aws_secret_access_key": st.Emulator.SecretKey,
			"aws_virtual_hosted_style_request": "false",
		}
	}
	lanceURI := "s3://" + Bucket + "/lance"
	ctx := context.Background()
	var retainRTT, lanceRTT, retainReqs, lanceReqs float64
	iters := 0
	for b.Loop() {
		b.StopTimer()
		// Each copy is built in place by Lance, straight to the emulator:
		// an upload would date every file after the table's last commit,
		// and Lance's cleanup keeps such files (as a write in flight may
		// own them) where retain's, with the write outage confirmed,
		// deletes what only removed versions reference.
		for _, c := range []struct {
			s   *storage.Store
			uri string
		}{{st.Fast, "s3://" + Bucket + "/store"}, {lanceStore, lanceURI}} {
			clearStore(b, c.s)
			buildLanceTable(b, c.uri, storageOpts(st.Emulator.Endpoint))
		}
		b.StartTimer()

		st.Proxy.Reset()
		st.Proxy.Log(logDir != "")
		start := time.Now()
		rep, err := retention.Run(ctx, st.Slow, retention.Policy{KeepLast: 1}, retention.RunOptions{ConfirmWriteOutage: true})
		if err != nil {
			b.Fatal(err)
		}
		took := time.Since(start)
		rs := st.Proxy.Stats()
		if logDir != "" {
			writeLog(b, filepath.Join(logDir, "retain-run-1-table.tsv"), st.Proxy.Requests())
		}
		if rep.Totals.VersionsRemoved != lanceVersions-1 {
			b.Fatalf("retain removed %d versions, want %d", rep.Totals.VersionsRemoved, lanceVersions-1)
		}

		st.Proxy.Reset()
		oracle(b, map[string]any{"kind": "open", "dir": lanceURI, "table": "t", "storageOptions": storageOpts(st.Proxy.URL)})
		opening := st.Proxy.Stats().Requests
		st.Proxy.Reset()
		st.Proxy.Log(logDir != "")
		var lance struct {
			Before, After uint64
			Ms            float64
			Stats         struct {
				Prune struct{ OldVersionsRemoved int64 }
			}
		}
		res := oracle(b, map[string]any{"kind": "optimize", "dir": lanceURI, "table": "t", "storageOptions": storageOpts(st.Proxy.URL),
			"olderThanAt": time.Now().UnixMilli(), "deleteUnverified": false})
		if err := json.Unmarshal(res, &lance); err != nil {
			b.Fatal(err)
		}
		ls := st.Proxy.Stats()
		b.StopTimer()
		if logDir != "" {
			writeLog(b, filepath.Join(logDir, "lance-optimize.tsv"), st.Proxy.Requests())
		}
		if lance.Stats.Prune.OldVersionsRemoved != lanceVersions-1 {
			b.Fatalf("Lance removed %d versions, want %d (optimize v%d→v%d)", lance.Stats.Prune.OldVersionsRemoved, lanceVersions-1, lance.Before, lance.After)
		}
		// The copies, built alike, end alike: the same files in each of
		// the table's folders (retain's store keeps its own objects under
		// _retain/ and __leases/, outside the table).
		if r, l := folders(b, st.Fast), folders(b, lanceStore); r != l {
			b.Errorf("after the cleanups the copies differ: retain's table holds %s, Lance's %s", r, l)
		}
		iters++
		retainRTT += float64(took) / float64(rtt)
		lanceRTT += lance.Ms * float64(time.Millisecond) / float64(rtt)
		retainReqs += float64(rs.Requests)
		lanceReqs += float64(ls.Requests - opening)
		b.Logf("retain: %.0f rtt, %d requests, %d in flight at most; Lance: %.0f rtt (optimize alone), %d requests (%d more to open the table), %d in flight at most",
			float64(took)/float64(rtt), rs.Requests, rs.Peak, lance.Ms*float64(time.Millisecond)/float64(rtt), ls.Requests-opening, opening, ls.Peak)
		b.StartTimer()
	}
	n := float64(iters)
	b.ReportMetric(retainRTT/n, "retain-rtt/op")
	b.ReportMetric(retainReqs/n, "retain-requests/op")
	b.ReportMetric(lanceRTT/n, "lance-rtt/op")
	b.ReportMetric(lanceReqs/n, "lance-requests/op")
	b.ReportMetric(retainRTT/lanceRTT, "retain/lance")
}

// buildLanceTable builds the compared table at uri (a LanceDB database)
// with real Lance.
func buildLanceTable(b *testing.B, uri string, storageOpts map[string]string) {
	b.Helper()
	oracle(b, map[string]any{"kind": "build", "dir": uri, "table": "t", "skipVersions": true, "storageOptions": storageOpts,
		"steps": []map[string]any{
			{"op": "create", "rows": 1},
			{"op": "addMany", "count": lanceVersions - 3},
			// Compaction and index optimization: a cut-off at the epoch
			// removes no version.
			{"op": "optimize", "cleanupOlderThanAt": 0},
		}})
}

// oracle runs one job of internal/lancetest/oracle.cjs and returns its
// result.
func oracle(b *testing.B, job map[string]any) json.RawMessage {
	b.Helper()
	var out struct {
		Results []json.RawMessage `json:"results"`
	}
	lancetest.Node(b, "oracle.cjs", map[string]any{"jobs": []any{job}}, &out)
	if len(out.Results) != 1 {
		b.Fatalf("oracle.cjs returned %d results for 1 job", len(out.Results))
	}
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(out.Results[0], &e) == nil && e.Error != "" {
		b.Fatalf("oracle job %v: %s", job["kind"], e.Error)
	}
	return out.Results[0]
}

// clearStore deletes every object of s.
func clearStore(b *testing.B, s *storage.Store) {
	objs, err := s.List(context.Background(), "", 0)
	if err != nil {
		b.Fatal(err)
	}
	for _, o := range objs {
		if err := s.Delete(context.Background(), o.Key, storage.DeleteOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

// folders counts the files of each folder of s's table t.lance, without
// Lance's version hints (Lance rewrites them; they are no cleanup's
// business): "_transactions/ 1, _versions/ 1, data/ 1".
func folders(b *testing.B, s *storage.Store) string {
	objs, err := s.List(context.Background(), "t.lance/", 0)
	if err != nil {
		b.Fatal(err)
	}
	n := map[string]int{}
	for _, o := range objs {
		k := strings.TrimPrefix(o.Key, "t.lance/")
		if strings.HasSuffix(k, "latest_version_hint.json") {
			continue
		}
		dir, _, _ := strings.Cut(k, "/")
		n[dir+"/"]++
	}
	var out []string
	for d, c := range n {
		out = append(out, fmt.Sprintf("%s %d", d, c))
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}
