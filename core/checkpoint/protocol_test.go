package checkpoint

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/retain-dev/retain/core/checkpoint/registry"
	"github.com/retain-dev/retain/core/failpoint"
	"github.com/retain-dev/retain/core/lance"
	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/storagetest"
)

func TestDeleteRemovesTagsAndRevive(t *testing.T) {
	s, _, _ := localStore(t, "v2-appends", "branch-tag")
	c, err := Create(bg, s, "eod", "")
	if err != nil {
		t.Fatal(err)
	}
	d, err := Delete(bg, s, "eod")
	if err != nil || len(d.TagErrors) != 0 {
		t.Fatal(err, d)
	}
	if len(d.TagsDeleted) != 3 {
		t.Fatalf("deleted %v", d.TagsDeleted)
	}
	for _, root := range []string{"v2-appends.lance", "branch-tag.lance", registry.RegistryPath} {
		if n := len(pinTags(t, s, root)); n != 0 {
			t.Fatalf("%s keeps %d pin tags", root, n)
		}
	}
	if _, ok := tags(t, s, "branch-tag.lance")["v2-tag"]; !ok {
		t.Fatal("user tag removed")
	}
	_, snap := head(t, s)
	cp, err := snap.ByID(c.ID)
	if err != nil || cp.State != registry.Tombstoned || cp.Tombstone.DeleteOperationID != d.OperationID {
		t.Fatalf("tombstone: %+v %v", cp, err)
	}
	// Deleting again by id: already tombstoned, nothing to do.
	d2, err := Delete(bg, s, string(c.ID))
	if err != nil || !d2.AlreadyTombstoned || d2.OperationID != d.OperationID {
		t.Fatalf("again: %+v %v", d2, err)
	}
	// The name is revived with a fresh id and generation 2.
	c2, err := Create(bg, s, "eod", "")
	if err != nil || c2.ID == c.ID || c2.Generation != 2 {
		t.Fatalf("revive: %+v %v", c2, err)
	}
}

func TestListShowHealthAndDeep(t *testing.T) {
	s, _, dir := localStore(t, "v2-appends", "branch-tag")
	c, err := Create(bg, s, "a", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Create(bg, s, "b", ""); err != nil {
		t.Fatal(err)
	}
	_, infos, err := List(bg, s)
	if err != nil || len(infos) != 2 || infos[0].Name != "a" || infos[0].Health != "ok" || infos[0].TableCount != 2 || len(infos[0].Pins) != 3 {
		t.Fatalf("list: %+v %v", infos, err)
	}
	in, err := Show(bg, s, "a", true)
	if err != nil || in.Deep == nil || len(in.Deep.Missing) != 0 || in.Deep.FilesChecked < 4 {
		t.Fatalf("show deep: %+v %v", in, err)
	}
	// Remove one pin and one data file.
	ds, _ := lance.Open(s, "v2-appends.lance")
	var tag string
	for _, ct := range c.Tables {
		if ct.Path == "v2-appends.lance" {
			tag = ct.Tag
		}
	}
	if err := ds.DeleteTag(bg, tag, ""); err != nil {
		t.Fatal(err)
	}
	data, _ := filepath.Glob(filepath.Join(dir, "v2-appends.lance", "data", "*"))
	if err := os.Remove(data[0]); err != nil {
		t.Fatal(err)
	}
	in, err = Show(bg, s, string(c.ID), true)
	if err != nil || in.Health != "degraded" || len(in.Deep.Missing) != 1 {
		t.Fatalf("degraded: %+v %v", in, err)
	}
	missing := 0
	for _, p := range in.Pins {
		if p.Status == PinMissing {
			missing++
		}
	}
	if missing != 1 {
		t.Fatalf("pins %+v", in.Pins)
	}
}

func TestReconcileRepairsAndReclaims(t *testing.T) {
	s, _, _ := localStore(t, "v2-appends", "branch-tag")
	c, err := Create(bg, s, "a", "")
	if err != nil {
		t.Fatal(err)
	}
	// A deleted checkpoint "b" whose pins are reclaimed only by reconcile.
	b, err := Create(bg, s, "b", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Delete(bg, s, "b"); err != nil {
		t.Fatal(err)
	}
	// A deleted pin, a deleted registry pin, a leftover pin of the deleted
	// checkpoint, an unparseable reserved tag.
	ds, _ := lance.Open(s, "branch-tag.lance")
	for _, ct := range c.Tables {
		if ct.Path == "branch-tag.lance" {
			if err := ds.DeleteTag(bg, ct.Tag, ""); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := registryDataset(s).DeleteTag(bg, c.RegistryPinTag, ""); err != nil {
		t.Fatal(err)
	}
	orphan := registry.PinTagPrefix(b.ID) + "t_" + "0000000000000000000000000000000000000000000000000000000000000000"
	if _, err := ds.CreateTag(bg, orphan, 2, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ds.CreateTag(bg, "ogcp_handmade", 1, nil); err != nil {
		t.Fatal(err)
	}
	rep, err := Reconcile(bg, s)
	if !errors.Is(err, ErrConflicts) || len(rep.Conflicts) != 1 || rep.Conflicts[0].Kind != ConflictUnknownReserved {
		t.Fatalf("reconcile: %v %+v", err, rep)
	}
	if len(rep.Repaired) != 2 || len(rep.Reclaimed) != 1 || rep.Reclaimed[0].Tag != orphan {
		t.Fatalf("report %+v", rep)
	}
	in, err := Show(bg, s, "a", false)
	if err != nil || in.Health != "ok" {
		t.Fatalf("after: %+v %v", in, err)
	}
	if _, ok := tags(t, s, "branch-tag.lance")["ogcp_handmade"]; !ok {
		t.Fatal("an unparseable reserved tag was deleted")
	}
	// Idempotent: only the untouched conflict remains.
	if err := ds.DeleteTag(bg, "ogcp_handmade", ""); err != nil {
		t.Fatal(err)
	}
	rep, err = Reconcile(bg, s)
	if err != nil || len(rep.Repaired)+len(rep.Reclaimed)+len(rep.Conflicts) != 0 {
		t.Fatalf("second reconcile: %v %+v", err, rep)
	}
}

// TestReconcileConflictFailsClosed: a table recreated under a live
// checkpoint is a conflict; reconcile touches nothing on that table.
func TestReconcileConflictFailsClosed(t *testing.T) {
	s, _, dir := localStore(t, "v2-appends")
	c, err := Create(bg, s, "a", "")
	if err != nil {
		t.Fatal(err)
	}
	gone, err := Create(bg, s, "gone", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Delete(bg, s, "gone"); err != nil {
		t.Fatal(err)
	}
	// Recreate the table (same versions, other commits), without tags,
	// then add a reclaimable leftover pin (of the deleted checkpoint)
	// there.
	tbl := filepath.Join(dir, "v2-appends.lance")
	if err := os.RemoveAll(tbl); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(tbl, os.DirFS(filepath.Join(fixtures, "v2-appends-again.lance"))); err != nil {
		t.Fatal(err)
	}
	ds, _ := lance.Open(s, "v2-appends.lance")
	orphan := registry.PinTagPrefix(gone.ID) + "t_" + "1111111111111111111111111111111111111111111111111111111111111111"
	if _, err := ds.CreateTag(bg, orphan, 1, nil); err != nil {
		t.Fatal(err)
	}
	rep, err := Reconcile(bg, s)
	if !errors.Is(err, ErrConflicts) || len(rep.Conflicts) != 1 || rep.Conflicts[0].Kind != ConflictIncarnationChanged {
		t.Fatalf("%v %+v", err, rep)
	}
	if _, ok := pinTags(t, s, "v2-appends.lance")[orphan]; !ok || len(rep.Reclaimed) != 0 {
		t.Fatal("reconcile acted on a conflicted table")
	}
	// Delete reconciles first: with a conflict it refuses and deletes
	// nothing, not even the checkpoint it was asked to delete.
	if _, err := Delete(bg, s, "a"); !errors.Is(err, ErrConflicts) {
		t.Fatalf("delete with a conflict pending: %v", err)
	}
	if _, cps, err := List(bg, s); err != nil || len(cps) != 1 {
		t.Fatalf("the refused delete changed the registry: %+v %v", cps, err)
	}
	if _, ok := pinTags(t, s, "v2-appends.lance")[orphan]; !ok {
		t.Fatal("the refused delete reclaimed a tag")
	}
	// The next checkpoint sees a new incarnation.
	c2, err := Create(bg, s, "b", "")
	if err != nil || !c2.Tables[0].NewIncarnation || c2.Tables[0].Incarnation != 2 || c2.Tables[0].TableID != c.Tables[0].TableID {
		t.Fatalf("incarnation: %+v %v", c2, err)
	}
}

// TestCreateABA: the table is deleted and recreated at the same path and
// versions between capture and tagging. The heads read again after the
// tags find another commit at the tagged version: create rolls its tags
// back and starts over, and the next attempt pins the recreated table.
// Recreated before every attempt, create gives up with ErrSourceChanged
// and leaves nothing.
func TestCreateABA(t *testing.T) {
	recreate := func(dir, fixture string) {
		tbl := filepath.Join(dir, "v2-appends.lance")
		os.RemoveAll(tbl)
		if err := os.CopyFS(tbl, os.DirFS(filepath.Join(fixtures, fixture+".lance"))); err != nil {
			panic(err)
		}
	}
	t.Run("once", func(t *testing.T) {
		s, _, dir := localStore(t, "v2-appends")
		testHookBeforeTags = func() {
			testHookBeforeTags = nil
			recreate(dir, "v2-appends-again")
		}
		defer func() { testHookBeforeTags = nil }()
		c, err := Create(bg, s, "a", "")
		if err != nil || c.Attempts != 2 {
			t.Fatalf("ABA once: %+v %v", c, err)
		}
		if again := headRef(t, s, "v2-appends.lance"); c.Tables[0].PhysicalRef != again {
			t.Fatalf("pinned %s, the recreated table's commit is %s", c.Tables[0].PhysicalRef, again)
		}
		if tags := pinTags(t, s, "v2-appends.lance"); len(tags) != 1 {
			t.Fatalf("the first attempt's tag was not rolled back: %v", tags)
		}
		if tags := pinTags(t, s, registry.RegistryPath); len(tags) != 1 {
			t.Fatalf("the first attempt's registry pin was not rolled back: %v", tags)
		}
		noSidecars(t, s)
	})
	t.Run("every attempt", func(t *testing.T) {
		s, _, dir := localStore(t, "v2-appends")
		n := 0
		testHookBeforeTags = func() {
			n++
			recreate(dir, []string{"v2-appends", "v2-appends-again"}[n%2])
		}
		defer func() { testHookBeforeTags = nil }()
		_, err := Create(bg, s, "a", "")
		if !errors.Is(err, ErrSourceChanged) || n != 3 {
			t.Fatalf("ABA on every attempt (%d): %v", n, err)
		}
		v, _ := head(t, s)
		if v != 0 || len(pinTags(t, s, "v2-appends.lance")) != 0 || len(pinTags(t, s, registry.RegistryPath)) != 0 {
			t.Fatalf("left behind: head %d", v)
		}
		noSidecars(t, s)
	})
}

// TestCreateHeadMovedStartsOver: a table commits between capture and
// tagging. The heads read after the tags differ from the capture's, so
// there was no moment at which the captured heads were all the heads:
// create rolls its tags back and starts over, and the second attempt
// pins the new head.
func TestCreateHeadMovedStartsOver(t *testing.T) {
	s, _, dir := localStore(t, "v2-appends")
	ds, err := lance.Open(s, "v2-appends.lance")
	if err != nil {
		t.Fatal(err)
	}
	latest, err := ds.Latest(bg)
	if err != nil {
		t.Fatal(err)
	}
	// Hold the newest commit back until after capture.
	file := filepath.Join(dir, filepath.FromSlash(latest.Info.Key))
	aside := filepath.Join(t.TempDir(), "next.manifest")
	if err := os.Rename(file, aside); err != nil {
		t.Fatal(err)
	}
	testHookBeforeTags = func() {
		testHookBeforeTags = nil
		if err := os.Rename(aside, file); err != nil {
			panic(err)
		}
	}
	defer func() { testHookBeforeTags = nil }()
	c, err := Create(bg, s, "a", "")
	if err != nil || c.Attempts != 2 || c.Tables[0].Version != latest.N {
		t.Fatalf("a head that moved before the tags: %+v %v (want version %d on attempt 2)", c, err, latest.N)
	}
	if tags := pinTags(t, s, "v2-appends.lance"); len(tags) != 1 {
		t.Fatalf("the first attempt's tag was not rolled back: %v", tags)
	}
	noSidecars(t, s)
}

// headRef is the physical ref of the head of the table at path.
func headRef(t testing.TB, s *storage.Store, path string) string {
	t.Helper()
	ds, err := lance.Open(s, path)
	if err != nil {
		t.Fatal(err)
	}
	v, err := ds.Latest(bg)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := ds.PhysRef(bg, v)
	if err != nil {
		t.Fatal(err)
	}
	return ref.String()
}

func TestCheckUserTag(t *testing.T) {
	if err := CheckUserTag("ogcp_v1_x"); !errors.Is(err, ErrReservedTag) || !errors.Is(err, storage.ErrInvalidArgument) {
		t.Fatal(err)
	}
	if err := CheckUserTag("release-1"); err != nil {
		t.Fatal(err)
	}
}

// TestCrashCreate runs create in a real child process (this test binary,
// re-executed) that exits at each failpoint, then reconciles and checks
// the invariants: a published checkpoint keeps every pin; an unpublished
// one leaves no tag and no sidecar.
func TestCrashCreate(t *testing.T) {
	if dir := os.Getenv("PROTOCOL_CHILD_DIR"); dir != "" {
		s := openLocal(t, dir)
		if _, err := Create(bg, s.At(storage.Location{Scheme: "file", Path: dir}), "crash", ""); err != nil {
			t.Fatal(err)
		}
		return
	}
	for _, fp := range CreateFailpoints {
		t.Run(filepath.Base(fp), func(t *testing.T) {
			s, _, dir := localStore(t, "v2-appends", "branch-tag")
			cmd := storagetest.Child("TestCrashCreate", []string{"PROTOCOL_CHILD_DIR=" + dir, failpoint.Env + "=" + fp})
			out, err := cmd.CombinedOutput()
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != failpoint.ExitCode {
				t.Fatalf("child: %v\n%s", err, out)
			}
			// A claim left by the dead process: take it over as an operator would.
			clearDeadClaim(t, s)
			if _, err := Reconcile(bg, s); err != nil {
				t.Fatal(err)
			}
			noSidecars(t, s)
			_, snap := head(t, s)
			published := len(snap.Live()) == 1
			wantPublished := fp == FPCreateAfterCommit || fp == FPCreateAfterSidecarGone || fp == FPCreateAfterRelease
			if published != wantPublished {
				t.Fatalf("published %v, want %v", published, wantPublished)
			}
			n := 0
			for _, root := range []string{"v2-appends.lance", "branch-tag.lance", registry.RegistryPath} {
				n += len(pinTags(t, s, root))
			}
			if published {
				in, err := Show(bg, s, "crash", true)
				if err != nil || in.Health != "ok" || len(in.Deep.Missing) != 0 || n != 3 {
					t.Fatalf("published but unhealthy: %+v %v (%d tags)", in, err, n)
				}
			} else if n != 0 {
				t.Fatalf("%d pin tags left after rollback", n)
			}
			// The store works on: the name can be (re)used.
			if !published {
				if _, err := Create(bg, s, "crash", ""); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}
