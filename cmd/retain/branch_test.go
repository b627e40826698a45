package main

import (
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/retain-dev/retain/adapters/localfs"
	"github.com/retain-dev/retain/core/branch"
	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/claim"
	"github.com/retain-dev/retain/internal/lancetest"
)

// branchTestDB builds <tmp>/db/t.lance with real Lance: main v1 (3 rows), v2
// (5 rows) and branch exp forked from main v2 with one append (v3).
func branchTestDB(t *testing.T) string {
	t.Helper()
	db := filepath.Join(t.TempDir(), "db")
	lancetest.Node(t, "refs.cjs", map[string]any{"dir": db, "table": "t", "naming": "v2", "ops": []map[string]any{
		{"op": "create", "rows": 3}, {"op": "add", "rows": 2},
		{"op": "branchCreate", "name": "exp", "from": "main", "version": 2},
		{"op": "add", "rows": 1, "on": "exp"},
	}}, nil)
	return db
}

// branchTestLanceList is real Lance's list of t's branches.
func branchTestLanceList(t *testing.T, db string) []string {
	t.Helper()
	var out struct {
		Results []map[string]any `json:"results"`
	}
	lancetest.Node(t, "refs.cjs", map[string]any{"dir": db, "table": "t", "ops": []map[string]any{{"op": "branches"}}}, &out)
	names := []string{}
	for k := range out.Results[0] {
		names = append(names, k)
	}
	return names
}

func branchTestFiles(t *testing.T, db string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	root := filepath.Join(db, "t.lance")
	err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		fi, err := e.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		out[filepath.ToSlash(rel)] = fi.Size()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestBranchDeleteCLI(t *testing.T) {
	t.Parallel() // a process-bound test: it waits on retain, Lance and emulators, not the CPU
	if testing.Short() {
		t.Skip("runs real Lance (Node)")
	}
	db := branchTestDB(t)
	out, errs, code := retain(t, "checkpoint", "create", "cp", db, "--branch", "exp", "--json")
	var c struct {
		ID string `json:"id"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &c) != nil || c.ID == "" {
		t.Fatalf("checkpoint create: %d %s %s", code, out, errs)
	}
	before := branchTestFiles(t, db)

	out, errs, code = retain(t, "branch", "delete", "exp", db, "--json")
	var ref struct {
		Branch      string                     `json:"branch"`
		Refused     bool                       `json:"refused"`
		Error       string                     `json:"error"`
		Checkpoints []branch.PinningCheckpoint `json:"checkpoints"`
		Tables      []branch.TableRefusal      `json:"tables"`
	}
	if code != 1 || json.Unmarshal([]byte(out), &ref) != nil {
		t.Fatalf("refused delete: exit %d\n%s\n%s", code, out, errs)
	}
	if !ref.Refused || ref.Branch != "exp" || len(ref.Checkpoints) != 1 || string(ref.Checkpoints[0].ID) != c.ID || ref.Checkpoints[0].Name != "cp" ||
		!reflect.DeepEqual(ref.Checkpoints[0].Tables, []branch.PinnedTable{{Path: "t.lance", Version: 3}}) || len(ref.Tables) != 0 {
		t.Fatalf("refusal JSON: %s", out)
	}
	if _, errs, code = retain(t, "branch", "delete", "exp", db); code != 1 || !strings.Contains(errs, c.ID) || !strings.Contains(errs, "checkpoint delete") {
		t.Fatalf("refused delete (text): %d %s", code, errs)
	}
	if !reflect.DeepEqual(branchTestFiles(t, db), before) {
		t.Fatal("a refused delete changed the table")
	}
	if _, errs, code = retain(t, "branch", "delete", "main", db); code != 2 || !strings.Contains(errs, "never be deleted") {
		t.Fatalf("main: %d %s", code, errs)
	}
	if _, errs, code = retain(t, "branch", "delete", "exp", db, "--table", "nope"); code != 1 || !strings.Contains(errs, "nope.lance") {
		t.Fatalf("missing table: %d %s", code, errs)
	}

	if _, errs, code = retain(t, "checkpoint", "delete", "cp", db); code != 0 {
		t.Fatalf("checkpoint delete: %d %s", code, errs)
	}
	if _, errs, code = retain(t, "reconcile", db); code != 0 {
		t.Fatalf("reconcile: %d %s", code, errs)
	}
	out, errs, code = retain(t, "branch", "delete", "exp", db, "--table", "t", "--json")
	var res branch.Deleted
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil {
		t.Fatalf("delete: %d %s %s", code, out, errs)
	}
	if len(res.Tables) != 1 || res.Tables[0].Table != "t.lance" || !res.Tables[0].RefDeleted || res.Tables[0].FilesDeleted == 0 || res.Failed != 0 {
		t.Fatalf("delete JSON: %s", out)
	}
	for k := range branchTestFiles(t, db) {
		if strings.HasPrefix(k, "tree/") || strings.HasPrefix(k, "_refs/branches/") {
			t.Fatalf("left: %s", k)
		}
	}
	if got := branchTestLanceList(t, db); len(got) != 0 {
		t.Fatalf("Lance lists %v", got)
	}
	if _, errs, code = retain(t, "branch", "delete", "exp", db); code != 1 || !strings.Contains(errs, "exists in no table") {
		t.Fatalf("second delete: %d %s", code, errs)
	}
}

// While another process (this test) holds the claim, the binary refuses
// with exit 1 naming the holder, and deletes nothing.
func TestBranchDeleteCLIClaimHeld(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real Lance (Node)")
	}
	db := branchTestDB(t)
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
	h, err := claim.Acquire(ctx, s, claim.Request{Action: "cleanup", Actor: "other-job", Scope: storage.ScopeHost})
	if err != nil {
		t.Fatal(err)
	}
	before := branchTestFiles(t, db)
	if _, errs, code := retain(t, "branch", "delete", "exp", db); code != 1 || !strings.Contains(errs, "held") || !strings.Contains(errs, "other-job") {
		t.Fatalf("held claim: %d %s", code, errs)
	}
	if !reflect.DeepEqual(branchTestFiles(t, db), before) {
		t.Fatal("deleted under another's claim")
	}
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if out, errs, code := retain(t, "branch", "delete", "exp", db); code != 0 || !strings.Contains(out, `deleted branch "exp" from 1 table(s)`) {
		t.Fatalf("after release: %d %s %s", code, out, errs)
	}
}

// The binary killed after the branch files: Lance no longer lists the
// branch (nothing is listed but broken), the folder is left; after the
// operator takes over the dead claim, running the delete again finishes it.
func TestBranchDeleteCLICrash(t *testing.T) {
	t.Parallel() // a process-bound test: it waits on retain, Lance and emulators, not the CPU
	if testing.Short() {
		t.Skip("runs real Lance (Node)")
	}
	db := branchTestDB(t)
	cmd := exec.Command(bin, "branch", "delete", "exp", db)
	cmd.Env = append(os.Environ(), "RETAIN_FAILPOINT="+branch.FPDeleteAfterRefs)
	if err := cmd.Run(); err == nil || err.(*exec.ExitError).ExitCode() != 3 {
		t.Fatalf("failpoint: %v", err)
	}
	if _, err := os.Stat(filepath.Join(db, "t.lance", "_refs", "branches", "exp.json")); !os.IsNotExist(err) {
		t.Fatalf("the branch file is still there: %v", err)
	}
	if _, err := os.Stat(filepath.Join(db, "t.lance", "tree", "exp", "_versions")); err != nil {
		t.Fatalf("the folder went before the failpoint: %v", err)
	}
	if got := branchTestLanceList(t, db); len(got) != 0 {
		t.Fatalf("Lance lists %v after the crash", got)
	}
	if _, errs, code := retain(t, "branch", "delete", "exp", db); code != 1 || !strings.Contains(errs, "held") {
		t.Fatalf("under the dead claim: %d %s", code, errs)
	}
	out, _, _ := retain(t, "claim", "status", db, "--json")
	var st claimStatus
	if err := json.Unmarshal([]byte(out), &st); err != nil || !st.Held {
		t.Fatalf("claim status: %s", out)
	}
	if _, errs, code := retain(t, "claim", "takeover", db, "--token", st.Holder.OwnerToken, "--reason", "crash test"); code != 0 {
		t.Fatalf("takeover: %s", errs)
	}
	out, errs, code := retain(t, "branch", "delete", "exp", db)
	if code != 0 || !strings.Contains(out, "already gone") {
		t.Fatalf("finishing: %d %s %s", code, out, errs)
	}
	if _, err := os.Stat(filepath.Join(db, "t.lance", "tree")); !os.IsNotExist(err) {
		t.Fatalf("the folder is left: %v", err)
	}
	if _, errs, code := retain(t, "branch", "delete", "exp", db); code != 1 || !strings.Contains(errs, "exists in no table") {
		t.Fatalf("third run: %d %s", code, errs)
	}
}
