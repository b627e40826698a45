package lance

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/retain-dev/retain/adapters/localfs"
	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/storagetest"
)

// TestReadRefsOneListing: ReadRefs reads the tags ListTags reads and the
// branches ListBranches reads with one listing of _refs/, and a plan
// given them (Policy.Refs) is the plan made without them, with no listing
// of _refs/ of its own.
func TestReadRefsOneListing(t *testing.T) {
	dir := copyFixture(t, "branch-tag")
	drv, err := localfs.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	cnt := storagetest.NewCounting(drv)
	s, err := storage.NewStore(bg, "localfs", cnt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	d := mustOpen(t, s, "branch-tag.lance")

	before := cnt.Counts()
	refs, err := d.ReadRefs(bg)
	if err != nil || refs.TagsErr != nil {
		t.Fatal(err, refs.TagsErr)
	}
	if got := cnt.Counts().List - before.List; got != 1 {
		t.Errorf("ReadRefs listed %d times, want 1 (_refs/ once)", got)
	}
	tags, err := d.ListTags(bg)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(refs.Tags, tags) {
		t.Errorf("ReadRefs tags %+v, ListTags %+v", refs.Tags, tags)
	}
	branches, err := refs.branches(bg, d)
	if err != nil {
		t.Fatal(err)
	}
	want, err := d.ListBranches(bg)
	if err != nil || len(want) == 0 {
		t.Fatalf("%v: the fixture has %d branches", err, len(want))
	}
	if !reflect.DeepEqual(branches, want) {
		t.Errorf("ReadRefs branches %+v, ListBranches %+v", branches, want)
	}

	plain, err := d.PlanCleanup(bg, Policy{KeepLast: 1})
	if err != nil {
		t.Fatal(err)
	}
	before = cnt.Counts()
	given, err := d.PlanCleanup(bg, Policy{KeepLast: 1, Refs: refs})
	if err != nil {
		t.Fatal(err)
	}
	gets := cnt.Counts().Get - before.Get
	if !reflect.DeepEqual(plain.Files, given.Files) || !reflect.DeepEqual(plain.Snapshot, given.Snapshot) {
		t.Errorf("a plan given the refs differs from one that read them:\n%+v\n%+v", given.Files, plain.Files)
	}
	before = cnt.Counts()
	if _, err := d.PlanCleanup(bg, Policy{KeepLast: 1}); err != nil {
		t.Fatal(err)
	}
	if own := cnt.Counts().Get - before.Get; gets != own-int64(len(refs.Tags)) {
		t.Errorf("a plan given the refs made %d reads, one reading them %d: want the %d tag files fewer", gets, own, len(refs.Tags))
	}
}

// TestPlanFromOldRefsRefusesChange: refs read before a tag or a branch
// changed give a plan that ExecuteCleanup refuses as stale, deleting
// nothing: handing a plan older refs never costs data.
func TestPlanFromOldRefsRefusesChange(t *testing.T) {
	for _, c := range []struct {
		name   string
		change func(t *testing.T, d *Dataset, dir string)
	}{
		{"tag created on a removed version", func(t *testing.T, d *Dataset, dir string) {
			if _, err := d.CreateTag(bg, "late", 1, nil); err != nil {
				t.Fatal(err)
			}
		}},
		{"branch created", func(t *testing.T, d *Dataset, dir string) {
			b, _ := os.ReadFile(filepath.Join(dir, "branch-tag.lance/_refs/branches/exp.json"))
			refWriteFile(t, filepath.Join(dir, "branch-tag.lance/_refs/branches/exp2.json"), string(b))
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := copyFixture(t, "branch-tag")
			g := &guardDriver{okBatches: -1}
			d := mustOpen(t, guardedStore(t, dir, g), "branch-tag.lance")
			refs, err := d.ReadRefs(bg)
			if err != nil {
				t.Fatal(err)
			}
			c.change(t, d, dir)
			plan, err := d.PlanCleanup(bg, Policy{KeepLast: 1, Refs: refs})
			if err != nil || len(plan.Files) == 0 {
				t.Fatalf("%v, %d files", err, len(plan.Files))
			}
			g.forbidDeletes = true
			before := dirFiles(t, dir)
			if _, err := d.ExecuteCleanup(bg, plan); !errors.Is(err, ErrPlanStale) {
				t.Fatalf("%v; want ErrPlanStale", err)
			}
			if g := gone(before, dirFiles(t, dir)); len(g) != 0 {
				t.Errorf("deleted %v", g)
			}
		})
	}
}

// TestPlanIgnoresOtherDatasetsRefs: refs of another dataset are not taken.
func TestPlanIgnoresOtherDatasetsRefs(t *testing.T) {
	dir := copyFixture(t, "branch-tag")
	d := mustOpen(t, guardedStore(t, dir, &guardDriver{okBatches: -1}), "branch-tag.lance")
	plain, err := d.PlanCleanup(bg, Policy{KeepLast: 1})
	if err != nil {
		t.Fatal(err)
	}
	other, err := d.PlanCleanup(bg, Policy{KeepLast: 1, Refs: &Refs{Dataset: "elsewhere.lance"}})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(plain.Snapshot, other.Snapshot) {
		t.Errorf("a plan took another dataset's (empty) refs: %+v, want %+v", other.Snapshot, plain.Snapshot)
	}
}
