package quickstart

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/retain-dev/retain/adapters/localfs"
	"github.com/retain-dev/retain/core/storage"
)

var bg = context.Background()

// The embedded fixture splits into one commit per version, covers every
// file exactly once and stays small.
func TestFixture(t *testing.T) {
	f, err := LoadFixture(bg)
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	fs.WalkDir(fixtureFS, "fixture", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			fi, _ := d.Info()
			total += fi.Size()
		}
		return err
	})
	if total > 200_000 {
		t.Errorf("the fixture is %d bytes; keep it well under 200 KB", total)
	}
	t.Logf("fixture: %d bytes, %d objects, %d commits", total, len(f.Objects), len(f.Commits))
	if got := f.Tables(); len(got) != 2 || got[0] != "events.lance" || got[1] != "users.lance" {
		t.Fatalf("tables %v", got)
	}
	seen := map[string]bool{}
	for _, tb := range f.Tables() {
		if h := f.Head(tb); h != 6 {
			t.Fatalf("%s head v%d", tb, h)
		}
		for v := uint64(1); v <= 6; v++ {
			c, ok := f.Commit(tb, v)
			if !ok || len(c.Files) < 2 || c.Files[len(c.Files)-1].Key != c.Manifest {
				t.Fatalf("%s v%d: %+v", tb, v, c)
			}
			if !strings.HasPrefix(c.Manifest, tb+"/_versions/") || c.Version.Rows == 0 || c.Version.Commit == "" {
				t.Fatalf("%s v%d: %+v", tb, v, c.Version)
			}
			for _, o := range c.Files {
				if seen[o.Key] {
					t.Fatalf("%s written by two commits", o.Key)
				}
				seen[o.Key] = true
			}
		}
	}
	if len(seen) != len(f.Objects) {
		t.Fatalf("commits write %d objects, the fixture has %d", len(seen), len(f.Objects))
	}
	// Replay order: every table's v1, then v2, ...
	for i, c := range f.Commits {
		if want := uint64(i/2 + 1); c.Version.Version != want {
			t.Fatalf("commit %d is %s v%d, want v%d", i, c.Table, c.Version.Version, want)
		}
	}
}

func TestPrepareDir(t *testing.T) {
	base := t.TempDir()
	fresh := filepath.Join(base, "a", "b")
	if d, err := PrepareDir(fresh); err != nil || d != fresh {
		t.Fatalf("missing dir: %q %v", d, err)
	}
	if d, err := PrepareDir(fresh); err != nil || d != fresh {
		t.Fatalf("empty dir: %q %v", d, err)
	}
	os.WriteFile(filepath.Join(fresh, "x"), []byte("keep"), 0o644)
	if _, err := PrepareDir(fresh); !errors.Is(err, ErrDirNotEmpty) {
		t.Fatalf("non-empty dir: %v", err)
	}
	if _, err := PrepareDir(filepath.Join(fresh, "x")); !errors.Is(err, ErrDirNotEmpty) {
		t.Fatalf("a file: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(fresh, "x")); string(b) != "keep" {
		t.Fatal("the refused dir was touched")
	}
	t.Setenv("TMPDIR", base)
	d, err := PrepareDir("")
	if err != nil || filepath.Dir(d) != base || !strings.HasPrefix(filepath.Base(d), "retain-quickstart-") {
		t.Fatalf("temp dir: %q %v", d, err)
	}
}

func openLocal(t *testing.T, dir string) (*storage.Store, storage.Location) {
	t.Helper()
	d, err := localfs.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	s, err := storage.NewStore(bg, "localfs", d)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, storage.Location{Scheme: "file", Path: dir}
}

// In process (localfs without the plugin): every step passes and says so.
func TestRunInProcess(t *testing.T) {
	dir := t.TempDir()
	s, loc := openLocal(t, dir)
	var out bytes.Buffer
	rep, err := Run(bg, Options{Dir: dir, Store: s.At(loc), Out: &out})
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if !rep.OK || rep.CheckpointID == "" || len(rep.Tables) != 2 || rep.Steps.Verify == nil {
		t.Fatalf("report %+v", rep)
	}
	for _, w := range []string{"OK:", "quickstart-v3", "retain checkpoint list " + dir, "v1, v2, v4, v5 gone", "optimize({cleanupOlderThan: new Date(0)})"} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("narrative lacks %q:\n%s", w, out.String())
		}
	}
}

// A pinned file lost between cleanup and show makes quickstart fail at
// show, naming the file: it is a smoke test, not a demo that always passes.
func TestRunFailsWhenPinNotIntact(t *testing.T) {
	dir := t.TempDir()
	s, loc := openLocal(t, dir)
	f, err := LoadFixture(bg)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := f.Commit("events.lance", PinnedVersion)
	victim := c.Files[0].Key // a file version 3 wrote and still references
	testHookAfterCleanup = func() { os.Remove(filepath.Join(dir, victim)) }
	defer func() { testHookAfterCleanup = nil }()
	rep, err := Run(bg, Options{Dir: dir, Store: s.At(loc)})
	var se *StepError
	if !errors.As(err, &se) || se.Step != StepShow || !strings.Contains(err.Error(), victim) {
		t.Fatalf("want a failure at show naming %s, got %v", victim, err)
	}
	if rep.OK || rep.FailedStep != StepShow || rep.Error == "" || rep.Steps.Show == nil || rep.Steps.Verify != nil {
		t.Fatalf("report %+v", rep)
	}
}
