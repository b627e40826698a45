package daemon

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/retain-dev/retain/adapters/localfs"
	"github.com/retain-dev/retain/core/checkpoint"
	"github.com/retain-dev/retain/core/lance"
	"github.com/retain-dev/retain/core/storage"
)

var bg = context.Background()

func store(t *testing.T, names ...string) (string, *storage.Store, storage.Location) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "db")
	for _, n := range names {
		if err := os.CopyFS(filepath.Join(dir, n+".lance"), os.DirFS(filepath.Join("..", "lance", "testdata", n+".lance"))); err != nil {
			t.Fatal(err)
		}
	}
	d, err := localfs.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	s, err := storage.NewStore(bg, "localfs", d)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	loc := storage.Location{Scheme: "file", Path: dir}
	return dir, s.At(loc), loc
}

func cfg(t *testing.T, yaml string) Config {
	t.Helper()
	p := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(p, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := LoadConfig(p)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func manifests(t *testing.T, dir, table string) int {
	t.Helper()
	es, err := os.ReadDir(filepath.Join(dir, table, "_versions"))
	if err != nil {
		t.Fatal(err)
	}
	return len(es)
}

// A reconcile conflict on one table costs neither the reconcile of the
// others nor the retention pass of the other tables: the conflicted table
// is skipped, loudly; the other is cleaned.
func TestReconcileFailureIsolated(t *testing.T) {
	dir, s, loc := store(t, "deletes", "branch-tag")
	c, err := checkpoint.Create(bg, s, "nightly", "")
	if err != nil {
		t.Fatal(err)
	}
	// Point deletes.lance's pin tag at another version: a conflict that
	// reconcile reports and does not touch.
	var tag string
	for _, ct := range c.Tables {
		if ct.Path == "deletes.lance" {
			tag = ct.Tag
		}
	}
	ds, err := lance.Open(s, "deletes.lance")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "deletes.lance", "_refs", "tags", tag+".json")); err != nil {
		t.Fatal(err)
	}
	if _, err := ds.CreateTagOnBranch(bg, tag, "main", 1, nil); err != nil {
		t.Fatal(err)
	}
	delBefore, btBefore := manifests(t, dir, "deletes.lance"), manifests(t, dir, "branch-tag.lance")

	var logs strings.Builder
	d := &Daemon{Store: s.At(loc), Config: cfg(t, "retention:\n  keep_last: 1\n  writers_stopped: true\n"),
		Logger: hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Info})}
	r := d.Pass(bg)
	if r.ReconcileError == "" || !strings.Contains(logs.String(), "reconcile_failed") {
		t.Fatalf("the conflict was not reported: %+v\n%s", r, logs.String())
	}
	if !r.RetentionCompleted && r.Retention == nil {
		t.Fatalf("retention did not run: %+v\n%s", r, logs.String())
	}
	if got := manifests(t, dir, "deletes.lance"); got != delBefore {
		t.Fatalf("the conflicted table was cleaned: %d -> %d manifests", delBefore, got)
	}
	if got := manifests(t, dir, "branch-tag.lance"); got >= btBefore {
		t.Fatalf("the other table was not cleaned: %d -> %d manifests\n%s", btBefore, got, logs.String())
	}
	if !strings.Contains(logs.String(), "reconcile conflict") {
		t.Fatalf("the skip is not loud:\n%s", logs.String())
	}
}

// Retention runs on the first pass, then not again before `every`, and a
// failed pass is retried on the next one.
func TestRetentionSchedule(t *testing.T) {
	_, s, loc := store(t, "deletes")
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	d := &Daemon{Store: s.At(loc), Config: cfg(t, "interval: 1h\nretention:\n  keep_last: 1\n  writers_stopped: true\n"),
		Now: func() time.Time { return now }}
	if r := d.Pass(bg); !r.RetentionDue || !r.RetentionCompleted {
		t.Fatalf("first pass: %+v", r)
	}
	now = now.Add(time.Hour)
	if r := d.Pass(bg); r.RetentionDue {
		t.Fatalf("retention again after 1h: %+v", r)
	}
	now = now.Add(23 * time.Hour)
	if r := d.Pass(bg); !r.RetentionDue || !r.RetentionCompleted {
		t.Fatalf("after 24h: %+v", r)
	}
	st, err := ReadState(bg, s)
	if err != nil || st == nil || st.LastRetention == nil || !st.LastRetention.Equal(now) || !st.NextRetentionDue.Equal(now.Add(24*time.Hour)) {
		t.Fatalf("record: %+v %v", st, err)
	}
	// A second daemon on the same store (a restart) runs retention on its
	// first pass whatever the stamp.
	d2 := &Daemon{Store: s.At(loc), Config: d.Config, Now: d.Now}
	if r := d2.Pass(bg); !r.RetentionDue {
		t.Fatalf("first pass after a restart: %+v", r)
	}
}

func TestConfigValidation(t *testing.T) {
	for _, bad := range []string{
		"retention:\n  older_than: 10m\n", // online needs >= 1h
		"interval: 10\n",                  // not a duration
		"retention:\n  keep_last: -1\n",   // negative
		"retention:\n  olderthan: 1h\n",   // unknown field
		"interval: 1ms\n",                 // too short
	} {
		p := filepath.Join(t.TempDir(), "c.yaml")
		os.WriteFile(p, []byte(bad), 0o644)
		if _, err := LoadConfig(p); !errors.Is(err, storage.ErrInvalidArgument) {
			t.Errorf("%q accepted: %v", bad, err)
		}
	}
	c := cfg(t, "retention:\n  older_than: 336h\n  keep_last: 5\n")
	if !c.IsEnabled() || c.interval() != time.Hour || c.every() != 24*time.Hour || !c.RetentionOn() {
		t.Fatalf("defaults: %+v", c)
	}
	if c := cfg(t, "enabled: false\n"); c.IsEnabled() {
		t.Fatal("enabled: false ignored")
	}
}
