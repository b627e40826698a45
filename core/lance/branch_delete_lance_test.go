package lance

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/retain-dev/retain/internal/lancetest"
)

// branchOpsJS drives real Lance's branches for the branch delete tests:
// {"dir", "table", "ops": [{"op": "delete"|"create"|"branches"|"read", ...}]}
// and prints one result per op; a failing op reports {"error": first line}.
//
//	{"op": "delete", "name": "b"}                  branches.delete
//	{"op": "create", "name": "b", "from": "main", "version": 2}
//	{"op": "branches"}                             -> [name...] sorted
//	{"op": "read", "on": "b"}                      checkout (main if absent), read every row
//	                                               -> {"version", "rows", "idSum"}
const branchOpsJS = `
const lancedb = require("@lancedb/lancedb");
function firstLine(e) { return String((e && e.message) || e).split("\n")[0]; }
async function main() {
  const spec = JSON.parse(process.argv[2]);
  const db = await lancedb.connect(spec.dir);
  const results = [];
  for (const op of spec.ops) {
    try {
      const t = await db.openTable(spec.table || "t");
      const br = await t.branches();
      switch (op.op) {
        case "delete": await br.delete(op.name); results.push({}); break;
        case "create": await br.create(op.name, op.from || "main", op.version); results.push({}); break;
        case "branches": results.push(Object.keys(await br.list()).sort()); break;
        case "read": {
          const h = op.on && op.on !== "main" ? await br.checkout(op.on) : t;
          const a = await h.query().select(["id"]).toArrow();
          let idSum = 0;
          const col = a.getChild("id");
          for (let i = 0; i < a.numRows; i++) idSum += Number(col.get(i));
          results.push({ version: await h.version(), rows: a.numRows, idSum });
          break;
        }
        default: throw new Error("unknown op " + op.op);
      }
    } catch (e) {
      results.push({ error: firstLine(e) || "error" });
    }
  }
  console.log(JSON.stringify({ results }));
}
main().catch((e) => { console.error(e && e.stack ? e.stack : e); process.exit(1); });
`

// branchOps runs branchOpsJS against dir/t.lance.
func branchOps(t testing.TB, dir string, ops ...refOp) []json.RawMessage {
	t.Helper()
	script := filepath.Join(t.TempDir(), "branch_ops.cjs")
	if err := os.WriteFile(script, []byte(branchOpsJS), 0o644); err != nil {
		t.Fatal(err)
	}
	mods := filepath.Join(lancetest.Dir(t), "node_modules")
	in, _ := json.Marshal(map[string]any{"dir": dir, "table": "t", "ops": ops})
	cmd := exec.Command("node", script, string(in))
	cmd.Env = append(os.Environ(), "NODE_PATH="+mods)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node branch_ops.cjs: %v\n%s", err, stderr.String())
	}
	var out struct {
		Results []json.RawMessage `json:"results"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil || len(out.Results) != len(ops) {
		t.Fatalf("branch_ops.cjs: %v: %s", err, stdout.String())
	}
	return out.Results
}

// tableFiles lists every regular file under dir/t.lance, relative.
func tableFiles(t testing.TB, dir string) []string {
	t.Helper()
	root := filepath.Join(dir, "t.lance")
	var out []string
	err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		out = append(out, filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

func withoutPrefix(files []string, prefix string) []string {
	var out []string
	for _, f := range files {
		if !strings.HasPrefix(f, prefix) {
			out = append(out, f)
		}
	}
	return out
}

type branchRead struct {
	Version uint64  `json:"version"`
	Rows    int     `json:"rows"`
	IDSum   float64 `json:"idSum"`
}

// TestBranchDeleteAgreesWithLance builds one table with real Lance, copies
// it, and deletes the same branches with real Lance's branches.delete in
// the copy and with retain in the original: the same branches are refused
// (child branch, tag, missing, main), a leaf leaves exactly the same files
// behind, and where Lance is wrong retain differs on purpose (a branch
// with a nested branch: Lance keeps its whole folder behind; exp/data:
// retain refuses). Afterwards real Lance lists the branches left, reads
// main and every branch left, and creates the deleted names again.
func TestBranchDeleteAgreesWithLance(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real Lance (Node)")
	}
	dirRetain := t.TempDir()
	refsRun(t, dirRetain,
		refOp{"op": "create", "rows": 3},
		refOp{"op": "add", "rows": 2}, // main v2
		refOp{"op": "branchCreate", "name": "leaf", "from": "main", "version": 2},
		refOp{"op": "add", "rows": 1, "on": "leaf"},
		refOp{"op": "branchCreate", "name": "par", "from": "main", "version": 2},
		refOp{"op": "add", "rows": 1, "on": "par"},
		refOp{"op": "branchCreate", "name": "kid", "from": "par", "version": 3},
		refOp{"op": "branchCreate", "name": "tagged", "from": "main", "version": 2},
		refOp{"op": "add", "rows": 1, "on": "tagged"},
		refOp{"op": "tagCreate", "name": "tt", "version": 3, "on": "tagged"},
		refOp{"op": "branchCreate", "name": "x", "from": "main", "version": 2},
		refOp{"op": "add", "rows": 1, "on": "x"},
		refOp{"op": "branchCreate", "name": "x/y", "from": "main", "version": 2},
		refOp{"op": "add", "rows": 1, "on": "x/y"},
		refOp{"op": "branchCreate", "name": "e", "from": "main", "version": 2},
		refOp{"op": "add", "rows": 1, "on": "e"},
		refOp{"op": "branchCreate", "name": "e/data", "from": "main", "version": 2},
		refOp{"op": "add", "rows": 1, "on": "e/data"},
	)
	dirLance := t.TempDir()
	refCopyDir(t, filepath.Join(dirRetain, "t.lance"), filepath.Join(dirLance, "t.lance"))

	names := []string{"leaf", "par", "tagged", "nope", "main", "x"}
	var ops []refOp
	for _, n := range names {
		ops = append(ops, refOp{"op": "delete", "name": n})
	}
	ops = append(ops, refOp{"op": "create", "name": "x", "from": "main", "version": 2})
	lanceRes := branchOps(t, dirLance, ops...)
	lanceErr := map[string]string{}
	for i, n := range names {
		lanceErr[n] = refLanceError(t, lanceRes[i])
	}

	d := refLanceDataset(t, dirRetain)
	for _, n := range names {
		p, err := d.PlanBranchDelete(bg, n)
		if (err == nil) != (lanceErr[n] == "") {
			t.Errorf("%s: retain says %v, Lance says %q", n, err, lanceErr[n])
			continue
		}
		if err != nil {
			t.Logf("%s: refused by both: retain: %v; Lance: %s", n, err, lanceErr[n])
			continue
		}
		if _, err := d.DeleteBranchRef(bg, p); err != nil {
			t.Fatal(err)
		}
		if _, err := d.DeleteBranchTree(bg, p); err != nil {
			t.Fatal(err)
		}
	}
	for n, want := range map[string]string{"par": "referenced by", "tagged": "referenced by tags", "nope": "does not exist", "main": "cannot be 'main'"} {
		if !strings.Contains(lanceErr[n], want) {
			t.Errorf("Lance's refusal of %s: %q, want %q", n, lanceErr[n], want)
		}
	}
	for _, n := range []string{"e", "e/data"} {
		_, err := d.PlanBranchDelete(bg, n)
		refWantIs(t, n, err, ErrBranchOverlap)
	}

	// Same files, except where Lance is wrong: it keeps all of tree/x/
	// (x's own files too) behind, retain keeps only tree/x/y/.
	gotR, gotL := tableFiles(t, dirRetain), tableFiles(t, dirLance)
	if a, b := withoutPrefix(gotR, "tree/x/"), withoutPrefix(gotL, "tree/x/"); !reflect.DeepEqual(a, b) {
		t.Errorf("files differ from Lance's delete:\nretain %v\nLance  %v", a, b)
	}
	for _, f := range gotR {
		if strings.HasPrefix(f, "tree/x/") && !strings.HasPrefix(f, "tree/x/y/") {
			t.Errorf("x's file %s survived retain's delete", f)
		}
		if strings.HasPrefix(f, "tree/leaf/") || f == "_refs/branches/leaf.json" || f == "_refs/branches/x.json" {
			t.Errorf("%s survived retain's delete", f)
		}
	}
	if e := refLanceError(t, lanceRes[len(names)]); e == "" {
		t.Log("Lance re-created x over the folder its own delete left (fixed upstream?)")
	} else {
		t.Logf("Lance cannot re-create x over the folder its own delete left: %s", e)
	}

	// Real Lance on retain's result.
	res := branchOps(t, dirRetain,
		refOp{"op": "branches"},
		refOp{"op": "read"},
		refOp{"op": "read", "on": "par"},
		refOp{"op": "read", "on": "kid"},
		refOp{"op": "read", "on": "tagged"},
		refOp{"op": "read", "on": "x/y"},
		refOp{"op": "read", "on": "e"},
		refOp{"op": "read", "on": "e/data"},
		refOp{"op": "read", "on": "leaf"},
		refOp{"op": "create", "name": "leaf", "from": "main", "version": 2},
		refOp{"op": "create", "name": "x", "from": "main", "version": 2},
		refOp{"op": "read", "on": "x"},
		refOp{"op": "branches"},
	)
	if got := refDecode[[]string](t, res[0]); !reflect.DeepEqual(got, []string{"e", "e/data", "kid", "par", "tagged", "x/y"}) {
		t.Fatalf("Lance lists %v after retain's deletes", got)
	}
	wantRows := map[int]int{1: 5, 2: 6, 3: 6, 4: 6, 5: 6, 6: 6, 7: 6}
	for i := 1; i <= 7; i++ {
		if e := refLanceError(t, res[i]); e != "" {
			t.Fatalf("Lance read %d: %s", i, e)
		}
		if r := refDecode[branchRead](t, res[i]); r.Rows != wantRows[i] {
			t.Fatalf("Lance read %d: %+v, want %d rows", i, r, wantRows[i])
		}
	}
	if e := refLanceError(t, res[8]); e == "" {
		t.Fatal("Lance still opens the deleted branch leaf")
	}
	for _, i := range []int{9, 10, 11} {
		if e := refLanceError(t, res[i]); e != "" {
			t.Fatalf("Lance after retain's delete, op %d: %s", i, e)
		}
	}
	if r := refDecode[branchRead](t, res[11]); r.Rows != 5 {
		t.Fatalf("re-created x: %+v", r)
	}
	if got := refDecode[[]string](t, res[12]); !reflect.DeepEqual(got, []string{"e", "e/data", "kid", "leaf", "par", "tagged", "x", "x/y"}) {
		t.Fatalf("Lance lists %v after re-creating", got)
	}
}
