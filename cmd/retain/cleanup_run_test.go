package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/retain-dev/retain/adapters/localfs"
	"github.com/retain-dev/retain/core/checkpoint/registry"
	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/claim"
)

// runFixture: deletes.lance and branch-tag.lance with checkpoint
// "nightly" on deletes.lance v3; v4 and v5 committed after it.
func runFixture(t *testing.T) string {
	t.Helper()
	db := fixtureDB(t, "deletes", "branch-tag")
	hidden := t.TempDir()
	later := []string{"18446744073709551611.manifest", "18446744073709551610.manifest"} // v4, v5
	vdir := filepath.Join(db, "deletes.lance", "_versions")
	for _, n := range later {
		if err := os.Rename(filepath.Join(vdir, n), filepath.Join(hidden, n)); err != nil {
			t.Fatal(err)
		}
	}
	if _, errs, code := retain(t, "checkpoint", "create", "nightly", db); code != 0 {
		t.Fatalf("create: %d %s", code, errs)
	}
	for _, n := range later {
		if err := os.Rename(filepath.Join(hidden, n), filepath.Join(vdir, n)); err != nil {
			t.Fatal(err)
		}
	}
	return db
}

func TestCleanupRunCLI(t *testing.T) {
	db := runFixture(t)
	v3 := filepath.Join(db, "deletes.lance", "_versions", "18446744073709551612.manifest")
	v4 := filepath.Join(db, "deletes.lance", "_versions", "18446744073709551611.manifest")

	if _, errs, code := retain(t, "cleanup", "run", db, "--keep-last", "1"); code != 2 || !strings.Contains(errs, "write outage") {
		t.Fatalf("unconfirmed: %d %s", code, errs)
	}
	if _, errs, code := retain(t, "cleanup", "run", db, "--confirm-write-outage"); code != 2 || !strings.Contains(errs, "--keep-last") {
		t.Fatalf("no window: %d %s", code, errs)
	}

	// While another cleanup holds the claim, run is refused.
	ctx := context.Background()
	d, err := localfs.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	s, err := storage.NewStore(ctx, "localfs", d)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	h, err := claim.Acquire(ctx, s, claim.Request{Action: "cleanup", Scope: claim.ScopeFor(storage.Location{Scheme: "file", Path: db})})
	if err != nil {
		t.Fatal(err)
	}
	if _, errs, code := retain(t, "cleanup", "run", db, "--confirm-write-outage", "--keep-last", "1"); code != 1 || !strings.Contains(errs, "held") {
		t.Fatalf("held claim: %d %s", code, errs)
	}
	if _, err := os.Stat(v4); err != nil {
		t.Fatal("cleaned while the claim was held")
	}
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}

	out, errs, code := retain(t, "cleanup", "run", db, "--confirm-write-outage", "--keep-last", "1", "--json")
	var rep struct {
		OperationID     string `json:"operation_id"`
		BoundaryVersion uint64 `json:"boundary_version"`
		Failed          int    `json:"failed"`
		Boundaries      []struct {
			Path       string `json:"path"`
			RootDigest string `json:"root_digest"`
		} `json:"boundaries"`
		Tables []struct {
			Table           string `json:"table"`
			VersionsRemoved int    `json:"versions_removed"`
			FilesDeleted    int    `json:"files_deleted"`
			Error           string `json:"error"`
		} `json:"tables"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil {
		t.Fatalf("run: %d %s %s", code, out, errs)
	}
	if rep.Failed != 0 || len(rep.Tables) != 2 || len(rep.Boundaries) != 2 || rep.BoundaryVersion == 0 {
		t.Fatalf("report: %s", out)
	}
	if _, err := os.Stat(v4); err == nil {
		t.Fatal("deletes v4 survived")
	}
	if _, err := os.Stat(v3); err != nil {
		t.Fatal("pinned deletes v3 removed")
	}
	_, snap, err := registry.Open(s, registry.Options{}).Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := snap.GCBoundaries()
	if err != nil || len(rows) != 2 || rows[0].OperationID != rep.OperationID {
		t.Fatalf("head boundaries: %+v %v", rows, err)
	}
	if _, errs, code := retain(t, "checkpoint", "show", "nightly", db, "--deep"); code != 0 {
		t.Fatalf("show --deep after cleanup: %d %s", code, errs)
	}

	out, errs, code = retain(t, "cleanup", "run", db, "--confirm-write-outage", "--keep-last", "1")
	if code != 0 || !strings.Contains(out, "total: 2 tables cleaned, 0 failed") {
		t.Fatalf("second run: %d %s %s", code, out, errs)
	}
}

// A table whose deletes fail makes the run exit 1, the other is cleaned.
func TestCleanupRunCLITableFails(t *testing.T) {
	db := runFixture(t)
	tdir := filepath.Join(db, "branch-tag.lance", "_versions")
	// Make one table's manifests undeletable. Root ignores permissions, so
	// as root the directory is made immutable (chattr +i), which binds root
	// too; without either the test cannot fail a table and says so.
	if os.Getuid() == 0 {
		if out, err := exec.Command("chattr", "+i", tdir).CombinedOutput(); err != nil {
			t.Skipf("cannot make %s immutable as root (%v: %s)", tdir, err, out)
		}
		t.Cleanup(func() { exec.Command("chattr", "-i", tdir).Run() })
	} else {
		if err := os.Chmod(tdir, 0o555); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(tdir, 0o755) })
	}
	out, errs, code := retain(t, "cleanup", "run", db, "--confirm-write-outage", "--keep-last", "1")
	if code != 1 || !strings.Contains(out, "branch-tag.lance") || !strings.Contains(out, "FAILED") || !strings.Contains(errs, "stopped part-way (1 table(s) done, 1 left)") || !strings.Contains(errs, "--resume") {
		t.Fatalf("run: %d\n%s\n%s", code, out, errs)
	}
	if _, err := os.Stat(filepath.Join(db, "deletes.lance", "_versions", "18446744073709551611.manifest")); err == nil {
		t.Fatal("deletes.lance was not cleaned")
	}
	// A new run is refused until this one is resumed; resume still fails
	// while the table is undeletable, then finishes once it is not.
	if _, errs, code := retain(t, "cleanup", "run", db, "--confirm-write-outage", "--keep-last", "1"); code != 1 || !strings.Contains(errs, "unfinished cleanup run") {
		t.Fatalf("new run while one is open: %d %s", code, errs)
	}
	if out, errs, code := retain(t, "cleanup", "preview", db, "--keep-last", "1"); code != 0 || !strings.Contains(out, "unfinished: cleanup run cleanup-") {
		t.Fatalf("preview with an unfinished run: %d %s %s", code, out, errs)
	}
	if _, errs, code := retain(t, "cleanup", "run", db, "--resume", "--keep-last", "1"); code != 2 {
		t.Fatalf("resume with a window: %d %s", code, errs)
	}
	if os.Getuid() == 0 {
		exec.Command("chattr", "-i", tdir).Run()
	} else {
		os.Chmod(tdir, 0o755)
	}
	out, errs, code = retain(t, "cleanup", "run", db, "--resume", "--confirm-write-outage", "--progress")
	if code != 0 || !strings.Contains(out, "resumed cleanup run") || !strings.Contains(errs, "[2/2] branch-tag.lance done") {
		t.Fatalf("resume: %d\n%s\n%s", code, out, errs)
	}
}
