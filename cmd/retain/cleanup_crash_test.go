package main

import (
	"context"
	"encoding/json"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/retain-dev/retain/adapters/localfs"
	"github.com/retain-dev/retain/core/checkpoint/registry"
	"github.com/retain-dev/retain/core/failpoint"
	"github.com/retain-dev/retain/core/retention"
	"github.com/retain-dev/retain/core/storage"
)

// tableFiles lists every file of the store's tables except the checkpoint
// pin tags (their names carry the random checkpoint id).
func tableFiles(t *testing.T, db string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(db, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(db, p)
		if d.IsDir() {
			if rel == "_retain" || rel == ".retain-localfs" {
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

func headBoundaries(t *testing.T, db string) map[string]registry.GCBoundary {
	t.Helper()
	ctx := context.Background()
	d, err := localfs.OpenReadOnly(db)
	if err != nil {
		t.Fatal(err)
	}
	s, err := storage.NewStore(ctx, "localfs", d)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, snap, err := registry.Open(s, registry.Options{}).Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := snap.GCBoundaries()
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]registry.GCBoundary{}
	for _, g := range rows {
		m[g.Path] = g
	}
	return m
}

// TestCleanupRunCrashResume crashes `retain cleanup run` at every failpoint
// (a real process exiting mid-run), then finishes with `--resume`: the
// resume carries out the plans under the root digests the crashed run
// published, the checkpoint stays intact, and the store ends exactly as
// an uninterrupted run leaves it.
func TestCleanupRunCrashResume(t *testing.T) {
	t.Parallel() // a process-bound test: it waits on retain, Lance and emulators, not the CPU
	ref := runFixture(t)
	if _, errs, code := retain(t, "cleanup", "run", ref, "--confirm-write-outage", "--keep-last", "1"); code != 0 {
		t.Fatalf("reference run: %d %s", code, errs)
	}
	want := tableFiles(t, ref)

	for _, fp := range retention.RunFailpoints {
		t.Run(strings.ReplaceAll(fp, "/", "_"), func(t *testing.T) {
			db := runFixture(t)
			_, errs, code := retainEnv(t, []string{failpoint.Env + "=" + fp}, "cleanup", "run", db, "--confirm-write-outage", "--keep-last", "1")
			if code != failpoint.ExitCode {
				t.Fatalf("crash at %s: exit %d %s", fp, code, errs)
			}
			// Whatever the crash left, the checkpoint is intact.
			if _, errs, code := retain(t, "checkpoint", "show", "nightly", db, "--deep"); code != 0 {
				t.Fatalf("checkpoint after the crash: %d %s", code, errs)
			}
			// The dead run still holds the claim: another run is refused.
			if _, errs, code := retain(t, "cleanup", "run", db, "--confirm-write-outage", "--keep-last", "1"); code != 1 || !strings.Contains(errs, "held") {
				t.Fatalf("new run after the crash: %d %s", code, errs)
			}
			if fp == retention.FPRunAfterClaim {
				// Nothing journaled: nothing to resume; the operator takes
				// the dead run's claim over and runs again.
				if _, errs, code := retain(t, "cleanup", "run", db, "--resume", "--confirm-write-outage"); code != 1 || !strings.Contains(errs, "nothing to resume") {
					t.Fatalf("resume without a journal: %d %s", code, errs)
				}
				out, _, _ := retain(t, "claim", "status", db, "--json")
				var st struct {
					Holder struct {
						OwnerToken string `json:"owner_token"`
					} `json:"holder"`
				}
				json.Unmarshal([]byte(out), &st)
				if _, errs, code := retain(t, "claim", "takeover", db, "--token", st.Holder.OwnerToken, "--reason", "crashed cleanup"); code != 0 {
					t.Fatalf("takeover: %d %s (%s)", code, errs, out)
				}
			} else {
				before := headBoundaries(t, db)
				out, errs, code := retain(t, "cleanup", "run", db, "--resume", "--confirm-write-outage", "--json")
				var rep retention.RunReport
				if code != 0 || json.Unmarshal([]byte(out), &rep) != nil || !rep.Resumed || rep.Failed != 0 {
					t.Fatalf("resume: %d %s %s", code, out, errs)
				}
				for _, tr := range rep.Tables {
					if b, ok := before[tr.Table]; !ok || tr.RootDigest != b.RootDigest || b.OperationID != rep.OperationID {
						t.Fatalf("%s resumed under digest %s; the crashed run published %+v", tr.Table, tr.RootDigest, b)
					}
				}
				if after := headBoundaries(t, db); len(after) != len(before) {
					t.Fatalf("boundaries changed by resume: %v -> %v", before, after)
				}
			}
			if fp == retention.FPRunAfterClaim {
				if _, errs, code := retain(t, "cleanup", "run", db, "--confirm-write-outage", "--keep-last", "1"); code != 0 {
					t.Fatalf("run after takeover: %d %s", code, errs)
				}
			}
			if _, errs, code := retain(t, "checkpoint", "show", "nightly", db, "--deep"); code != 0 {
				t.Fatalf("checkpoint after resume: %d %s", code, errs)
			}
			if got := tableFiles(t, db); strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Fatalf("after crash at %s and resume the tables differ from an uninterrupted run:\n got %v\nwant %v", fp, got, want)
			}
			if _, errs, code := retain(t, "cleanup", "run", db, "--resume", "--confirm-write-outage"); code != 1 || !strings.Contains(errs, "nothing to resume") {
				t.Fatalf("second resume: %d %s", code, errs)
			}
		})
	}
}
