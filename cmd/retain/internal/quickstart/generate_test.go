package quickstart

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/retain-dev/retain/internal/lancetest"
)

// step is one step of internal/lancetest/build.cjs.
type step map[string]any

// fixtureSpecs are the tables of the quickstart store: six versions each,
// every one a single LanceDB commit.
var fixtureSpecs = []struct {
	Table string // without ".lance"
	Steps []step
}{
	{"events", []step{
		{"op": "create", "rows": 4},
		{"op": "add", "rows": 2},
		{"op": "delete", "where": "id = 1"},
		{"op": "add", "rows": 2},
		{"op": "update", "where": "id = 2", "values": map[string]string{"v": "'changed'"}},
		{"op": "add", "rows": 1},
	}},
	{"users", []step{
		{"op": "create", "rows": 3},
		{"op": "createIndex", "column": "id"},
		{"op": "add", "rows": 2},
		{"op": "delete", "where": "id = 0"},
		{"op": "createIndex", "column": "id"},
		{"op": "add", "rows": 1},
	}},
}

// generateDir is where the generator builds, so nothing in the fixture
// depends on a random temp path.
const generateDir = "/tmp/retain-quickstart-fixture"

// describe says in words what a build step committed.
func describe(s step) string {
	plural := func(n any) string {
		if fmt.Sprint(n) == "1" {
			return "1 row"
		}
		return fmt.Sprint(n) + " rows"
	}
	switch s["op"] {
	case "create":
		return "create the table with " + plural(s["rows"])
	case "add":
		return "append " + plural(s["rows"])
	case "delete":
		return fmt.Sprintf("delete where %s", s["where"])
	case "update":
		return fmt.Sprintf("update where %s", s["where"])
	case "createIndex":
		return fmt.Sprintf("build a scalar index on %s", s["column"])
	}
	return fmt.Sprint(s["op"])
}

// TestGenerateQuickstartFixture rebuilds fixture/ with real LanceDB:
//
//	RETAIN_REGEN_QUICKSTART=1 go test -run TestGenerateQuickstartFixture ./cmd/retain/internal/quickstart/
func TestGenerateQuickstartFixture(t *testing.T) {
	if os.Getenv("RETAIN_REGEN_QUICKSTART") != "1" {
		t.Skip("set RETAIN_REGEN_QUICKSTART=1 to rebuild fixture/ with real LanceDB")
	}
	if err := os.RemoveAll(generateDir); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(generateDir, 0o755); err != nil {
		t.Fatal(err)
	}
	var jobs []any
	for _, spec := range fixtureSpecs {
		jobs = append(jobs, map[string]any{"kind": "build", "dir": generateDir, "table": spec.Table, "naming": "v2", "steps": spec.Steps})
	}
	var out struct {
		Results []struct {
			Error string `json:"error"`
			Table string `json:"table"`
			Steps []struct {
				Version uint64 `json:"version"`
			} `json:"steps"`
			Versions map[string][]struct {
				Version   uint64 `json:"version"`
				Rows      int64  `json:"rows"`
				Scanned   int64  `json:"scanned"`
				IDSum     int64  `json:"idSum"`
				Timestamp string `json:"timestamp"`
			} `json:"versions"`
		} `json:"results"`
	}
	lancetest.Node(t, "oracle.cjs", map[string]any{"jobs": jobs}, &out)

	info := Info{LanceDB: lancetest.LanceDBVersion, Pinned: PinnedVersion}
	storeDir := filepath.Join("fixture", "store")
	if err := os.RemoveAll(storeDir); err != nil {
		t.Fatal(err)
	}
	for i, spec := range fixtureSpecs {
		res := out.Results[i]
		if res.Error != "" {
			t.Fatalf("%s: %s", spec.Table, res.Error)
		}
		tb := Table{Table: spec.Table + ".lance"}
		main := res.Versions["main"]
		if len(main) != len(spec.Steps) {
			t.Fatalf("%s: %d versions for %d steps", spec.Table, len(main), len(spec.Steps))
		}
		for j, v := range main {
			if res.Steps[j].Version != v.Version || v.Version != uint64(j+1) || v.Rows != v.Scanned {
				t.Fatalf("%s: step %d made version %d, listed %+v", spec.Table, j, res.Steps[j].Version, v)
			}
			ts, err := time.Parse(time.RFC3339Nano, v.Timestamp)
			if err != nil {
				t.Fatal(err)
			}
			tb.Versions = append(tb.Versions, Version{Version: v.Version, Commit: describe(spec.Steps[j]), Rows: v.Rows, IDSum: v.IDSum, Timestamp: ts.UTC()})
		}
		if err := os.CopyFS(filepath.Join(storeDir, tb.Table), os.DirFS(res.Table)); err != nil {
			t.Fatal(err)
		}
		info.Tables = append(info.Tables, tb)
	}
	b, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join("fixture", "fixture.json"), append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	// Files are committed with plain modes whatever the umask.
	filepath.WalkDir(storeDir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			err = os.Chmod(p, 0o644)
		}
		if err == nil && strings.HasSuffix(p, ".tmp") {
			t.Errorf("temporary file in the fixture: %s", p)
		}
		return err
	})
}
