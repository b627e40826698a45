package lance

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/retain-dev/retain/core/storage"
)

// A branch file as Lance 12 wrote it (bytes copied from a real dataset:
// branch deep/a/b forked from feat/x version 3, itself forked from main 2).
const lanceBranchFile = "{\n  \"parentBranch\": \"feat/x\",\n  \"identifier\": {\n    \"version_mapping\": [\n      [\n        2,\n        \"f5db8a34c11743dfa3efc66f0ebe0c95\"\n      ],\n      [\n        3,\n        \"ab87d3feeb264045ab581baac4ae5b6f\"\n      ]\n    ]\n  },\n  \"parentVersion\": 3,\n  \"createAt\": 1796054797,\n  \"manifestSize\": 550,\n  \"metadata\": {}\n}"

const lanceBranchFileMain = "{\n  \"parentBranch\": null,\n  \"identifier\": {\n    \"version_mapping\": [\n      [\n        2,\n        \"f5db8a34c11743dfa3efc66f0ebe0c95\"\n      ]\n    ]\n  },\n  \"parentVersion\": 2,\n  \"createAt\": 1796054797,\n  \"manifestSize\": 425,\n  \"metadata\": {}\n}"

// branchVariants: bodies with Lance 12's verdict (checked against real
// Lance by TestBranchParsingAgreesWithLance) and, where retain refuses what
// Lance reads, why.
var branchVariants = []struct {
	name, body  string
	lance       bool
	retainNoWhy string
}{
	{"lanceWritten", lanceBranchFile, true, ""},
	{"lanceWrittenMain", lanceBranchFileMain, true, ""},
	{"minimalOld", `{"parentBranch":null,"parentVersion":1,"createAt":5,"manifestSize":9}`, true, ""},
	{"noParentBranch", `{"parentVersion":1,"createAt":5,"manifestSize":9}`, true, ""},
	{"parentMain", `{"parentBranch":"main","parentVersion":1,"createAt":5,"manifestSize":9}`, true, ""},
	{"noMetadata", `{"identifier":{"version_mapping":[]},"parentVersion":1,"createAt":5,"manifestSize":9}`, true, ""},
	{"idExtra", `{"identifier":{"version_mapping":[[1,"x"]],"zz":1},"parentVersion":1,"createAt":5,"manifestSize":9}`, true, ""},
	{"extra", `{"parentVersion":1,"createAt":5,"manifestSize":9,"zz":{"a":[1]}}`, true, ""},
	{"nullIdentifier", `{"identifier":null,"parentVersion":1,"createAt":5,"manifestSize":9}`, false, ""},
	{"idEmpty", `{"identifier":{},"parentVersion":1,"createAt":5,"manifestSize":9}`, false, ""},
	{"idCamel", `{"identifier":{"versionMapping":[[1,"x"]]},"parentVersion":1,"createAt":5,"manifestSize":9}`, false, ""},
	{"idPairShort", `{"identifier":{"version_mapping":[[1]]},"parentVersion":1,"createAt":5,"manifestSize":9}`, false, ""},
	{"idPairLong", `{"identifier":{"version_mapping":[[1,"x",2]]},"parentVersion":1,"createAt":5,"manifestSize":9}`, false, ""},
	{"idPairIntID", `{"identifier":{"version_mapping":[[1,2]]},"parentVersion":1,"createAt":5,"manifestSize":9}`, false, ""},
	{"idMapNull", `{"identifier":{"version_mapping":null},"parentVersion":1,"createAt":5,"manifestSize":9}`, false, ""},
	{"noParentVersion", `{"createAt":5,"manifestSize":9}`, false, ""},
	{"nullParentVersion", `{"parentVersion":null,"createAt":5,"manifestSize":9}`, false, ""},
	{"noCreateAt", `{"parentVersion":1,"manifestSize":9}`, false, ""},
	{"createAtFloat", `{"parentVersion":1,"createAt":1.5,"manifestSize":9}`, false, ""},
	{"createAtNeg", `{"parentVersion":1,"createAt":-5,"manifestSize":9}`, false, ""},
	{"createAtString", `{"parentVersion":1,"createAt":"2026-01-01T00:00:00Z","manifestSize":9}`, false, ""},
	{"noManifestSize", `{"parentVersion":1,"createAt":5}`, false, ""},
	{"nullMetadata", `{"parentVersion":1,"createAt":5,"manifestSize":9,"metadata":null}`, false, ""},
	{"parentNum", `{"parentBranch":3,"parentVersion":1,"createAt":5,"manifestSize":9}`, false, ""},
	{"dupKey", `{"parentVersion":1,"parentVersion":1,"createAt":5,"manifestSize":9}`, false, ""},
	{"notJSON", `{"parentVersion":1,`, false, ""},
	// Lance lists these; retain refuses a parent Lance could not resolve
	// and a creation time no one wrote.
	{"parentEmpty", `{"parentBranch":"","parentVersion":1,"createAt":5,"manifestSize":9}`, true, "empty parent branch name"},
	{"createAtHuge", `{"parentVersion":1,"createAt":18446744073709551615,"manifestSize":9}`, true, "implausible Unix time"},
}

func TestParseBranchVariants(t *testing.T) {
	for _, v := range branchVariants {
		b, err := parseBranch([]byte(v.body))
		if want := v.lance && v.retainNoWhy == ""; (err == nil) != want {
			t.Errorf("%s: parseBranch = %+v, %v; want accepted=%v", v.name, b, err, want)
		}
	}
	b, err := parseBranch([]byte(lanceBranchFile))
	if err != nil || b.ParentBranch != "feat/x" || b.ParentVersion != 3 || b.ManifestSize != 550 || b.CreatedAt.Unix() != 1796054797 ||
		fmt.Sprint(b.Lineage) != "[{2 f5db8a34c11743dfa3efc66f0ebe0c95} {3 ab87d3feeb264045ab581baac4ae5b6f}]" {
		t.Fatalf("parseBranch(Lance's file) = %+v, %v", b, err)
	}
	b, _ = parseBranch([]byte(`{"parentBranch":"main","parentVersion":1,"createAt":5,"manifestSize":9}`))
	if b.ParentBranch != "" || b.Lineage != nil {
		t.Fatalf("parent main is main: %+v", b)
	}
}

// Real Lance lists exactly the branch files branchVariants says it reads
// (each variant in its own copy of a table: one bad file fails the listing).
func TestBranchParsingAgreesWithLance(t *testing.T) {
	dir := t.TempDir()
	refsRun(t, dir,
		refOp{"op": "create", "rows": 1},
		refOp{"op": "branchCreate", "name": "feat", "from": "main", "version": 1},
	)
	var ops []refOp
	for i, v := range branchVariants {
		table := fmt.Sprintf("v%d", i)
		refCopyDir(t, filepath.Join(dir, "t.lance"), filepath.Join(dir, table+".lance"))
		refWriteFile(t, filepath.Join(dir, table+".lance", "_refs", "branches", "feat.json"), v.body)
		ops = append(ops, refOp{"op": "branches", "table": table, "try": true})
	}
	res := refsRun(t, dir, ops...)
	for i, v := range branchVariants {
		if lanceErr := refLanceError(t, res[i]); (lanceErr == "") != v.lance {
			t.Errorf("%s: Lance says %q (%s), the table says Lance reads it: %v", v.name, lanceErr, res[i], v.lance)
		}
	}
}

func TestBranchesMemory(t *testing.T) {
	s := refMemStore(t)
	d := refFakeDataset(t, s, "db/t.lance", 10, 20)
	_, err := d.ReadBranch(refCtx, "feat/x")
	refWantIs(t, "missing branch", err, ErrBranchNotFound, storage.ErrNotFound)
	for _, bad := range []string{"", "main", "a//b", "a/../b", `a\b`} {
		_, err := d.Branch(bad)
		refWantIs(t, "Branch("+bad+")", err, ErrInvalidName, storage.ErrInvalidArgument)
		_, err = d.ReadBranch(refCtx, bad)
		refWantIs(t, "ReadBranch("+bad+")", err, ErrInvalidName)
	}
	if b, err := d.Branch("x/ünï"); err != nil || b.Root != "db/t.lance/tree/x/ünï" || b.Store != s {
		t.Fatalf("Branch = %+v, %v", b, err)
	}
	root, _ := Open(s, "")
	if b, _ := root.Branch("f"); b.Root != "tree/f" {
		t.Fatalf("branch of a dataset at the store root: %q", b.Root)
	}
	refPut(t, s, "db/t.lance/_refs/branches/feat%2Fx.json", lanceBranchFileMain)
	refPut(t, s, "db/t.lance/_refs/branches/%C3%BCn%C3%AF.json", `{"parentVersion":1,"createAt":5,"manifestSize":10}`)
	refPut(t, s, "db/t.lance/_refs/branches/feat%2fy.json", lanceBranchFileMain)     // Lance re-encodes %2F: it cannot read this
	refPut(t, s, "db/t.lance/_refs/branches/broken.json", `{"parentVersion":"one"}`) // bad JSON
	refPut(t, s, "db/t.lance/_refs/branches/ignored.txt", `x`)
	refFakeDataset(t, s, "db/t.lance/tree/feat/x", 0, 30, 40)
	bs, err := d.ListBranches(refCtx)
	refWantIs(t, "ListBranches", err, ErrMalformedBranch)
	var me *MalformedRefsError
	if !errors.As(err, &me) || strings.Join(me.Keys(), ",") != "db/t.lance/_refs/branches/broken.json,db/t.lance/_refs/branches/feat%2fy.json" {
		t.Fatalf("malformed: %v", err)
	}
	if len(bs) != 2 || bs[0].Name != "feat/x" || bs[1].Name != "ünï" || bs[0].ParentVersion != 2 || bs[0].Info.Key != "db/t.lance/_refs/branches/feat%2Fx.json" {
		t.Fatalf("ListBranches = %+v", bs)
	}
	if b, err := d.ReadBranch(refCtx, "ünï"); err != nil || b.ParentVersion != 1 || b.ManifestSize != 10 {
		t.Fatalf("ReadBranch(ünï) = %+v, %v", b, err)
	}
	if h, err := d.BranchHead(refCtx, "feat/x"); err != nil || h.N != 3 || h.Key != "db/t.lance/tree/feat/x/_versions/"+ManifestName(3, NamingV2) {
		t.Fatalf("BranchHead = %+v, %v", h, err)
	}
	_, err = d.BranchHead(refCtx, "ünï")
	refWantIs(t, "head of a branch without versions", err, ErrNotDataset)
}

// Branches real Lance creates — nested names, a branch of a branch,
// non-ASCII — are listed by retain with Lance's parent, version and
// manifest size; each branch's head is Lance's latest version of it. A
// malformed branch file is named while the rest are listed, and Lance's own
// listing fails on it too.
func TestBranchesWithLance(t *testing.T) {
	dir := t.TempDir()
	res := refsRun(t, dir,
		refOp{"op": "create", "rows": 2},
		refOp{"op": "add", "rows": 1},
		refOp{"op": "add", "rows": 1},
		refOp{"op": "branchCreate", "name": "feat/x", "from": "main", "version": 2},
		refOp{"op": "add", "rows": 3, "on": "feat/x"},
		refOp{"op": "branchCreate", "name": "deep/a/b", "from": "feat/x", "version": 3},
		refOp{"op": "add", "rows": 1, "on": "deep/a/b"},
		refOp{"op": "add", "rows": 1, "on": "deep/a/b"},
		refOp{"op": "branchCreate", "name": "ünï", "from": "main", "version": 1},
		refOp{"op": "branchCreate", "name": "Main", "from": "main", "version": 3},
		refOp{"op": "branches"},
		refOp{"op": "versions", "on": "feat/x"},
		refOp{"op": "versions", "on": "deep/a/b"},
		refOp{"op": "versions", "on": "ünï"},
		refOp{"op": "versions", "on": "Main"},
	)
	lance := refDecode[map[string]refLanceBranch](t, res[10])
	d := refLanceDataset(t, dir)
	bs, err := d.ListBranches(refCtx)
	if err != nil {
		t.Fatal(err)
	}
	if len(bs) != len(lance) || len(bs) != 4 {
		t.Fatalf("retain lists %d branches, Lance %d: %s", len(bs), len(lance), res[10])
	}
	heads := map[string]uint64{}
	for i, name := range []string{"feat/x", "deep/a/b", "ünï", "Main"} {
		vs := refDecode[[]refLanceCount](t, res[11+i])
		heads[name] = vs[len(vs)-1].Version
	}
	for _, b := range bs {
		l, ok := lance[b.Name]
		if !ok {
			t.Fatalf("retain lists %q, Lance does not: %s", b.Name, res[10])
		}
		lp := ""
		if l.ParentBranch != nil {
			lp = *l.ParentBranch
		}
		if b.ParentBranch != lp || b.ParentVersion != l.ParentVersion || b.ManifestSize != l.ManifestSize {
			t.Errorf("%s: retain %+v, Lance %+v", b.Name, b, l)
		}
		h, err := d.BranchHead(refCtx, b.Name)
		if err != nil || h.N != heads[b.Name] {
			t.Errorf("head of %s = %+v, %v; Lance's latest is %d", b.Name, h, err, heads[b.Name])
		}
		if b.CreatedAt.IsZero() || len(b.Lineage) == 0 {
			t.Errorf("%s: no createAt or lineage: %+v", b.Name, b)
		}
		// The fork's manifest size is the parent's manifest at the fork.
		parent := d
		if b.ParentBranch != "" {
			parent, _ = d.Branch(b.ParentBranch)
		}
		if pv, err := parent.VersionAt(refCtx, b.ParentVersion); err != nil || uint64(pv.Info.Size) != b.ManifestSize {
			t.Errorf("%s: parent manifest %+v, %v; branch file says %d", b.Name, pv, err, b.ManifestSize)
		}
	}
	deep, err := d.ReadBranch(refCtx, "deep/a/b")
	if err != nil || deep.ParentBranch != "feat/x" || deep.ParentVersion != 3 || len(deep.Lineage) != 2 ||
		deep.Info.Key != "t.lance/_refs/branches/deep%2Fa%2Fb.json" {
		t.Fatalf("ReadBranch(deep/a/b) = %+v, %v", deep, err)
	}
	feat, _ := d.ReadBranch(refCtx, "feat/x")
	if len(feat.Lineage) != 1 || feat.Lineage[0] != deep.Lineage[0] || feat.Lineage[0].Version != 2 || deep.Lineage[1].Version != 3 {
		t.Fatalf("lineage: feat/x %v, deep/a/b %v", feat.Lineage, deep.Lineage)
	}
	// The first manifest of a branch carries the parent's version number.
	fd, _ := d.Branch("feat/x")
	if vs, err := fd.Versions(refCtx); err != nil || vs[0].N != 2 {
		t.Fatalf("feat/x versions %+v, %v", vs, err)
	}

	bad := filepath.Join(dir, "t.lance/_refs/branches/zz.json")
	refWriteFile(t, bad, `{"parentVersion": 1}`)
	bs, err = d.ListBranches(refCtx)
	var me *MalformedRefsError
	if !errors.As(err, &me) || !errors.Is(err, ErrMalformedBranch) || strings.Join(me.Keys(), ",") != "t.lance/_refs/branches/zz.json" || len(bs) != 4 {
		t.Fatalf("ListBranches with a malformed file = %d branches, %v", len(bs), err)
	}
	if !strings.Contains(err.Error(), `missing \"createAt\"`) && !strings.Contains(err.Error(), `missing "createAt"`) {
		t.Errorf("the reason is not named: %v", err)
	}
	res = refsRun(t, dir, refOp{"op": "branches", "try": true})
	if refLanceError(t, res[0]) == "" {
		t.Fatalf("Lance listed branches despite the malformed file: %s", res[0])
	}
}
