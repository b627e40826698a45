package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/retain-dev/retain/cmd/retain/internal/quickstart"
	"github.com/retain-dev/retain/core/checkpoint"
	"github.com/retain-dev/retain/core/failpoint"
	"github.com/retain-dev/retain/core/retention"
	"github.com/retain-dev/retain/internal/faultadapter"
	"github.com/retain-dev/retain/internal/lancetest"
)

// daemonStore replays the quickstart fixture's LanceDB commits v1-v3 of
// both tables into a fresh store, takes checkpoint "keep" (v3), replays
// v4-v6, then has real Lance append v7 and v8 now. v1-v6 were committed
// when the fixture was made (over-age for a 1-minute window); v7 and v8
// are under-age. It returns the store and the checkpoint's pin tags.
func daemonStore(t *testing.T) (string, map[string]string) {
	t.Helper()
	ctx := context.Background()
	f, err := quickstart.LoadFixture(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, tb := range f.Info.Tables {
		for _, v := range tb.Versions {
			if v.Version <= 6 && time.Since(v.Timestamp) < 2*time.Minute {
				t.Skipf("the fixture's commits are too recent (%s) for the 1m window", v.Timestamp)
			}
		}
	}
	db := filepath.Join(t.TempDir(), "db")
	replay := func(from, to uint64) {
		for _, c := range f.Commits {
			if c.Version.Version < from || c.Version.Version > to {
				continue
			}
			for _, o := range c.Files {
				p := filepath.Join(db, filepath.FromSlash(o.Key))
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, o.Body, 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	replay(1, 3)
	out, errs, code := retain(t, "checkpoint", "create", "keep", db, "--json")
	var c checkpoint.Created
	if code != 0 || json.Unmarshal([]byte(out), &c) != nil {
		t.Fatalf("checkpoint: %d %s %s", code, out, errs)
	}
	tags := map[string]string{}
	for _, ct := range c.Tables {
		if ct.Version != 3 {
			t.Fatalf("checkpoint pins %s v%d", ct.Path, ct.Version)
		}
		tags[strings.TrimSuffix(ct.Path, ".lance")] = ct.Tag
	}
	replay(4, 6)
	// Real Lance commits v7 and v8 now.
	var jobs []map[string]any
	for range 2 {
		for _, tb := range []string{"events", "users"} {
			jobs = append(jobs, map[string]any{"kind": "verify", "dir": db, "table": tb, "append": []string{"main"}})
		}
	}
	var res struct {
		Results []struct {
			Error    string `json:"error"`
			Appended map[string]struct {
				Version uint64 `json:"version"`
			} `json:"appended"`
		} `json:"results"`
	}
	lancetest.Node(t, "oracle.cjs", map[string]any{"jobs": jobs}, &res)
	for i, r := range res.Results {
		if want := uint64(7 + i/2); r.Error != "" || r.Appended["main"].Version != want {
			t.Fatalf("append %d: %+v (want v%d)", i, r, want)
		}
	}
	return db, tags
}

// daemonProc is a running `retain daemon`.
type daemonProc struct {
	cmd   *exec.Cmd
	mu    sync.Mutex
	log   strings.Builder
	lines chan string
	done  chan struct{}
	err   error
}

func startDaemon(t *testing.T, env []string, args ...string) *daemonProc {
	t.Helper()
	return startDaemonWith(t, nil, env, args...)
}

// startDaemonWith is startDaemon with setup applied to the command before
// it starts (its own process group, say).
func startDaemonWith(t *testing.T, setup func(*exec.Cmd), env []string, args ...string) *daemonProc {
	t.Helper()
	d := &daemonProc{lines: make(chan string, 1000), done: make(chan struct{})}
	d.cmd = exec.Command(bin, args...)
	d.cmd.Env = append(os.Environ(), env...)
	if setup != nil {
		setup(d.cmd)
	}
	stderr, err := d.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	d.cmd.Stdout = io.Discard
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			d.mu.Lock()
			d.log.WriteString(sc.Text() + "\n")
			d.mu.Unlock()
			select {
			case d.lines <- sc.Text():
			default:
			}
		}
		d.err = d.cmd.Wait()
		close(d.done)
	}()
	t.Cleanup(func() {
		d.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-d.done:
		case <-time.After(30 * time.Second):
			d.cmd.Process.Kill()
		}
	})
	return d
}

// waitPaused waits until the daemon's pass is held at failpoint fp
// (RETAIN_FAILPOINT_PAUSE with RETAIN_FAILPOINT_DIR=dir).
func (d *daemonProc) waitPaused(t *testing.T, dir, fp string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := os.Stat(failpoint.PauseFile(dir, fp, ".reached")); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the pass never reached its pause:\n%s", d.output())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (d *daemonProc) output() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.log.String()
}

// waitFor returns the first log line matching re.
func (d *daemonProc) waitFor(t *testing.T, re string, timeout time.Duration) string {
	t.Helper()
	rx := regexp.MustCompile(re)
	deadline := time.After(timeout)
	for {
		select {
		case l := <-d.lines:
			if rx.MatchString(l) {
				return l
			}
		case <-d.done:
			t.Fatalf("the daemon exited (%v) before logging %q:\n%s", d.err, re, d.output())
		case <-deadline:
			t.Fatalf("no log line %q within %s:\n%s", re, timeout, d.output())
		}
	}
}

func scrape(t *testing.T, addr string) map[string]float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		l := sc.Text()
		if strings.HasPrefix(l, "#") || l == "" {
			continue
		}
		i := strings.LastIndexByte(l, ' ')
		v, err := strconv.ParseFloat(l[i+1:], 64)
		if err == nil {
			out[l[:i]] = v
		}
	}
	return out
}

// TestDaemonEnforcesRetention boots the real daemon against a store with
// over-age and under-age versions and a checkpoint, waits for the first
// pass and checks: the over-age unpinned versions are gone; the pinned
// and under-age ones are intact and read by real Lance; the audit log has
// the removal lines with exact counts; the metrics say so; SIGTERM stops
// the daemon cleanly.
func TestDaemonEnforcesRetention(t *testing.T) {
	db, tags := daemonStore(t)
	cfg := filepath.Join(t.TempDir(), "daemon.yaml")
	if err := os.WriteFile(cfg, []byte("interval: 1h\nretention:\n  older_than: 1m\n  writers_stopped: true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, nil, "daemon", db, "--config", cfg, "--metrics-addr", "127.0.0.1:0")
	addr := regexp.MustCompile(`addr=(\S+)`).FindStringSubmatch(d.waitFor(t, `metrics_listening`, 60*time.Second))[1]
	done := d.waitFor(t, `retention_completed|retention_failed`, 120*time.Second)
	if !strings.Contains(done, "retention_completed") || !strings.Contains(done, "versions_removed=10") {
		t.Fatalf("first pass: %s\n%s", done, d.output())
	}
	for _, tb := range []string{"events", "users"} {
		if !regexp.MustCompile(`removed: table=` + tb + `\.lance versions_removed=5 `).MatchString(d.output()) {
			t.Fatalf("no removal line for %s:\n%s", tb, d.output())
		}
	}

	// The files: v1, v2, v4, v5, v6 gone; v3 (pinned), v7, v8 (under-age) kept.
	for _, tb := range []string{"events.lance", "users.lance"} {
		for v := uint64(1); v <= 8; v++ {
			_, err := os.Stat(filepath.Join(db, tb, "_versions", fmt.Sprintf("%020d.manifest", ^uint64(0)-v)))
			if keep := v == 3 || v >= 7; keep != (err == nil) {
				t.Fatalf("%s v%d: present=%v, want %v", tb, v, err == nil, keep)
			}
		}
	}
	// Real Lance reads what was kept.
	var jobs []map[string]any
	for _, tb := range []string{"events", "users"} {
		jobs = append(jobs, map[string]any{"kind": "verify", "dir": db, "table": tb,
			"versions": map[string][]uint64{"main": {3, 7, 8}}, "tags": []string{tags[tb]}})
	}
	var res struct {
		Results []struct {
			Error   string              `json:"error"`
			Errors  []string            `json:"errors"`
			Listed  map[string][]uint64 `json:"listed"`
			TagRows map[string]struct {
				Rows int64 `json:"rows"`
			} `json:"tagRows"`
		} `json:"results"`
	}
	lancetest.Node(t, "oracle.cjs", map[string]any{"jobs": jobs}, &res)
	for i, r := range res.Results {
		if r.Error != "" || len(r.Errors) != 0 || fmt.Sprint(r.Listed["main"]) != "[3 7 8]" || r.TagRows[tags[[]string{"events", "users"}[i]]].Rows == 0 {
			t.Fatalf("real Lance after the pass: %+v", r)
		}
	}
	if _, errs, code := retain(t, "checkpoint", "show", "keep", db, "--deep"); code != 0 {
		t.Fatalf("checkpoint after the pass: %s", errs)
	}

	// The audit log: removing + removed per table, exact counts.
	out, _, code := retain(t, "audit", db, "--json")
	var lines []retention.AuditRecord
	if code != 0 || json.Unmarshal([]byte(out), &lines) != nil {
		t.Fatalf("audit: %d %s", code, out)
	}
	removed := map[string]retention.AuditRecord{}
	for _, l := range lines {
		if l.Event == retention.AuditRemoved {
			removed[l.Table] = l
		}
		if !strings.HasPrefix(l.Actor, "retain-daemon@") {
			t.Fatalf("audit actor: %+v", l)
		}
	}
	for _, tb := range []string{"events.lance", "users.lance"} {
		l := removed[tb]
		if l.VersionsRemoved != 5 || strings.Join(l.Versions, ",") != "main v1,main v2,main v4,main v5,main v6" || l.FilesRemoved == 0 || l.FilesRemoved != l.FilesPlanned || l.BytesRemoved != l.BytesPlanned {
			t.Fatalf("audit line of %s: %+v", tb, l)
		}
	}

	// The metrics, once the pass has finished (its record and gauges are
	// written after its last log line): /readyz says when.
	for deadline := time.Now().Add(30 * time.Second); ; {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz did not answer 200 after the pass: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	m := scrape(t, addr)
	for k, want := range map[string]float64{
		"retain_versions_removed_total": 10, "retain_checkpoints_live": 1, "retain_pinned_versions": 2,
		`retain_pins{state="missing"}`: 0, `retain_pass_failures_total{part="retention"}`: 0, "retain_passes_total": 1,
		`retain_gc_boundary_version{branch="main",table="events.lance"}`: 6,
	} {
		if got, ok := m[k]; !ok || got != want {
			t.Errorf("metric %s = %v (present %v), want %v", k, got, ok, want)
		}
	}
	if m["retain_retention_last_success_timestamp_seconds"] < float64(time.Now().Add(-10*time.Minute).Unix()) || m["retain_bytes_removed_total"] <= 0 {
		t.Errorf("metrics: %v", m)
	}
	if m["retain_last_pass_success"] != 1 || m["go_goroutines"] <= 0 || m["process_resident_memory_bytes"] <= 0 {
		t.Errorf("last pass, go_* and process_* metrics: %v", m)
	}
	// The probes on the same listener.
	for path, want := range map[string]string{"/healthz": "ok", "/readyz": "ready: the last pass finished"} {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.HasPrefix(string(b), want) {
			t.Errorf("%s: %d %q, want 200 %q", path, resp.StatusCode, b, want)
		}
	}

	// status reads the daemon's record.
	out, _, code = retain(t, "status", db, "--json")
	var st struct {
		Daemon struct {
			Window        string     `json:"window"`
			LastRetention *time.Time `json:"last_retention"`
			NextDue       *time.Time `json:"next_retention_due"`
		} `json:"daemon"`
		Pins struct {
			OK int `json:"ok"`
		} `json:"pin_health"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil || st.Daemon.Window != "older than 1m0s" || st.Daemon.LastRetention == nil ||
		st.Daemon.NextDue == nil || st.Daemon.NextDue.Sub(*st.Daemon.LastRetention) != 24*time.Hour || st.Pins.OK != 3 {
		t.Fatalf("status: %d %s", code, out)
	}

	// SIGTERM: the daemon stops cleanly and leaves the claim free.
	d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
		if d.err != nil {
			t.Fatalf("daemon exit: %v\n%s", d.err, d.output())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the daemon did not stop on SIGTERM")
	}
	if out, _, _ := retain(t, "claim", "status", db); !strings.Contains(out, "free") {
		t.Fatalf("claim after shutdown: %s", out)
	}
}

// TestDaemonShutdownWaitsForPass: SIGTERM while a retention pass is in
// flight (paused right after its boundary commit) does not abandon it: the
// pass finishes its deletions, then the daemon exits and the claim is
// free.
func TestDaemonShutdownWaitsForPass(t *testing.T) {
	db := runFixture(t)
	cfg := filepath.Join(t.TempDir(), "daemon.yaml")
	os.WriteFile(cfg, []byte("retention:\n  keep_last: 1\n  writers_stopped: true\n"), 0o644)
	hs := t.TempDir()
	d := startDaemon(t, []string{"RETAIN_FAILPOINT_PAUSE=" + retention.FPRunAfterBoundary, "RETAIN_FAILPOINT_DIR=" + hs},
		"daemon", db, "--config", cfg, "--metrics-addr", "")
	d.waitPaused(t, hs, retention.FPRunAfterBoundary)
	d.cmd.Process.Signal(syscall.SIGTERM)
	time.Sleep(300 * time.Millisecond)
	select {
	case <-d.done:
		t.Fatalf("the daemon exited mid-pass:\n%s", d.output())
	default:
	}
	os.WriteFile(failpoint.PauseFile(hs, retention.FPRunAfterBoundary, ".continue"), nil, 0o644)
	select {
	case <-d.done:
	case <-time.After(60 * time.Second):
		t.Fatalf("the daemon did not stop after its pass:\n%s", d.output())
	}
	if d.err != nil || !strings.Contains(d.output(), "retention_completed") || !strings.Contains(d.output(), "daemon stopped") {
		t.Fatalf("exit %v:\n%s", d.err, d.output())
	}
	if _, err := os.Stat(filepath.Join(db, "deletes.lance", "_versions", "18446744073709551611.manifest")); err == nil {
		t.Fatal("the pass's deletions were abandoned")
	}
	if out, _, _ := retain(t, "claim", "status", db); !strings.Contains(out, "free") {
		t.Fatalf("claim after shutdown: %s", out)
	}
}

// TestDaemonClaimHeldAndDisabled: a held claim makes the pass skip
// retention and name the holder (and not advance the stamp); enabled:
// false mutates nothing.
func TestDaemonClaimHeldAndDisabled(t *testing.T) {
	db := runFixture(t)
	before := tableFiles(t, db)
	cfg := filepath.Join(t.TempDir(), "daemon.yaml")
	os.WriteFile(cfg, []byte("retention:\n  keep_last: 1\n  writers_stopped: true\n"), 0o644)
	hs := t.TempDir()
	holder := exec.Command(bin, "cleanup", "run", db, "--confirm-write-outage", "--keep-last", "1")
	holder.Env = append(os.Environ(), "RETAIN_FAILPOINT_PAUSE=cleanup/after-claim", "RETAIN_FAILPOINT_DIR="+hs)
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	cont := filepath.Join(hs, "cleanup_after-claim.continue")
	defer func() { os.WriteFile(cont, nil, 0o644); holder.Wait() }()
	for i := 0; ; i++ {
		if _, err := os.Stat(filepath.Join(hs, "cleanup_after-claim.reached")); err == nil {
			break
		}
		if i > 3000 {
			t.Fatal("the holder never took the claim")
		}
		time.Sleep(20 * time.Millisecond)
	}
	_, errs, code := retain(t, "daemon", db, "--config", cfg, "--once")
	if code != 1 || !strings.Contains(errs, "retention skipped: the retention claim is held") || !strings.Contains(errs, "(cleanup, operation cleanup-") {
		t.Fatalf("daemon while the claim is held: %d\n%s", code, errs)
	}
	if out, _, _ := retain(t, "status", db, "--json"); strings.Contains(out, `"last_retention"`) {
		t.Fatalf("the stamp advanced although retention was skipped: %s", out)
	}
	os.WriteFile(cont, nil, 0o644)
	holder.Wait()

	db2 := runFixture(t)
	os.WriteFile(cfg, []byte("enabled: false\nretention:\n  keep_last: 1\n  writers_stopped: true\n"), 0o644)
	before = tableFiles(t, db2)
	_, errs, code = retain(t, "daemon", db2, "--config", cfg, "--once")
	if code != 0 {
		t.Fatalf("disabled daemon: %d %s", code, errs)
	}
	if after := tableFiles(t, db2); strings.Join(after, "\n") != strings.Join(before, "\n") {
		t.Fatal("a disabled daemon changed the tables")
	}
	if _, err := os.Stat(filepath.Join(db2, "_retain", "maintenance")); err == nil {
		t.Fatal("a disabled daemon wrote its record")
	}
}

// TestDaemonRetriesFailedRetention: through a fault-injecting vendor
// adapter whose first delete fails, the first pass's retention fails
// (retention_failed, the stamp stays); the next tick finishes the
// unfinished run and completes.
func TestDaemonRetriesFailedRetention(t *testing.T) {
	adapter := faultadapter.Build(t)
	db := runFixture(t)
	cfg := filepath.Join(t.TempDir(), "daemon.yaml")
	os.WriteFile(cfg, []byte("interval: 1s\nretention:\n  keep_last: 1\n  writers_stopped: true\n"), 0o644)
	state := filepath.Join(t.TempDir(), "faults.json")
	d := startDaemon(t, []string{"RETAIN_FAULT_FAIL_DELETES=1", "RETAIN_FAULT_STATE=" + state},
		"--adapter", adapter, "daemon", db, "--config", cfg, "--metrics-addr", "127.0.0.1:0")
	addr := regexp.MustCompile(`addr=(\S+)`).FindStringSubmatch(d.waitFor(t, `metrics_listening`, 60*time.Second))[1]
	failed := d.waitFor(t, `retention_failed|retention_completed`, 60*time.Second)
	if !strings.Contains(failed, "retention_failed") || !strings.Contains(failed, "failures=1") || !strings.Contains(failed, "injected") {
		t.Fatalf("first pass: %s\n%s", failed, d.output())
	}
	done := d.waitFor(t, `retention_completed|retention_failed`, 60*time.Second)
	if !strings.Contains(done, "retention_completed") || !strings.Contains(d.output(), "finishing an unfinished cleanup run first") {
		t.Fatalf("second pass: %s\n%s", done, d.output())
	}
	// The store ends as an uninterrupted cleanup leaves one.
	ref := runFixture(t)
	if _, errs, code := retain(t, "cleanup", "run", ref, "--confirm-write-outage", "--keep-last", "1"); code != 0 {
		t.Fatalf("reference run: %s", errs)
	}
	if got, want := strings.Join(tableFiles(t, db), "\n"), strings.Join(tableFiles(t, ref), "\n"); got != want {
		t.Fatalf("after the retry:\n%s\nwant\n%s", got, want)
	}
	if _, errs, code := retain(t, "checkpoint", "show", "nightly", db, "--deep"); code != 0 {
		t.Fatalf("checkpoint after the retry: %s", errs)
	}
	m := scrape(t, addr)
	if m[`retain_pass_failures_total{part="retention"}`] != 1 || m["retain_retention_failures"] != 0 || m["retain_retention_last_success_timestamp_seconds"] == 0 {
		t.Fatalf("metrics after the retry: %v", m)
	}
	out, _, _ := retain(t, "audit", db, "--json")
	if !strings.Contains(out, `"remove_failed"`) || !strings.Contains(out, `"removed"`) {
		t.Fatalf("audit: %s", out)
	}
}
