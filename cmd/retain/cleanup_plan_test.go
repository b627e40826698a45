package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// savedPlan is what the CLI test reads back of a plan file.
type savedPlan struct {
	Digest string `json:"digest"`
	Tables []struct {
		Table  string   `json:"table"`
		Remove []string `json:"remove"`
	} `json:"tables"`
}

func readSavedPlan(t *testing.T, path string) savedPlan {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var p savedPlan
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestCleanupReviewedPlanCLI: preview --out saves the plan and prints the
// command that applies it; run --plan with the digest applies exactly it;
// a wrong digest, and a plan made stale by a deleted checkpoint, are
// refused with status 1 and nothing deleted.
func TestCleanupReviewedPlanCLI(t *testing.T) {
	db := runFixture(t)
	plan := filepath.Join(t.TempDir(), "plan.json")
	out, errs, code := retain(t, "cleanup", "preview", db, "--keep-last", "1", "--out", plan)
	if code != 0 {
		t.Fatalf("preview --out: %d %s", code, errs)
	}
	p := readSavedPlan(t, plan)
	if !strings.HasPrefix(p.Digest, "sha256:") || !strings.Contains(out, "--plan "+plan+" --expect-digest "+p.Digest) {
		t.Fatalf("preview does not name the plan and its digest:\n%s", out)
	}

	// A second plan, made stale below by deleting the checkpoint.
	stale := filepath.Join(t.TempDir(), "stale.json")
	if _, errs, code := retain(t, "cleanup", "preview", db, "--keep-last", "1", "--out", stale); code != 0 {
		t.Fatalf("preview: %d %s", code, errs)
	}

	if _, errs, code := retain(t, "cleanup", "run", db, "--plan", plan, "--expect-digest", "sha256:0000", "--confirm-write-outage"); code != 1 || !strings.Contains(errs, "not the expected sha256:0000") {
		t.Fatalf("a wrong digest: %d %s", code, errs)
	}
	if _, errs, code := retain(t, "cleanup", "run", db, "--plan", plan, "--keep-last", "2", "--confirm-write-outage"); code != 2 || !strings.Contains(errs, "--plan carries its window") {
		t.Fatalf("a window beside the plan: %d %s", code, errs)
	}
	var listed []string
	for _, tb := range p.Tables {
		for _, k := range tb.Remove {
			listed = append(listed, filepath.Join(db, filepath.FromSlash(k)))
		}
	}
	if len(listed) == 0 {
		t.Fatal("the plan removes nothing")
	}
	if _, errs, code := retain(t, "cleanup", "run", db, "--plan", plan, "--expect-digest", p.Digest, "--confirm-write-outage"); code != 0 {
		t.Fatalf("run --plan: %d %s", code, errs)
	}
	for _, f := range listed {
		if _, err := os.Stat(f); !os.IsNotExist(err) {
			t.Errorf("%s, listed, is still there (%v)", f, err)
		}
	}

	// The stale plan: its checkpoint is gone, so its pinned version would
	// go too, which that plan did not list.
	if _, errs, code := retain(t, "checkpoint", "delete", "nightly", db); code != 0 {
		t.Fatalf("checkpoint delete: %d %s", code, errs)
	}
	v3 := filepath.Join(db, "deletes.lance", "_versions", "18446744073709551612.manifest")
	if _, errs, code := retain(t, "cleanup", "run", db, "--plan", stale, "--confirm-write-outage"); code != 1 ||
		!strings.Contains(errs, "stale") || !strings.Contains(errs, "root gone: main v3: checkpoint nightly") || !strings.Contains(errs, "nothing was deleted") {
		t.Fatalf("a stale plan: %d %s", code, errs)
	}
	if _, err := os.Stat(v3); err != nil {
		t.Fatalf("the refused run removed the formerly pinned v3: %v", err)
	}
}
