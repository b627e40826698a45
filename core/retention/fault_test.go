package retention

import (
	"errors"
	"flag"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/retain-dev/retain/adapters/localfs"
	"github.com/retain-dev/retain/core/checkpoint"
	"github.com/retain-dev/retain/core/retention/runs"
	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/internal/faultstore"
)

var faultSeeds = flag.Int("fault-seeds", 12, "seeds of TestRunUnderFaults (a soak: -fault-seeds=500)")

// tableFiles lists the tables' files, leaving out retain's own folders and
// the checkpoint pin tags (named by a random checkpoint id).
func tableFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			if rel == "_retain" || rel == ".retain-localfs" || rel == "__leases" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.Contains(rel, "/_refs/tags/ogcp_") {
			out = append(out, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

// TestRunUnderFaults runs cleanup through a storage wrapper that fails
// about 5 % of requests (errors before the request, responses lost after
// it was applied, latency spikes). Every stop must be typed: either
// ErrRunIncomplete (then `--resume` continues) or an error after which
// nothing was deleted. Retrying that way always converges; nothing pinned
// is lost, and the store ends exactly as an uninterrupted run leaves it.
func TestRunUnderFaults(t *testing.T) {
	refDir, _ := setup(t)
	if _, err := Run(bg, open(t, refDir, false), Policy{KeepLast: 1}, RunOptions{ConfirmWriteOutage: true}); err != nil {
		t.Fatal(err)
	}
	want := strings.Join(tableFiles(t, refDir), "\n")

	var injected, incompletes, resumes, plainStops, healed int64
	for seed := 1; seed <= *faultSeeds; seed++ {
		dir, id := setup(t)
		drv, err := localfs.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		fd := faultstore.Wrap(drv, faultstore.Default(uint64(seed)))
		s, err := storage.NewStore(bg, "localfs", fd)
		if err != nil {
			t.Fatal(err)
		}
		healthy := open(t, dir, false)
		done := false
		var lastErr error
		for attempt := 1; attempt <= 22 && !done; attempt++ {
			if attempt == 21 {
				// The faults may keep a run from finishing (a whole plan is
				// hundreds of requests); what matters is that every stop
				// was typed. Heal the store: the run must now finish.
				fd.SetEnabled(false)
				healed++
			}
			before := strings.Join(tableFiles(t, dir), "\n")
			open, err := runs.Open(bg, healthy)
			if err != nil {
				t.Fatal(err)
			}
			if len(open) > 0 {
				resumes++
				_, err = Resume(bg, s.At(loc(dir)), ResumeOptions{})
			} else {
				_, err = Run(bg, s.At(loc(dir)), Policy{KeepLast: 1}, RunOptions{ConfirmWriteOutage: true})
			}
			lastErr = err
			switch {
			case err == nil:
				done = true
			case errors.Is(err, ErrRunIncomplete):
				incompletes++
			default:
				plainStops++
				if after := strings.Join(tableFiles(t, dir), "\n"); after != before {
					t.Fatalf("seed %d attempt %d: stopped with %v, which is not ErrRunIncomplete, yet files were deleted", seed, attempt, err)
				}
				if k := storage.KindOf(err); k != storage.ErrTransient && !errors.Is(err, ErrRunRefused) && !errors.Is(err, ErrPreviewRefused) {
					t.Fatalf("seed %d attempt %d: untyped stop (kind %v): %v", seed, attempt, k, err)
				}
			}
		}
		if !done {
			t.Fatalf("seed %d: no completion even on the healed store; last: %v", seed, lastErr)
		}
		injected += fd.Errors.Load() + fd.Timeouts.Load() + fd.Spikes.Load()
		s.Close()
		in, err := checkpoint.Show(bg, healthy, id, true)
		if err != nil || in.Health != "ok" || len(in.Deep.Missing) != 0 {
			t.Fatalf("seed %d: checkpoint after the faulty run: %+v %v", seed, in, err)
		}
		if got := strings.Join(tableFiles(t, dir), "\n"); got != want {
			t.Fatalf("seed %d: the tables differ from an uninterrupted run:\n%s\nwant\n%s", seed, got, want)
		}
	}
	t.Logf("%d seeds: %d faults injected; %d incomplete stops, %d resumes, %d stops before any deletion; %d seeds finished only once healed",
		*faultSeeds, injected, incompletes, resumes, plainStops, healed)
	if injected == 0 || incompletes+plainStops == 0 {
		t.Fatal("no fault hit the runs: the test proves nothing")
	}
}
