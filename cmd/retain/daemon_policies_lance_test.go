package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/retain-dev/retain/core/lease"
	"github.com/retain-dev/retain/internal/lancetest"
)

// lanceJudged is one verify job's result.
type lanceJudged struct {
	Listed  map[string][]int                      `json:"listed"`
	Rows    map[string]map[string]json.RawMessage `json:"rows"`
	TagRows map[string]json.RawMessage            `json:"tagRows"`
	Errors  []string                              `json:"errors"`
	Error   string                                `json:"error"`
}

// TestDaemonPoliciesJudgedByLance: one daemon with a schedule, a store
// window, per-branch and per-table windows, a reader lease and a tag and a
// branch with an expiry, over tables real Lance wrote; real Lance judges
// what the passes leave.
//
// Pass 1 (the lease live): the scheduled checkpoint is taken, the expired
// tag and the expired branch are gone (Lance can no longer open the
// branch), the leased v1 stays readable, and every version a rule keeps
// checks out and scans in full. Pass 2 (the lease expired): the lease is
// reaped and its version goes, the checkpoint's pin stays.
func TestDaemonPoliciesJudgedByLance(t *testing.T) {
	t.Parallel() // a process-bound test: it waits on retain, Lance and emulators, not the CPU
	db := filepath.Join(t.TempDir(), "db")
	var built struct {
		Results []struct {
			Error string `json:"error"`
		} `json:"results"`
	}
	lancetest.Node(t, "oracle.cjs", map[string]any{"jobs": []map[string]any{
		{"kind": "build", "dir": db, "table": "events", "naming": "v2", "steps": []map[string]any{
			{"op": "create", "rows": 3}, {"op": "add", "rows": 1}, {"op": "add", "rows": 1}, {"op": "add", "rows": 1}, // main v1..v4
			{"op": "branchCreate", "name": "session/a", "from": "main", "version": 2},
			{"op": "add", "rows": 1, "on": "session/a"}, {"op": "add", "rows": 1, "on": "session/a"}, // session/a v3, v4
			{"op": "branchCreate", "name": "keep/x", "from": "main", "version": 3},
			{"op": "add", "rows": 1, "on": "keep/x"}, {"op": "add", "rows": 1, "on": "keep/x"}, // keep/x v4, v5
			{"op": "branchCreate", "name": "session/old", "from": "main", "version": 4}, // retain adopts it below, with an expiry
			{"op": "add", "rows": 1}, // main v5
		}},
		{"kind": "build", "dir": db, "table": "scratch_t", "naming": "v2", "steps": []map[string]any{
			{"op": "create", "rows": 2}, {"op": "add", "rows": 1}, {"op": "add", "rows": 1}, {"op": "add", "rows": 1}, // v1..v4
		}},
	}}, &built)
	for _, r := range built.Results {
		if r.Error != "" {
			t.Fatalf("building with Lance: %s", r.Error)
		}
	}
	uri := db + "/events.lance"

	// A reader's lease on main v1; a tag on main v4 and a branch forked at
	// main v4, both about to expire: v4 stays only while either does.
	out, errs, code := retain(t, "lease", "acquire", uri, "--version", "1", "--ttl", "20s", "--actor", "scanner", "--json")
	if code != 0 {
		t.Fatalf("lease acquire: %d %s", code, errs)
	}
	var l lease.Lease
	if err := json.Unmarshal([]byte(out), &l); err != nil {
		t.Fatal(err)
	}
	if _, errs, code := retain(t, "tag", "create", "gone-soon", uri, "--version", "4", "--expires", "1s"); code != 0 {
		t.Fatalf("tag create: %d %s", code, errs)
	}
	if _, errs, code := retain(t, "branch", "create", "session/old", uri, "--from", "main@4", "--expires", "1s"); code != 0 {
		t.Fatalf("branch create: %d %s", code, errs)
	}

	cfg := filepath.Join(t.TempDir(), "daemon.yaml")
	err := os.WriteFile(cfg, []byte(`expiry_margin: 100ms
retention:
  keep_last: 1
  writers_stopped: true
  branches:
    "keep/*": {keep_last: 9}
    "session/*": {older_than: 1h}
  tables:
    "scratch_*": {keep_last: 2}
checkpoints:
  - name: "hourly/{{.Time}}"
    every: 1h
    keep: {last: 2}
`), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	// The preview says, before any pass, which rule decides what.
	out, errs, code = retain(t, "cleanup", "preview", db, "--keep-last", "1", "--branch-window", "keep/*:keep-last=9", "--branch-window", "session/*:older-than=1h", "--table-window", "scratch_*:keep-last=2")
	if code != 0 {
		t.Fatalf("preview: %d %s", code, errs)
	}
	for _, want := range []string{"window: keep-last 9 (branch rule keep/*)", "(branch rule session/*)", "window: keep-last 2 (table rule scratch_*)",
		"reader lease " + l.Tag, "note: tag gone-soon keeps main v4 until it expires", "note: branch session/old expires at"} {
		if !strings.Contains(out, want) {
			t.Errorf("the preview lacks %q:\n%s", want, out)
		}
	}
	time.Sleep(1200 * time.Millisecond) // the tag and the branch expire

	pass := func(n int) string {
		t.Helper()
		out, errs, code := retain(t, "daemon", db, "--config", cfg, "--once", "--metrics-addr", "")
		if code != 0 {
			t.Fatalf("pass %d: %d\n%s\n%s", n, code, out, errs)
		}
		return out + errs
	}
	log := pass(1)
	if !time.Now().Before(l.Expires) {
		t.Fatalf("pass 1 took until after the lease's expiry (%s): the test proves nothing about a live lease", l.Expires)
	}
	for _, want := range []string{"checkpoint_scheduled", "tag_expired", "branch_expired", "retention_completed"} {
		if !strings.Contains(log, want) {
			t.Errorf("pass 1 did not log %s:\n%s", want, log)
		}
	}
	if strings.Contains(log, "lease_reaped") {
		t.Fatalf("pass 1 reaped the live lease:\n%s", log)
	}

	judge := func(table string, versions map[string][]int, tags []string, appendOn []string) lanceJudged {
		t.Helper()
		var res struct {
			Results []lanceJudged `json:"results"`
		}
		lancetest.Node(t, "oracle.cjs", map[string]any{"jobs": []map[string]any{{"kind": "verify", "dir": db, "table": table,
			"versions": versions, "tags": tags, "append": appendOn}}}, &res)
		if len(res.Results) != 1 || res.Results[0].Error != "" {
			t.Fatalf("oracle on %s: %+v", table, res)
		}
		return res.Results[0]
	}
	expect := func(what string, r lanceJudged, want map[string][]int) {
		t.Helper()
		for b, vs := range want {
			if !slices.Equal(r.Listed[b], vs) {
				t.Errorf("%s: Lance lists %s as %v, want %v", what, b, r.Listed[b], vs)
			}
		}
	}
	keptEvents := map[string][]int{
		"main":      {1, 2, 3, 5}, // v1 the lease, v2 and v3 fork points, v5 the head and the checkpoint's pin; v4 went with its tag and branch
		"session/a": {2, 3, 4},    // older_than 1h: all of it, where the store's keep-last 1 would keep only v4
		"keep/x":    {3, 4, 5},    // keep_last 9
	}
	r := judge("events", map[string][]int{"main": {1, 2, 3, 5}, "session/a": {2, 3, 4}, "keep/x": {3, 4, 5}, "session/old": {}}, []string{l.Tag}, []string{"main"})
	expect("pass 1, events", r, keptEvents)
	var others []string
	for _, e := range r.Errors {
		if strings.HasPrefix(e, "session/old: open/listVersions") {
			continue // the expired branch is gone, as Lance sees it
		}
		others = append(others, e)
	}
	if len(others) > 0 || len(r.Errors) != 1 {
		t.Fatalf("pass 1: Lance on events: %v (want only session/old not to open)", r.Errors)
	}
	if _, ok := r.TagRows[l.Tag]; !ok {
		t.Fatalf("pass 1: the leased version is not readable by its lease tag: %+v", r.TagRows)
	}
	if _, err := os.Stat(filepath.Join(db, "events.lance", "_refs", "tags", "gone-soon.json")); !os.IsNotExist(err) {
		t.Errorf("the expired tag is still there: %v", err)
	}
	s := judge("scratch_t", map[string][]int{"main": {3, 4}}, nil, nil)
	expect("pass 1, scratch_t", s, map[string][]int{"main": {3, 4}}) // the table rule's keep_last 2
	if len(s.Errors) > 0 {
		t.Fatalf("pass 1: Lance on scratch_t: %v", s.Errors)
	}

	// Lance's append made main v6: v5 now stays by the checkpoint alone.
	time.Sleep(time.Until(l.Expires.Add(200 * time.Millisecond)))
	log = pass(2)
	if !strings.Contains(log, "lease_reaped") || !strings.Contains(log, "retention_completed") {
		t.Fatalf("pass 2 did not reap the expired lease and run retention:\n%s", log)
	}
	r = judge("events", map[string][]int{"main": {2, 3, 5, 6}, "session/a": {2, 3, 4}, "keep/x": {3, 4, 5}}, nil, nil)
	keptEvents["main"] = []int{2, 3, 5, 6}
	expect("pass 2, events", r, keptEvents)
	if len(r.Errors) > 0 {
		t.Fatalf("pass 2: Lance on events: %v", r.Errors)
	}
	if r := judge("events", nil, []string{l.Tag}, nil); len(r.Errors) != 1 || !strings.Contains(r.Errors[0], "tag "+l.Tag) {
		t.Fatalf("pass 2: the reaped lease's tag still checks out: %+v", r)
	}
}
