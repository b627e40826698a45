package lance

// Carrying out plans: stale and foreign plans, a failing manifest delete, a dataset at the store root.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/retain-dev/retain/core/storage"
)

// TestExecuteCleanupRefusesStalePlans: a commit, a tag or a branch since
// planning refuses the execution (ErrPlanStale) with nothing deleted.
func TestExecuteCleanupRefusesStalePlans(t *testing.T) {
	cases := []struct {
		name   string
		change func(t *testing.T, d *Dataset, dir string)
	}{
		{"tag created", func(t *testing.T, d *Dataset, dir string) {
			if _, err := d.CreateTag(bg, "late", 1, nil); err != nil {
				t.Fatal(err)
			}
		}},
		{"tag deleted", func(t *testing.T, d *Dataset, dir string) {
			if err := d.DeleteTag(bg, "v2-tag", ""); err != nil {
				t.Fatal(err)
			}
		}},
		{"tag rewritten", func(t *testing.T, d *Dataset, dir string) {
			p := filepath.Join(dir, "branch-tag.lance/_refs/tags/v2-tag.json")
			b, _ := os.ReadFile(p)
			refWriteFile(t, p, strings.Replace(string(b), `"version": 2`, `"version": 1`, 1))
		}},
		{"branch created", func(t *testing.T, d *Dataset, dir string) {
			b, _ := os.ReadFile(filepath.Join(dir, "branch-tag.lance/_refs/branches/exp.json"))
			refWriteFile(t, filepath.Join(dir, "branch-tag.lance/_refs/branches/exp2.json"), string(b))
		}},
		{"commit on main", func(t *testing.T, d *Dataset, dir string) {
			b, _ := os.ReadFile(filepath.Join(dir, "branch-tag.lance", versionsDir, ManifestName(3, NamingV2)))
			refWriteFile(t, filepath.Join(dir, "branch-tag.lance", versionsDir, ManifestName(4, NamingV2)), string(b))
		}},
		{"commit on a branch", func(t *testing.T, d *Dataset, dir string) {
			b, _ := os.ReadFile(filepath.Join(dir, "branch-tag.lance/tree/team/x", versionsDir, ManifestName(5, NamingV2)))
			refWriteFile(t, filepath.Join(dir, "branch-tag.lance/tree/team/x", versionsDir, ManifestName(6, NamingV2)), string(b))
		}},
	}
	// Planned from one page of the whole table and rechecked with one
	// (cleanup_whole.go), and folder by folder.
	for _, c := range cases {
		for _, folders := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/folder-by-folder=%v", c.name, folders), func(t *testing.T) {
				dir := copyFixture(t, "branch-tag")
				g := &guardDriver{okBatches: -1}
				d := mustOpen(t, guardedStore(t, dir, g), "branch-tag.lance")
				plan, err := d.PlanCleanup(bg, Policy{KeepLast: 1, folderByFolder: folders})
				if err != nil || len(plan.Files) == 0 || plan.Snapshot.Whole == folders {
					t.Fatalf("%v, %d files, whole %v", err, len(plan.Files), plan.Snapshot.Whole)
				}
				c.change(t, d, dir)
				g.forbidDeletes = true
				before := dirFiles(t, dir)
				_, err = d.ExecuteCleanup(bg, plan)
				if !errors.Is(err, ErrPlanStale) || !errors.Is(err, ErrCleanupRefused) {
					t.Fatalf("%v; want ErrPlanStale", err)
				}
				t.Logf("%v", err)
				if g := gone(before, dirFiles(t, dir)); len(g) != 0 {
					t.Errorf("deleted %v", g)
				}
			})
		}
	}
}

// TestExecuteCleanupRefusesForeignPlans: a plan edited to delete what
// cleanup never deletes is refused whole.
func TestExecuteCleanupRefusesForeignPlans(t *testing.T) {
	dir := copyFixture(t, "branch-tag")
	g := &guardDriver{forbidDeletes: true, okBatches: -1}
	d := mustOpen(t, guardedStore(t, dir, g), "branch-tag.lance")
	plan, err := d.PlanCleanup(bg, Policy{KeepLast: 1})
	if err != nil {
		t.Fatal(err)
	}
	kept := versionOf(t, plan, "", 3)
	for _, key := range []string{
		d.Key("_refs/tags/v2-tag.json"),
		d.Key("_refs/branches/exp.json"),
		kept.Key,
		d.Key("_versions/latest_version_hint.json"),
		d.Key("_mem_wal/x.lance"),
		d.Key("data/notes.txt"),
		"elsewhere/data/x.lance",
		d.Key("tree/ghost/data/x.lance"),
	} {
		p := *plan
		p.Files = append(append([]PlannedFile(nil), plan.Files...), PlannedFile{Key: key, Kind: KindData})
		_, err := d.ExecuteCleanup(bg, &p)
		if !errors.Is(err, ErrCleanupRefused) || !strings.Contains(err.Error(), key) {
			t.Errorf("plan deleting %s: %v", key, err)
		}
	}
	if _, err := mustOpen(t, d.Store, "other.lance").ExecuteCleanup(bg, plan); storage.KindOf(err) != storage.ErrInvalidArgument {
		t.Errorf("a plan for another dataset: %v", err)
	}
}

// TestExecuteCleanupManifestFailureStops: when a manifest cannot be
// deleted, no other file is, since its version still exists.
func TestExecuteCleanupManifestFailureStops(t *testing.T) {
	dir := copyFixture(t, "deletes")
	g := &guardDriver{okBatches: -1}
	d := mustOpen(t, guardedStore(t, dir, g), "deletes.lance")
	plan, err := d.PlanCleanup(bg, Policy{KeepLast: 1})
	if err != nil {
		t.Fatal(err)
	}
	if plan.Totals.ManifestsToDelete != 4 || plan.Totals.FilesToDelete <= 4 {
		t.Fatalf("totals %+v", plan.Totals)
	}
	g.failKey = map[string]bool{plan.Files[1].Key: true}
	before := dirFiles(t, dir)
	res, err := d.ExecuteCleanup(bg, plan)
	if err == nil || len(res.Failed) != 1 || res.Failed[0].Key != plan.Files[1].Key || res.ManifestsDeleted != 3 || res.FilesDeleted != 3 {
		t.Fatalf("%+v, %v", res, err)
	}
	if g.batches != 1 {
		t.Errorf("%d DeleteMany calls; the files must wait for every manifest", g.batches)
	}
	if n := len(gone(before, dirFiles(t, dir))); n != 3 {
		t.Errorf("%d objects deleted, want the 3 manifests", n)
	}
	// The next run finishes the job: the version is still removed, so its
	// files are still proven.
	// Files only the deleted manifests referenced lost their proof: they
	// go once older than the safety window.
	g.failKey = nil
	plan2, err := d.PlanCleanup(bg, Policy{KeepLast: 1, Now: func() time.Time { return time.Now().Add(DefaultSafetyWindow + time.Minute) }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.ExecuteCleanup(bg, plan2); err != nil {
		t.Fatal(err)
	}
	after := dirFiles(t, dir)
	if g := gone(before, after); len(g) != plan.Totals.FilesToDelete {
		t.Errorf("deleted %d of %d planned: %v", len(g), plan.Totals.FilesToDelete, g)
	}
	keptFilesExist(t, d, plan2)
}

// TestCleanupDatasetAtStoreRoot: a dataset may be the store's root.
func TestCleanupDatasetAtStoreRoot(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("testdata", "branch-tag.lance"))); err != nil {
		t.Fatal(err)
	}
	d := mustOpen(t, openStore(t, dir), "")
	before := dirFiles(t, dir)
	plan, err := d.PlanCleanup(bg, Policy{KeepLast: 1})
	if err != nil {
		t.Fatal(err)
	}
	if plan.Totals.VersionsRemoved != 3 || plan.Totals.FilesToDelete != 6 {
		t.Fatalf("totals %+v", plan.Totals)
	}
	if _, err := d.ExecuteCleanup(bg, plan); err != nil {
		t.Fatal(err)
	}
	if g := gone(before, dirFiles(t, dir)); strings.Join(g, "\n") != strings.Join(planKeys(plan), "\n") {
		t.Errorf("deleted %v, planned %v", g, planKeys(plan))
	}
	keptFilesExist(t, d, plan)
}
