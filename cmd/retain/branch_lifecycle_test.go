package main

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/retain-dev/retain/core/branch"
	"github.com/retain-dev/retain/core/failpoint"
	"github.com/retain-dev/retain/core/refs/lifecycle"
	"github.com/retain-dev/retain/internal/lancetest"
)

// branchCopyDB copies a database folder built once, so each crash case
// starts from the same Lance-written table.
func branchCopyDB(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "db")
	err := filepath.Walk(src, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		if fi.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		in, err := os.Open(p)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.Create(to)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

type branchListOut struct {
	Branches []branch.Info `json:"branches"`
	Hidden   int           `json:"hidden"`
	Total    int           `json:"total"`
}

// branchListed is `retain branch list --json` (with --all if all).
func branchListed(t *testing.T, table string, all bool, extra ...string) branchListOut {
	t.Helper()
	args := append([]string{"branch", "list", table, "--json"}, extra...)
	if all {
		args = append(args, "--all")
	}
	out, errs, code := retain(t, args...)
	var l branchListOut
	if code != 0 || json.Unmarshal([]byte(out), &l) != nil {
		t.Fatalf("branch list: %d %s %s", code, out, errs)
	}
	return l
}

func branchByName(l branchListOut, name string) *branch.Info {
	for i := range l.Branches {
		if l.Branches[i].Name == name {
			return &l.Branches[i]
		}
	}
	return nil
}

// lanceSees is what real Lance lists of t's branches and whether each opens.
func lanceSees(t *testing.T, db string) map[string]struct {
	Version uint64 `json:"version"`
	Rows    int    `json:"rows"`
	Error   string `json:"error"`
} {
	t.Helper()
	var out struct {
		Branches map[string]struct {
			Version uint64 `json:"version"`
			Rows    int    `json:"rows"`
			Error   string `json:"error"`
		} `json:"branches"`
	}
	lancetest.Node(t, "branchmeta.cjs", map[string]any{"dir": db, "table": "t"}, &out)
	return out.Branches
}

// branchTakeOverClaim takes over the claim a crashed process left.
func branchTakeOverClaim(t *testing.T, db string) {
	t.Helper()
	out, _, _ := retain(t, "claim", "status", db, "--json")
	var st claimStatus
	if err := json.Unmarshal([]byte(out), &st); err != nil || !st.Held {
		t.Fatalf("claim after the crash: %s", out)
	}
	if _, errs, code := retain(t, "claim", "takeover", db, "--token", st.Holder.OwnerToken, "--reason", "crash test"); code != 0 {
		t.Fatalf("takeover: %s", errs)
	}
}

// branchNoHalfState: the default listing shows only ready branches.
func branchNoHalfState(t *testing.T, table string) branchListOut {
	t.Helper()
	l := branchListed(t, table, false)
	for _, b := range l.Branches {
		if b.State != lifecycle.Ready {
			t.Fatalf("listed in a half state: %+v", b)
		}
	}
	return l
}

// list, show and create against a table real Lance wrote: lineage as a
// tree, metadata filter, idempotent retry, conflict, missing branch.
func TestBranchListShowCreateCLI(t *testing.T) {
	t.Parallel() // a process-bound test: it waits on retain, Lance and emulators, not the CPU
	if testing.Short() {
		t.Skip("runs real Lance (Node)")
	}
	db := branchTestDB(t)
	lancetest.Node(t, "refs.cjs", map[string]any{"dir": db, "table": "t", "ops": []map[string]any{
		{"op": "branchCreate", "name": "exp/deep", "from": "exp", "version": 3},
	}}, nil)
	table := filepath.Join(db, "t.lance")

	out, errs, code := retain(t, "branch", "create", "exp", table, "--from", "main@2", "--meta", "session=s1", "--meta", "agent=a1", "--json")
	var c branch.Created
	if code != 0 || json.Unmarshal([]byte(out), &c) != nil || c.Outcome != branch.OutcomeAdopted || c.Source != "main@2" || c.Metadata["session"] != "s1" {
		t.Fatalf("create: %d %s %s", code, out, errs)
	}
	if out, _, code = retain(t, "branch", "create", "exp", table, "--from", "main"); code != 0 || !strings.Contains(out, "already ready") {
		t.Fatalf("retry: %d %s", code, out)
	}
	if _, errs, code = retain(t, "branch", "create", "exp", table, "--from", "main@1"); code != 1 || !strings.Contains(errs, "another source") {
		t.Fatalf("conflict: %d %s", code, errs)
	}
	if _, errs, code = retain(t, "branch", "create", "nope", table, "--from", "main"); code != 1 || !strings.Contains(errs, "create it with Lance first") {
		t.Fatalf("missing: %d %s", code, errs)
	}
	if _, errs, code = retain(t, "branch", "create", "exp", table, "--from", "main", "--meta", "retain.state=x"); code != 2 {
		t.Fatalf("reserved key: %d %s", code, errs)
	}

	l := branchListed(t, table, false)
	deep := branchByName(l, "exp/deep")
	if len(l.Branches) != 2 || deep == nil || deep.Lifecycle.Managed || len(deep.Lineage) != 2 ||
		deep.Lineage[0] != (branch.LineageStep{Branch: "main", Version: 2}) || deep.Lineage[1] != (branch.LineageStep{Branch: "exp", Version: 3}) {
		t.Fatalf("list: %+v", l)
	}
	if f := branchListed(t, table, false, "--filter", "session=s1"); len(f.Branches) != 1 || f.Branches[0].Name != "exp" {
		t.Fatalf("filter: %+v", f)
	}
	out, _, code = retain(t, "branch", "list", table)
	if code != 0 || !strings.Contains(out, "└── exp  ← main@2  ready") || !strings.Contains(out, "    └── exp/deep  ← exp@3  ready (lance)") {
		t.Fatalf("tree:\n%s", out)
	}
	out, _, code = retain(t, "branch", "list", table, "--filter", "agent=none")
	if code != 0 || !strings.Contains(out, "0 listed") {
		t.Fatalf("no match:\n%s", out)
	}
	out, _, code = retain(t, "branch", "show", "exp", table, "--json")
	var d branch.Detail
	if code != 0 || json.Unmarshal([]byte(out), &d) != nil || d.Head == nil || *d.Head != 3 || len(d.Children) != 1 || d.Children[0].Name != "exp/deep" || d.Metadata["agent"] != "a1" {
		t.Fatalf("show: %d %s", code, out)
	}
	out, _, code = retain(t, "branch", "show", "exp/deep", table)
	if code != 0 || !strings.Contains(out, "└── exp  ← main@2") || !strings.Contains(out, "└── exp/deep  ← exp@3") {
		t.Fatalf("show tree:\n%s", out)
	}
	if _, errs, code = retain(t, "branch", "show", "nope", table); code != 1 || !strings.Contains(errs, "not found") {
		t.Fatalf("show missing: %d %s", code, errs)
	}
	if _, errs, code = retain(t, "branch", "list", filepath.Join(db, "nope.lance")); code != 1 || !strings.Contains(errs, "not a Lance dataset") {
		t.Fatalf("list of no table: %d %s", code, errs)
	}
	// Real Lance lists and opens both.
	seen := lanceSees(t, db)
	if len(seen) != 2 || seen["exp"].Rows != 6 || seen["exp/deep"].Error != "" {
		t.Fatalf("Lance: %+v", seen)
	}
}

// The crash matrix of the branch lifecycle: the real binary killed at each
// failpoint of create (adoption) and delete. After every crash the default
// listing shows no branch in a half state, Lance lists and opens the
// branch until its file is deleted, and — once the operator has taken over
// the dead claim — running the same command again finishes it, taking the
// dead process's transition over with the proof that it is gone.
func TestBranchLifecycleCrashMatrix(t *testing.T) {
	t.Parallel() // a process-bound test: it waits on retain, Lance and emulators, not the CPU
	if testing.Short() {
		t.Skip("runs real Lance (Node)")
	}
	base := branchTestDB(t)

	for _, fp := range branch.CreateFailpoints {
		t.Run("create_"+strings.ReplaceAll(fp, "/", "_"), func(t *testing.T) {
			db := branchCopyDB(t, base)
			table := filepath.Join(db, "t.lance")
			args := []string{"branch", "create", "exp", table, "--from", "main@2", "--meta", "session=s1"}
			if _, errs, code := retainEnv(t, []string{failpoint.Env + "=" + fp}, args...); code != failpoint.ExitCode {
				t.Fatalf("crash at %s: %d %s", fp, code, errs)
			}
			l := branchNoHalfState(t, table)
			all := branchListed(t, table, true)
			exp := branchByName(all, "exp")
			switch fp {
			case branch.FPCreateAfterClaim: // nothing written: Lance's branch, ready
				if branchByName(l, "exp") == nil || exp.Lifecycle.Managed {
					t.Fatalf("after-claim: %+v", all)
				}
			case branch.FPCreateAfterCreating: // hidden, shown with --all as creating
				if branchByName(l, "exp") != nil || l.Hidden != 1 || exp.State != lifecycle.Creating || exp.Lifecycle.Owner == nil || exp.Metadata["session"] != "s1" {
					t.Fatalf("after-creating: %+v", all)
				}
			case branch.FPCreateAfterReady:
				if e := branchByName(l, "exp"); e == nil || !e.Lifecycle.Managed || e.Lifecycle.Owner != nil {
					t.Fatalf("after-ready: %+v", all)
				}
			}
			if seen := lanceSees(t, db); seen["exp"].Rows != 6 || seen["exp"].Error != "" {
				t.Fatalf("Lance after the crash: %+v", seen)
			}
			// The dead process holds the claim.
			if _, errs, code := retain(t, args...); code != 1 || !strings.Contains(errs, "held") {
				t.Fatalf("under the dead claim: %d %s", code, errs)
			}
			branchTakeOverClaim(t, db)
			if fp == branch.FPCreateAfterCreating {
				// Another source is a conflict, and changes nothing.
				if _, errs, code := retain(t, "branch", "create", "exp", table, "--from", "main@1"); code != 1 || !strings.Contains(errs, "another source") {
					t.Fatalf("conflict after the crash: %d %s", code, errs)
				}
			}
			out, errs, code := retain(t, append(args, "--json")...)
			var c branch.Created
			if code != 0 || json.Unmarshal([]byte(out), &c) != nil {
				t.Fatalf("again: %d %s %s", code, out, errs)
			}
			want := map[string]string{branch.FPCreateAfterClaim: branch.OutcomeAdopted, branch.FPCreateAfterCreating: branch.OutcomeResumed,
				branch.FPCreateAfterReady: branch.OutcomeAlreadyReady}[fp]
			if c.Outcome != want || (fp == branch.FPCreateAfterCreating) != (c.TookOver != nil) ||
				(c.TookOver != nil && (c.TookOver.PreviousOwner.PID != exp.Lifecycle.Owner.PID || !strings.Contains(c.TookOver.Proof, "not running"))) {
				t.Fatalf("again: %s", out)
			}
			if e := branchByName(branchNoHalfState(t, table), "exp"); e == nil || e.Lifecycle.Source != "main@2" || e.Metadata["session"] != "s1" {
				t.Fatalf("finished: %+v", e)
			}
		})
	}

	// A crashed adoption rolled back: delete takes the creating branch over.
	t.Run("create_rolled_back_by_delete", func(t *testing.T) {
		db := branchCopyDB(t, base)
		table := filepath.Join(db, "t.lance")
		if _, _, code := retainEnv(t, []string{failpoint.Env + "=" + branch.FPCreateAfterCreating}, "branch", "create", "exp", table, "--from", "main@2"); code != failpoint.ExitCode {
			t.Fatal("no crash")
		}
		branchTakeOverClaim(t, db)
		out, errs, code := retain(t, "branch", "delete", "exp", db, "--json")
		var res branch.Deleted
		if code != 0 || json.Unmarshal([]byte(out), &res) != nil || res.Tables[0].StateBefore != lifecycle.Creating || res.Tables[0].TookOver == nil {
			t.Fatalf("delete of a crashed adoption: %d %s %s", code, out, errs)
		}
		if l := branchListed(t, table, true); l.Total != 0 {
			t.Fatalf("left: %+v", l)
		}
		if seen := lanceSees(t, db); len(seen) != 0 {
			t.Fatalf("Lance lists %v", seen)
		}
	})

	adopted := branchCopyDB(t, base)
	if _, errs, code := retain(t, "branch", "create", "exp", filepath.Join(adopted, "t.lance"), "--from", "main@2", "--meta", "session=s1"); code != 0 {
		t.Fatalf("adopt: %s", errs)
	}
	for _, fp := range branch.DeleteFailpoints {
		t.Run("delete_"+strings.ReplaceAll(fp, "/", "_"), func(t *testing.T) {
			db := branchCopyDB(t, adopted)
			table := filepath.Join(db, "t.lance")
			if _, errs, code := retainEnv(t, []string{failpoint.Env + "=" + fp}, "branch", "delete", "exp", db); code != failpoint.ExitCode {
				t.Fatalf("crash at %s: %d %s", fp, code, errs)
			}
			l := branchNoHalfState(t, table)
			all := branchListed(t, table, true)
			refKept := fp == branch.FPDeleteAfterClaim || fp == branch.FPDeleteAfterDeleting
			switch {
			case fp == branch.FPDeleteAfterClaim:
				if branchByName(l, "exp") == nil {
					t.Fatalf("after-claim: %+v", l)
				}
			case fp == branch.FPDeleteAfterDeleting:
				if e := branchByName(all, "exp"); branchByName(l, "exp") != nil || e == nil || e.State != lifecycle.Deleting || e.Metadata["session"] != "s1" {
					t.Fatalf("after-deleting: %+v", all)
				}
			default:
				if all.Total != 0 {
					t.Fatalf("%s: %+v", fp, all)
				}
			}
			seen := lanceSees(t, db)
			if _, ok := seen["exp"]; ok != refKept || (ok && (seen["exp"].Rows != 6 || seen["exp"].Error != "")) {
				t.Fatalf("Lance after the crash at %s: %+v", fp, seen)
			}
			branchTakeOverClaim(t, db)
			out, errs, code := retain(t, "branch", "delete", "exp", db, "--json")
			var res branch.Deleted
			if fp == branch.FPDeleteAfterTrees || fp == branch.FPDeleteMidTrees {
				// One table: everything went before the crash, and the
				// branch is in no table any more.
				if code != 1 || !strings.Contains(errs, "exists in no table") {
					t.Fatalf("again: %d %s %s", code, out, errs)
				}
			} else {
				if code != 0 || json.Unmarshal([]byte(out), &res) != nil || len(res.Tables) != 1 || res.Failed != 0 {
					t.Fatalf("again: %d %s %s", code, out, errs)
				}
				td := res.Tables[0]
				if td.Resumed == refKept || (fp == branch.FPDeleteAfterDeleting) != (td.TookOver != nil) {
					t.Fatalf("again at %s: %s", fp, out)
				}
			}
			if l := branchListed(t, table, true); l.Total != 0 {
				t.Fatalf("left: %+v", l)
			}
			if _, err := os.Stat(filepath.Join(table, "tree")); !os.IsNotExist(err) {
				t.Fatalf("the folder is left: %v", err)
			}
			if seen := lanceSees(t, db); len(seen) != 0 {
				t.Fatalf("Lance lists %v", seen)
			}
		})
	}
}
