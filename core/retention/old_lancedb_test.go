package retention

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/retain-dev/retain/core/checkpoint"
	"github.com/retain-dev/retain/core/checkpoint/registry"
	"github.com/retain-dev/retain/core/lance"
	"github.com/retain-dev/retain/internal/lancetest"
)

const oldFixtures = "../lance/testdata/lancedb-0.22"

// oldExpected is what LanceDB 0.22.3 read of its tables when it wrote them.
type oldExpected struct {
	Tables map[string]struct {
		Versions []struct {
			Version uint64  `json:"version"`
			Rows    int64   `json:"rows"`
			IDSum   float64 `json:"idSum"`
		} `json:"versions"`
		Tags map[string]uint64 `json:"tags"`
	} `json:"tables"`
}

type oldVerify struct {
	Listed map[string][]uint64 `json:"listed"`
	Rows   map[string]map[string]struct {
		Rows    int64   `json:"rows"`
		Scanned int64   `json:"scanned"`
		IDSum   float64 `json:"idSum"`
	} `json:"rows"`
	TagRows map[string]struct {
		Rows    int64   `json:"rows"`
		Scanned int64   `json:"scanned"`
		IDSum   float64 `json:"idSum"`
	} `json:"tagRows"`
	Errors   []string `json:"errors"`
	Appended map[string]struct {
		Rows    int64 `json:"rows"`
		Before  int64 `json:"before"`
		Scanned int64 `json:"scanned"`
	} `json:"appended"`
}

// oracle runs oracle.cjs verify jobs, one per table, and decodes them.
func oracle(t *testing.T, jobs []map[string]any) []oldVerify {
	t.Helper()
	var out struct {
		Results []oldVerify `json:"results"`
	}
	lancetest.Node(t, "oracle.cjs", map[string]any{"jobs": jobs}, &out)
	if len(out.Results) != len(jobs) {
		t.Fatalf("oracle: %d results for %d jobs", len(out.Results), len(jobs))
	}
	for i, r := range out.Results {
		if len(r.Errors) > 0 {
			t.Fatalf("real Lance on %v: %s", jobs[i]["table"], strings.Join(r.Errors, "; "))
		}
	}
	return out.Results
}

// TestCleanupLanceDB022Tables: tables LanceDB 0.22.3 wrote (manifest
// footer 0.1; V1 and V2 names) are checkpointed by retain, appended to by
// Lance 12 (its manifests say 0.2: one table now mixes both), and cleaned
// by retain. Lance 12 then lists exactly the kept versions, checks out each
// and every pin and tag with the rows LanceDB 0.22 wrote, and appends.
// Retain used to refuse the checkpoint: it called every 0.1 manifest
// corrupt.
func TestCleanupLanceDB022Tables(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real Lance (Node)")
	}
	b, err := os.ReadFile(filepath.Join(oldFixtures, "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var want oldExpected
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "db")
	var tables []string
	for table := range want.Tables {
		tables = append(tables, table)
		if err := os.CopyFS(filepath.Join(dir, table+".lance"), os.DirFS(filepath.Join(oldFixtures, table+".lance"))); err != nil {
			t.Fatal(err)
		}
	}
	sort.Strings(tables)
	s := open(t, dir, false)
	c, err := checkpoint.Create(bg, s, "nightly", "")
	if err != nil {
		t.Fatalf("checkpoint of the LanceDB 0.22 tables: %v", err)
	}
	pinned := map[string]uint64{}
	for _, r := range c.Tables {
		pinned[strings.TrimSuffix(r.Path, ".lance")] = r.Version
	}

	// Lance 12 commits on top of each pin, so the pins are no heads.
	var jobs []map[string]any
	for _, table := range tables {
		jobs = append(jobs, map[string]any{"kind": "verify", "dir": dir, "table": table, "append": []string{"main"}})
	}
	oracle(t, jobs)

	rep, err := Run(bg, s, Policy{KeepLast: 1}, RunOptions{ConfirmWriteOutage: true})
	if err != nil || rep.Failed != 0 {
		t.Fatalf("run: %v %+v", err, rep)
	}
	jobs = nil
	kept := map[string][]uint64{}
	for _, table := range tables {
		w := want.Tables[table]
		last := w.Versions[len(w.Versions)-1].Version
		if pinned[table] != last {
			t.Fatalf("%s: the checkpoint pins v%d, the latest LanceDB 0.22 wrote is v%d", table, pinned[table], last)
		}
		// Kept: the tag, the pin, Lance 12's head.
		var k []uint64
		for _, v := range w.Tags {
			k = append(k, v)
		}
		k = append(k, last, last+1)
		sort.Slice(k, func(i, j int) bool { return k[i] < k[j] })
		kept[table] = k
		for _, tr := range rep.Tables {
			if tr.Table == table+".lance" && (tr.State != TableDone || tr.FilesDeleted == 0 || tr.VersionsRemoved != len(w.Versions)+1-len(k)) {
				t.Fatalf("%s: %+v", table, tr)
			}
		}
		ds, err := lance.Open(s, table+".lance")
		if err != nil {
			t.Fatal(err)
		}
		tags, err := ds.ListTags(bg)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, tg := range tags {
			names = append(names, tg.Name)
		}
		jobs = append(jobs, map[string]any{"kind": "verify", "dir": dir, "table": table,
			"versions": map[string][]uint64{"main": k}, "tags": names, "append": []string{"main"}})
	}
	res := oracle(t, jobs)
	for i, table := range tables {
		r, w := res[i], want.Tables[table]
		t.Logf("%s: Lance 12 lists %v after the cleanup; pins and tags read %v", table, r.Listed["main"], r.TagRows)
		if fmt.Sprint(r.Listed["main"]) != fmt.Sprint(kept[table]) {
			t.Fatalf("%s: Lance lists %v, retain kept %v", table, r.Listed["main"], kept[table])
		}
		for _, v := range w.Versions {
			got, ok := r.Rows["main"][fmt.Sprint(v.Version)]
			if !ok {
				continue // removed
			}
			if got.Rows != v.Rows || got.Scanned != v.Rows || got.IDSum != v.IDSum {
				t.Fatalf("%s v%d: Lance 12 reads %+v; LanceDB 0.22 wrote %d rows, id sum %v", table, v.Version, got, v.Rows, v.IDSum)
			}
		}
		pins := 0
		for tag, got := range r.TagRows {
			if registry.IsReservedTag(tag) {
				pins++
			}
			if got.Scanned != got.Rows || got.Rows == 0 {
				t.Fatalf("%s: tag %s reads as %+v", table, tag, got)
			}
		}
		if pins == 0 || len(r.TagRows) != pins+len(w.Tags) {
			t.Fatalf("%s: Lance read tags %v", table, r.TagRows)
		}
		if a := r.Appended["main"]; a.Rows != a.Before+1 || a.Scanned != a.Rows {
			t.Fatalf("%s: Lance 12 append after the cleanup: %+v", table, a)
		}
	}
}
