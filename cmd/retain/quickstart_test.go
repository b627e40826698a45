package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/retain-dev/retain/cmd/retain/internal/quickstart"
	"github.com/retain-dev/retain/core/lance"
	"github.com/retain-dev/retain/internal/lancetest"
)

// quickstart DIR --json, then the directory checked independently: real
// Lance reads the pinned version (by version and through the checkpoint's
// pin tag) and the head with the rows LanceDB wrote, lists only those two,
// and the removed versions' manifests are gone.
func TestQuickstartJSON(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "qs")
	out, errs, code := retain(t, "quickstart", dir, "--json")
	if code != 0 {
		t.Fatalf("quickstart: exit %d\n%s\n%s", code, errs, out)
	}
	var rep quickstart.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	st := rep.Steps
	if !rep.OK || rep.Dir != dir || rep.CheckpointID == "" || rep.Checkpoint != quickstart.CheckpointName || rep.KeepLast != 1 ||
		st.Replay == nil || st.Checkpoint == nil || st.Writer == nil || st.Preview == nil || st.Cleanup == nil || st.Show == nil || st.Verify == nil {
		t.Fatalf("report: %s", out)
	}
	if string(st.Checkpoint.ID) != rep.CheckpointID || len(st.Checkpoint.Tables) != 2 {
		t.Fatalf("checkpoint: %+v", st.Checkpoint)
	}
	if p := st.Preview.Totals; p.Tables != 2 || p.VersionsKept != 4 || p.VersionsRemoved != 8 || p.FilesToDelete == 0 {
		t.Fatalf("preview totals: %+v", p)
	}
	if c := st.Cleanup; c.Failed != 0 || c.Totals.VersionsRemoved != 8 || c.Totals.FilesDeleted != st.Preview.Totals.FilesToDelete ||
		c.Totals.BytesDeleted != st.Preview.Totals.BytesToDelete || c.BoundaryVersion == 0 {
		t.Fatalf("cleanup: %+v", c)
	}
	if s := st.Show; s.Health != "ok" || s.Deep == nil || len(s.Deep.Missing) != 0 || s.Deep.FilesChecked == 0 || len(s.Pins) != 3 {
		t.Fatalf("show: %+v", s)
	}
	if len(rep.Next) == 0 || !strings.Contains(rep.Next[0], "checkpoint list "+dir) {
		t.Fatalf("next: %v", rep.Next)
	}

	f, err := quickstart.LoadFixture(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	tags := map[string]string{}
	for _, tb := range st.Checkpoint.Tables {
		tags[tb.Path] = tb.Tag
	}
	var jobs []any
	for i, ts := range rep.Tables {
		if ts.Table != f.Tables()[i] || !slices.Equal(ts.VersionsBefore, []uint64{1, 2, 3, 4, 5, 6}) ||
			!slices.Equal(ts.VersionsAfter, []uint64{3, 6}) || !slices.Equal(ts.Removed, []uint64{1, 2, 4, 5}) {
			t.Fatalf("table summary: %+v", ts)
		}
		// The removed versions' manifests are gone from the directory, the
		// kept ones are there.
		for v := uint64(1); v <= 6; v++ {
			_, err := os.Stat(filepath.Join(dir, ts.Table, "_versions", lance.ManifestName(v, lance.NamingV2)))
			if kept := v == 3 || v == 6; kept != (err == nil) {
				t.Errorf("%s v%d: manifest stat %v", ts.Table, v, err)
			}
		}
		jobs = append(jobs, map[string]any{"kind": "verify", "dir": dir, "table": strings.TrimSuffix(ts.Table, ".lance"),
			"versions": map[string][]uint64{"main": {3, 6}}, "tags": []string{tags[ts.Table]}})
	}
	if t.Failed() {
		t.FailNow()
	}

	type read struct {
		Rows    int64 `json:"rows"`
		Scanned int64 `json:"scanned"`
		IDSum   int64 `json:"idSum"`
	}
	var res struct {
		Results []struct {
			Error   string                     `json:"error"`
			Listed  map[string][]uint64        `json:"listed"`
			Rows    map[string]map[string]read `json:"rows"`
			TagRows map[string]read            `json:"tagRows"`
			Errors  []string                   `json:"errors"`
		} `json:"results"`
	}
	lancetest.Node(t, "oracle.cjs", map[string]any{"jobs": jobs}, &res)
	for i, ts := range rep.Tables {
		r := res.Results[i]
		if r.Error != "" || len(r.Errors) > 0 {
			t.Fatalf("%s: Lance: %s %v", ts.Table, r.Error, r.Errors)
		}
		if !slices.Equal(r.Listed["main"], []uint64{3, 6}) {
			t.Errorf("%s: Lance lists versions %v, want [3 6]", ts.Table, r.Listed["main"])
		}
		check := func(what string, got read, v uint64) {
			c, _ := f.Commit(ts.Table, v)
			if got.Rows != c.Version.Rows || got.Scanned != c.Version.Rows || got.IDSum != c.Version.IDSum {
				t.Errorf("%s %s: Lance reads %+v, LanceDB wrote %d rows with id sum %d", ts.Table, what, got, c.Version.Rows, c.Version.IDSum)
			}
		}
		check("v3", r.Rows["main"]["3"], 3)
		check("v6", r.Rows["main"]["6"], 6)
		check("pin tag "+tags[ts.Table], r.TagRows[tags[ts.Table]], 3)
		if ts.PinnedRows != r.Rows["main"]["3"].Rows || ts.HeadRows != r.Rows["main"]["6"].Rows {
			t.Errorf("%s: the report says %d and %d rows", ts.Table, ts.PinnedRows, ts.HeadRows)
		}
	}

	// The commands quickstart suggests work on the directory.
	if out, errs, code := retain(t, "checkpoint", "show", quickstart.CheckpointName, dir, "--deep"); code != 0 || !strings.Contains(out, "0 missing") {
		t.Fatalf("show --deep: %d %s %s", code, out, errs)
	}
}

// Without DIR: a fresh retain-quickstart-* under the temp dir, and the
// narrative on stdout.
func TestQuickstartText(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	out, errs, code := retain(t, "quickstart")
	if code != 0 {
		t.Fatalf("quickstart: exit %d\n%s\n%s", code, errs, out)
	}
	made, _ := filepath.Glob(filepath.Join(tmp, "retain-quickstart-*"))
	if len(made) != 1 {
		t.Fatalf("made %v", made)
	}
	for _, w := range []string{
		"retain checkpoint create quickstart-v3",
		"v3  KEEP    checkpoint pin tag ogcp_v1_",
		"write outage",
		"pins ok",
		"0 missing",
		"v1, v2, v4, v5 gone",
		"OK: ",
		"retain checkpoint list " + made[0],
		"retain cleanup preview " + made[0] + " --keep-last 1",
	} {
		if !strings.Contains(out, w) {
			t.Errorf("stdout lacks %q:\n%s", w, out)
		}
	}
}

// A non-empty DIR (or a file) is refused as a usage error and left exactly
// as it was.
func TestQuickstartRefusesNonEmptyDir(t *testing.T) {
	dir := t.TempDir()
	keep := filepath.Join(dir, "mine.txt")
	if err := os.WriteFile(keep, []byte("precious"), 0o600); err != nil {
		t.Fatal(err)
	}
	before := folderState(t, dir)
	for _, arg := range []string{dir, keep} {
		out, errs, code := retain(t, "quickstart", arg, "--json")
		if code != 2 || !strings.Contains(errs, "not an empty directory") {
			t.Fatalf("quickstart %s: exit %d\nstdout %s\nstderr %s", arg, code, out, errs)
		}
		if kind, msg, _ := decodeJSONError(t, out); kind != "invalid argument" || !strings.Contains(msg, "not an empty directory") {
			t.Fatalf("quickstart %s --json: %s", arg, out)
		}
	}
	wantUnchanged(t, "quickstart refused", before, folderState(t, dir))
}
