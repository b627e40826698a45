package lance

import (
	"maps"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/retain-dev/retain/internal/lancetest"
)

// lanceBranchView is what branchmeta.cjs reports of one branch.
type lanceBranchView struct {
	Exposed map[string]any `json:"exposed"`
	Version uint64         `json:"version"`
	Rows    int            `json:"rows"`
	Error   string         `json:"error"`
}

func lanceBranchMeta(t testing.TB, dir string) map[string]lanceBranchView {
	t.Helper()
	var out struct {
		Branches map[string]lanceBranchView `json:"branches"`
	}
	lancetest.Node(t, "branchmeta.cjs", map[string]any{"dir": dir, "table": "t"}, &out)
	return out.Branches
}

// Branch files retain rewrote with metadata are listed and opened by real
// Lance exactly as before, Lance's own later writes (appends, a fork, a
// a new branch from main) keep them, and retain reads what Lance wrote.
// LanceDB 0.39's branches().list() hands out parentBranch, parentVersion
// and manifestSize only: the metadata map (retain's lifecycle and the user
// metadata) is not exposed through its API, only through the file.
func TestBranchMetadataInteropWithLance(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real Lance (Node)")
	}
	dir := t.TempDir()
	refsRun(t, dir,
		refOp{"op": "create", "rows": 3}, refOp{"op": "add", "rows": 2},
		refOp{"op": "branchCreate", "name": "exp", "from": "main", "version": 2},
		refOp{"op": "add", "rows": 1, "on": "exp"},
		refOp{"op": "branchCreate", "name": "team/deep", "from": "exp", "version": 3},
	)
	before := lanceBranchMeta(t, dir)
	d := refLanceDataset(t, dir)
	bs, err := d.ListBranches(refCtx)
	if err != nil || len(bs) != 2 {
		t.Fatalf("retain reads Lance's branches: %+v %v", bs, err)
	}
	metas := map[string]map[string]string{
		"exp":       {"session": "s-1", "agent": "ünï \"q\"", "retain.state": "ready", "retain.source": "main@2"},
		"team/deep": {"purpose": "a/b=c", "retain.state": "deleting"},
	}
	for _, b := range bs {
		if len(b.Metadata) != 0 {
			t.Fatalf("Lance wrote metadata %v", b.Metadata)
		}
		if _, err := d.ReplaceBranchMetadata(refCtx, b.Name, b.Info.Version, metas[b.Name]); err != nil {
			t.Fatal(err)
		}
	}
	after := lanceBranchMeta(t, dir)
	if !reflect.DeepEqual(after, before) {
		t.Fatalf("Lance sees the branches differently after retain's rewrite:\nbefore %+v\nafter  %+v", before, after)
	}
	if e := after["exp"]; e.Error != "" || e.Version != 3 || e.Rows != 6 {
		t.Fatalf("Lance opens exp: %+v", e)
	}
	if e := after["team/deep"]; e.Error != "" || e.Version != 3 || e.Rows != 6 {
		t.Fatalf("Lance opens team/deep: %+v", e)
	}
	exposed := slices.Sorted(maps.Keys(after["exp"].Exposed))
	if !reflect.DeepEqual(exposed, []string{"manifestSize", "parentBranch", "parentVersion"}) {
		t.Fatalf("LanceDB's branches().list() exposes %v (update docs/refs.md)", exposed)
	}
	t.Logf("LanceDB 0.39 branches().list() exposes %v", after["exp"].Exposed)

	expFile := filepath.Join(dir, "t.lance", "_refs", "branches", "exp.json")
	expBody := refReadFile(t, expFile)
	// Lance writes on and around the adopted branches.
	res := refsRun(t, dir,
		refOp{"op": "add", "rows": 2, "on": "exp"},
		refOp{"op": "branchCreate", "name": "kid", "from": "exp", "version": 4},
		refOp{"op": "branchCreate", "name": "other", "from": "main", "version": 1},
		refOp{"op": "countBranch", "name": "exp", "version": 3},
		refOp{"op": "countBranch", "name": "team/deep", "version": 3},
	)
	if c := refDecode[refLanceCount](t, res[3]); c.Rows != 6 {
		t.Fatalf("exp v3: %+v", c)
	}
	if c := refDecode[refLanceCount](t, res[4]); c.Rows != 6 {
		t.Fatalf("team/deep v3: %+v", c)
	}
	if got := refReadFile(t, expFile); got != expBody {
		t.Fatalf("Lance rewrote exp's branch file:\n%s", got)
	}
	bs, err = d.ListBranches(refCtx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Branch{}
	for _, b := range bs {
		got[b.Name] = b
	}
	if len(got) != 4 || !maps.Equal(got["exp"].Metadata, metas["exp"]) || !maps.Equal(got["team/deep"].Metadata, metas["team/deep"]) || len(got["kid"].Metadata) != 0 ||
		got["kid"].ParentBranch != "exp" || got["kid"].ParentVersion != 4 || got["other"].ParentVersion != 1 {
		t.Fatalf("retain reads Lance's later writes: %+v", got)
	}
}
