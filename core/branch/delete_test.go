package branch

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/retain-dev/retain/core/checkpoint"
	"github.com/retain-dev/retain/core/checkpoint/registry"
	"github.com/retain-dev/retain/core/lance"
	"github.com/retain-dev/retain/core/retention/runs"
	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/claim"
)

// branchedTable builds dir/<table>.lance with real Lance: main v1 (3 rows),
// v2 (5 rows), and the given branches forked from main v2, each with one
// more append (v3, 6 rows).
func branchedTable(t testing.TB, dir, table string, branches ...string) {
	t.Helper()
	ops := []op{{"op": "create", "rows": 3}, {"op": "add", "rows": 2}}
	for _, b := range branches {
		ops = append(ops, op{"op": "branchCreate", "name": b, "from": "main", "version": 2}, op{"op": "add", "rows": 1, "on": b})
	}
	lanceOps(t, dir, table, ops...)
}

func noClaim(t testing.TB, s *storage.Store) {
	t.Helper()
	if _, _, err := claim.Read(bg, s); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("the claim was not released: %v", err)
	}
}

// A live checkpoint on the branch refuses its delete, naming the
// checkpoint; once the checkpoint is deleted and reconciled, the branch
// goes, and real Lance no longer lists it while main reads as before.
func TestBranchDeleteRefusedWhileCheckpointPins(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real Lance (Node)")
	}
	dir := t.TempDir()
	branchedTable(t, dir, "t", "exp")
	s, loc := localStore(t, dir)
	c, err := checkpoint.Create(bg, s, "pinned", "exp")
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Tables) != 1 || c.Tables[0].Branch != "exp" || c.Tables[0].Version != 3 {
		t.Fatalf("checkpoint: %+v", c.Tables)
	}
	before := files(t, dir, "t")

	_, err = Delete(bg, s, "exp", Options{})
	for _, target := range []error{ErrCheckpointPinsBranch, ErrRefused, storage.ErrPreconditionFailed} {
		if !errors.Is(err, target) {
			t.Fatalf("refusal %v does not match %v", err, target)
		}
	}
	var pins *CheckpointPinsBranchError
	if !errors.As(err, &pins) || !reflect.DeepEqual(pins.IDs(), []registry.ID{c.ID}) || pins.Checkpoints[0].Name != "pinned" ||
		!reflect.DeepEqual(pins.Tables(), []string{"t.lance"}) || pins.Checkpoints[0].Tables[0].Version != 3 {
		t.Fatalf("pins: %+v", err)
	}
	var refused *RefusedError
	if !errors.As(err, &refused) || len(refused.Tables) != 0 || !strings.Contains(err.Error(), string(c.ID)) || !strings.Contains(err.Error(), `"pinned"`) {
		t.Fatalf("refusal: %v", err)
	}
	if errors.Is(err, storage.ErrInvalidArgument) || errors.Is(err, lance.ErrBranchHasChildren) {
		t.Fatalf("refusal matches too much: %v", err)
	}
	if after := files(t, dir, "t"); !reflect.DeepEqual(after, before) {
		t.Fatalf("a refused delete changed the table:\nbefore %v\nafter  %v", before, after)
	}
	noClaim(t, s)

	if _, err := checkpoint.Delete(bg, s, "pinned"); err != nil {
		t.Fatal(err)
	}
	if _, err := checkpoint.Reconcile(bg, s); err != nil {
		t.Fatal(err)
	}
	res, err := Delete(bg, s, "exp", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Tables) != 1 || res.Failed != 0 || res.Reconciled == nil {
		t.Fatalf("deleted: %+v", res)
	}
	td := res.Tables[0]
	var treeFiles int
	for k := range before {
		if strings.HasPrefix(k, "tree/exp/") {
			treeFiles++
		}
	}
	if td.Table != "t.lance" || !td.RefDeleted || td.Resumed || td.ParentBranch != "main" || td.ParentVersion != 2 ||
		td.FilesDeleted != treeFiles || treeFiles == 0 || td.Tree != "t.lance/tree/exp" || res.FilesDeleted != treeFiles {
		t.Fatalf("table: %+v (tree had %d files)", td, treeFiles)
	}
	for k := range files(t, dir, "t") {
		if strings.HasPrefix(k, "tree/") || strings.HasPrefix(k, "_refs/branches/") {
			t.Fatalf("left after the delete: %s", k)
		}
	}
	noClaim(t, s)

	// Real Lance: no branch, main reads every row of every version and
	// takes an append; the deleted branch does not open.
	if got := lanceBranches(t, dir, "t"); len(got) != 0 {
		t.Fatalf("Lance lists %v", got)
	}
	v := lanceVerify(t, dir, "t", map[string][]uint64{"main": {1, 2}})
	if len(v.Errors) != 0 || !reflect.DeepEqual(v.Listed["main"], []uint64{1, 2}) ||
		v.Rows["main"]["1"].Scanned != 3 || v.Rows["main"]["2"].Scanned != 5 || v.Rows["main"]["2"].IDSum != 10 || v.Appended["main"].Scanned != 6 {
		t.Fatalf("Lance on main: %+v", v)
	}
	if e := lanceError(lanceOps(t, dir, "t", op{"op": "countBranch", "name": "exp", "try": true})[0]); e == "" {
		t.Fatal("Lance still opens the deleted branch")
	}

	// Again: the branch is in no table.
	_, err = Delete(bg, s, "exp", Options{})
	if !errors.Is(err, storage.ErrNotFound) || !errors.Is(err, lance.ErrBranchNotFound) || !strings.Contains(err.Error(), `"exp"`) || !strings.Contains(err.Error(), loc.String()) {
		t.Fatalf("second delete: %v", err)
	}
	noClaim(t, s)
}

// Lance's rules in one table refuse the whole command: nothing is deleted
// in any table. --table limits the delete to one table.
func TestBranchDeleteRefusedWithChildBranch(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real Lance (Node)")
	}
	dir := t.TempDir()
	lanceOps(t, dir, "a",
		op{"op": "create", "rows": 3}, op{"op": "add", "rows": 2},
		op{"op": "branchCreate", "name": "par", "from": "main", "version": 2},
		op{"op": "add", "rows": 1, "on": "par"},
		op{"op": "branchCreate", "name": "kid", "from": "par", "version": 3},
	)
	branchedTable(t, dir, "b", "par")
	s, _ := localStore(t, dir)
	beforeA, beforeB := files(t, dir, "a"), files(t, dir, "b")

	_, err := Delete(bg, s, "par", Options{})
	if !errors.Is(err, ErrRefused) || !errors.Is(err, lance.ErrBranchHasChildren) || errors.Is(err, ErrCheckpointPinsBranch) || errors.Is(err, lance.ErrBranchHasTags) {
		t.Fatalf("refusal: %v", err)
	}
	var refused *RefusedError
	if !errors.As(err, &refused) || refused.Pins != nil || len(refused.Tables) != 1 || refused.Tables[0].Table != "a.lance" ||
		!reflect.DeepEqual(refused.Tables[0].Children, []lance.BranchRef{{Name: "kid", Version: 3}}) {
		t.Fatalf("refusal: %+v", err)
	}
	if !reflect.DeepEqual(files(t, dir, "a"), beforeA) || !reflect.DeepEqual(files(t, dir, "b"), beforeB) {
		t.Fatal("a refused delete changed a table")
	}
	noClaim(t, s)

	// Only in b.
	res, err := Delete(bg, s, "par", Options{Table: "b"})
	if err != nil || len(res.Tables) != 1 || res.Tables[0].Table != "b.lance" || !res.Tables[0].RefDeleted {
		t.Fatalf("--table b: %+v %v", res, err)
	}
	if !reflect.DeepEqual(files(t, dir, "a"), beforeA) {
		t.Fatal("--table b changed a")
	}
	_, err = Delete(bg, s, "par", Options{Table: "b.lance"})
	if !errors.Is(err, storage.ErrNotFound) || !strings.Contains(err.Error(), "b.lance") {
		t.Fatalf("par in b again: %v", err)
	}
	_, err = Delete(bg, s, "par", Options{Table: "c"})
	if !errors.Is(err, storage.ErrNotFound) || !strings.Contains(err.Error(), "c.lance") {
		t.Fatalf("no table c: %v", err)
	}

	// The child first, then its parent.
	if _, err := Delete(bg, s, "kid", Options{}); err != nil {
		t.Fatal(err)
	}
	if res, err = Delete(bg, s, "par", Options{}); err != nil || len(res.Tables) != 1 || res.Tables[0].Table != "a.lance" {
		t.Fatalf("par after kid: %+v %v", res, err)
	}
	for _, tb := range []string{"a", "b"} {
		if got := lanceBranches(t, dir, tb); len(got) != 0 {
			t.Fatalf("Lance lists %v in %s", got, tb)
		}
		if v := lanceVerify(t, dir, tb, map[string][]uint64{"main": {2}}); len(v.Errors) != 0 || v.Rows["main"]["2"].Scanned != 5 {
			t.Fatalf("Lance on %s: %+v", tb, v)
		}
	}
	noClaim(t, s)
}

// While another operation holds the claim, the delete is refused with
// claim.ErrHeld and nothing is touched.
func TestBranchDeleteRefusedWhileClaimHeld(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real Lance (Node)")
	}
	dir := t.TempDir()
	branchedTable(t, dir, "t", "exp")
	s, loc := localStore(t, dir)
	h, err := claim.Acquire(bg, s, claim.Request{Action: "cleanup", Actor: "other", Scope: claim.ScopeFor(loc)})
	if err != nil {
		t.Fatal(err)
	}
	before := files(t, dir, "t")
	_, err = Delete(bg, s, "exp", Options{})
	var held *claim.HeldError
	if !errors.Is(err, claim.ErrHeld) || !errors.As(err, &held) || held.Holder.Actor != "other" {
		t.Fatalf("held: %v", err)
	}
	if !reflect.DeepEqual(files(t, dir, "t"), before) {
		t.Fatal("deleted under another's claim")
	}
	if err := h.Verify(bg); err != nil {
		t.Fatalf("the holder lost its claim: %v", err)
	}
	if err := h.Release(bg); err != nil {
		t.Fatal(err)
	}

	// An unfinished cleanup run (its open marker) refuses too.
	marker := "_retain/cleanup/open/cleanup-test"
	if _, err := s.PutBytes(bg, marker, []byte("{}"), storage.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err = Delete(bg, s, "exp", Options{})
	if !errors.Is(err, runs.ErrOpen) || !errors.Is(err, storage.ErrPreconditionFailed) || !strings.Contains(err.Error(), "cleanup-test") {
		t.Fatalf("open cleanup run: %v", err)
	}
	if !reflect.DeepEqual(files(t, dir, "t"), before) {
		t.Fatal("deleted while a cleanup run is open")
	}
	noClaim(t, s)
	if err := s.Delete(bg, marker, storage.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := Delete(bg, s, "exp", Options{}); err != nil {
		t.Fatal(err)
	}
}

// A delete that stopped after the branch file (the crash window) is
// finished by running it again; the names retain never deletes are
// refused before the claim.
func TestBranchDeleteResumesAndRefusesNames(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real Lance (Node)")
	}
	dir := t.TempDir()
	branchedTable(t, dir, "t", "exp", "keep")
	s, _ := localStore(t, dir)

	ds, err := lance.Open(s, "t.lance")
	if err != nil {
		t.Fatal(err)
	}
	p, err := ds.PlanBranchDelete(bg, "exp")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ds.DeleteBranchRef(bg, p); err != nil {
		t.Fatal(err)
	}
	if got := lanceBranches(t, dir, "t"); !reflect.DeepEqual(got, []string{"keep"}) {
		t.Fatalf("after the branch file: Lance lists %v", got)
	}
	res, err := Delete(bg, s, "exp", Options{})
	if err != nil || len(res.Tables) != 1 || !res.Tables[0].Resumed || res.Tables[0].RefDeleted || res.Tables[0].FilesDeleted != len(p.Files) {
		t.Fatalf("resumed: %+v %v", res, err)
	}
	if exists(filepath.Join(dir, "t.lance", "tree", "exp")) {
		t.Fatal("tree/exp is left")
	}
	if v := lanceVerify(t, dir, "t", map[string][]uint64{"main": {2}, "keep": {3}}); len(v.Errors) != 0 || v.Rows["keep"]["3"].Scanned != 6 {
		t.Fatalf("Lance: %+v", v)
	}

	for name, targets := range map[string][]error{
		"main":   {lance.ErrInvalidName, storage.ErrInvalidArgument},
		"main/x": {lance.ErrBranchDeleteUnsafe, storage.ErrUnsupported},
		"a//b":   {lance.ErrInvalidName, storage.ErrInvalidArgument},
		"nope":   {lance.ErrBranchNotFound, storage.ErrNotFound},
	} {
		_, err := Delete(bg, s, name, Options{})
		for _, target := range targets {
			if !errors.Is(err, target) {
				t.Errorf("%s: %v does not match %v", name, err, target)
			}
		}
	}
	noClaim(t, s)
}

// A folder that cannot be deleted completely: the branch file and the
// manifests are gone (Lance neither lists nor opens the branch: nothing is
// visible but broken), the report says ErrIncomplete, and running the
// delete again once the files can go finishes it.
func TestBranchDeleteIncompleteFinishes(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real Lance (Node)")
	}
	dir := t.TempDir()
	branchedTable(t, dir, "t", "exp")
	s, _ := localStore(t, dir)
	data := filepath.Join(dir, "t.lance", "tree", "exp", "data")
	// Make the branch's data files undeletable. Root ignores permissions,
	// so as root the folder is made immutable (chattr +i), which binds
	// root too.
	if os.Getuid() == 0 {
		if out, err := exec.Command("chattr", "+i", data).CombinedOutput(); err != nil {
			t.Skipf("cannot make %s immutable as root (%v: %s)", data, err, out)
		}
	} else if err := os.Chmod(data, 0o555); err != nil {
		t.Fatal(err)
	}
	unlock := func() {
		if os.Getuid() == 0 {
			exec.Command("chattr", "-i", data).Run()
		} else {
			os.Chmod(data, 0o755)
		}
	}
	t.Cleanup(unlock)

	res, err := Delete(bg, s, "exp", Options{})
	if !errors.Is(err, ErrIncomplete) || res == nil || res.Failed != 1 || len(res.Tables) != 1 {
		t.Fatalf("incomplete: %+v %v", res, err)
	}
	td := res.Tables[0]
	if !td.RefDeleted || td.Error == "" || len(td.Failed) == 0 || !strings.Contains(td.Failed[0].Key, "tree/exp/data/") {
		t.Fatalf("table: %+v", td)
	}
	for k := range files(t, dir, "t") {
		if strings.HasPrefix(k, "tree/exp/_versions/") || k == "_refs/branches/exp.json" {
			t.Fatalf("%s left after an incomplete delete", k)
		}
	}
	if got := lanceBranches(t, dir, "t"); len(got) != 0 {
		t.Fatalf("Lance lists %v", got)
	}
	if e := lanceError(lanceOps(t, dir, "t", op{"op": "countBranch", "name": "exp", "try": true})[0]); e == "" {
		t.Fatal("Lance opens the half-deleted branch")
	}
	noClaim(t, s)

	unlock()
	res, err = Delete(bg, s, "exp", Options{})
	if err != nil || !res.Tables[0].Resumed || res.Tables[0].FilesDeleted != len(td.Failed) {
		t.Fatalf("finishing: %+v %v", res, err)
	}
	if exists(filepath.Join(dir, "t.lance", "tree")) {
		t.Fatal("tree/ is left")
	}
}
