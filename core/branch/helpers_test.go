package branch

import (
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/retain-dev/retain/adapters/localfs"
	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/internal/lancetest"
)

var bg = context.Background()

type op map[string]any

// lanceOps runs internal/lancetest/refs.cjs (real Lance) on dir/<table>.lance
// and returns one raw result per op.
func lanceOps(t testing.TB, dir, table string, ops ...op) []json.RawMessage {
	t.Helper()
	var out struct {
		Results []json.RawMessage `json:"results"`
	}
	lancetest.Node(t, "refs.cjs", map[string]any{"dir": dir, "table": table, "naming": "v2", "ops": ops}, &out)
	if len(out.Results) != len(ops) {
		t.Fatalf("refs.cjs returned %d results for %d ops", len(out.Results), len(ops))
	}
	return out.Results
}

// lanceError is the error a "try" op reported, or "".
func lanceError(raw json.RawMessage) string {
	var e struct {
		Error string `json:"error"`
	}
	_ = json.Unmarshal(raw, &e)
	return e.Error
}

// lanceBranches is Lance's own list of the table's branches.
func lanceBranches(t testing.TB, dir, table string) []string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(lanceOps(t, dir, table, op{"op": "branches"})[0], &m); err != nil {
		t.Fatal(err)
	}
	out := []string{}
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// verified is what oracle.cjs's verify job read.
type verified struct {
	Listed map[string][]uint64 `json:"listed"`
	Rows   map[string]map[string]struct {
		Rows    int64   `json:"rows"`
		Scanned int64   `json:"scanned"`
		IDSum   float64 `json:"idSum"`
	} `json:"rows"`
	Errors   []string `json:"errors"`
	Appended map[string]struct {
		Rows    int64 `json:"rows"`
		Scanned int64 `json:"scanned"`
	} `json:"appended"`
}

// lanceVerify asks real Lance to list each branch's versions, read every
// row of the versions asked for, and append to main.
func lanceVerify(t testing.TB, dir, table string, versions map[string][]uint64) verified {
	t.Helper()
	var out struct {
		Results []verified `json:"results"`
	}
	lancetest.Node(t, "oracle.cjs", map[string]any{"jobs": []map[string]any{
		{"kind": "verify", "dir": dir, "table": table, "versions": versions, "append": []string{"main"}},
	}}, &out)
	if len(out.Results) != 1 {
		t.Fatalf("oracle.cjs: %+v", out)
	}
	return out.Results[0]
}

// localStore is a localfs store over dir, which real Lance also reads.
func localStore(t testing.TB, dir string) (*storage.Store, storage.Location) {
	t.Helper()
	d, err := localfs.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	s, err := storage.NewStore(bg, "localfs", d)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	loc := storage.Location{Scheme: "file", Path: dir}
	return s.At(loc), loc
}

// files lists every regular file under dir/<table>.lance with its size
// (read-only: the test looks at what the store holds).
func files(t testing.TB, dir, table string) map[string]int64 {
	t.Helper()
	root := filepath.Join(dir, table+".lance")
	out := map[string]int64{}
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

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
