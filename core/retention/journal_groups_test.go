package retention

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/retain-dev/retain/adapters/localfs"
	"github.com/retain-dev/retain/core/lance"
	"github.com/retain-dev/retain/core/storage"
)

// failedTableRun runs a cleanup whose deletes in branch-tag.lance fail: the
// run stops incomplete with both tables' plans journaled.
func failedTableRun(t *testing.T) (dir string, rep *RunReport) {
	t.Helper()
	dir, _ = setup(t)
	drv, err := localfs.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	s, err := storage.NewStore(bg, "localfs", failDeletes(drv, "branch-tag.lance/"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	rep, err = Run(bg, s.At(loc(dir)), Policy{KeepLast: 1}, RunOptions{ConfirmWriteOutage: true})
	if !errors.Is(err, ErrRunIncomplete) {
		t.Fatalf("want an incomplete run, got %v", err)
	}
	return dir, rep
}

// TestRunJournalsPlansTogether: the tables' plans are journaled in one
// object (format 2), not one object a table, and a resume carries out the
// failed table's plan from it.
func TestRunJournalsPlansTogether(t *testing.T) {
	dir, rep := failedTableRun(t)
	s := open(t, dir, false)
	j, _, err := ReadJournal(bg, s, rep.OperationID)
	if err != nil || j.Format != 2 {
		t.Fatalf("journal %+v: %v", j, err)
	}
	keys := map[string]int{}
	for _, jt := range j.Tables {
		if jt.PlanKey != "" {
			keys[jt.PlanKey]++
		}
	}
	if len(keys) != 1 {
		t.Fatalf("plans journaled in %d objects (%v), want 1", len(keys), keys)
	}
	objs, err := s.List(bg, JournalPrefix+rep.OperationID+"/tables/", 0)
	if err != nil || len(objs) != 1 {
		t.Fatalf("%v: %d plan objects", err, len(objs))
	}
	rr, err := Resume(bg, s, ResumeOptions{})
	if err != nil || rr.Failed != 0 || rr.Totals.Tables != 1 {
		t.Fatalf("resume: %v %+v", err, rr)
	}
	if objs, _ := s.List(bg, JournalPrefix+rep.OperationID+"/tables/", 0); len(objs) != 0 {
		t.Fatalf("a closed run kept %d plan objects", len(objs))
	}
}

// TestResumeFormat1Journal: a run journaled by a build before plan groups
// (format 1, one plan an object) is resumed by this one.
func TestResumeFormat1Journal(t *testing.T) {
	dir, rep := failedTableRun(t)
	s := open(t, dir, false)
	op := rep.OperationID
	// Rewrite the journal as format 1 wrote it.
	b, err := os.ReadFile(filepath.Join(dir, JournalKey(op)))
	if err != nil {
		t.Fatal(err)
	}
	var j map[string]any
	if err := json.Unmarshal(b, &j); err != nil {
		t.Fatal(err)
	}
	j["format"] = 1
	group := map[string]*planGroup{}
	for i, v := range j["tables"].([]any) {
		jt := v.(map[string]any)
		key, _ := jt["plan_key"].(string)
		if key == "" {
			continue
		}
		if group[key] == nil {
			raw, err := os.ReadFile(filepath.Join(dir, key))
			if err != nil {
				t.Fatal(err)
			}
			var g planGroup
			if err := json.Unmarshal(raw, &g); err != nil {
				t.Fatal(err)
			}
			group[key] = &g
			if err := os.Remove(filepath.Join(dir, key)); err != nil {
				t.Fatal(err)
			}
		}
		one := strings.Replace(key, "/0000.json", "/"+strings.Repeat("0", 3)+string(rune('1'+i))+".json", 1)
		if err := os.WriteFile(filepath.Join(dir, one), group[key].Plans[jt["table"].(string)], 0o644); err != nil {
			t.Fatal(err)
		}
		jt["plan_key"] = one
	}
	out, _ := json.Marshal(j)
	if err := os.WriteFile(filepath.Join(dir, JournalKey(op)), out, 0o644); err != nil {
		t.Fatal(err)
	}
	rr, err := Resume(bg, s, ResumeOptions{})
	if err != nil || rr.Failed != 0 || rr.Totals.Tables != 1 {
		t.Fatalf("resume of a format 1 journal: %v %+v", err, rr)
	}
	for _, tr := range rr.Tables {
		if tr.Table == "branch-tag.lance" && (tr.State != TableDone || tr.FilesDeleted == 0) {
			t.Fatalf("branch-tag after resume: %+v", tr)
		}
	}
}

// TestReadJournalRefusesNewerFormat: a journal from a newer build is not
// guessed at.
func TestReadJournalRefusesNewerFormat(t *testing.T) {
	dir, rep := failedTableRun(t)
	s := open(t, dir, false)
	p := filepath.Join(dir, JournalKey(rep.OperationID))
	b, _ := os.ReadFile(p)
	var j map[string]any
	if err := json.Unmarshal(b, &j); err != nil {
		t.Fatal(err)
	}
	j["format"] = 3
	out, _ := json.Marshal(j)
	if err := os.WriteFile(p, out, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ReadJournal(bg, s, rep.OperationID); !errors.Is(err, ErrCorruptJournal) {
		t.Fatalf("a format 3 journal: %v, want ErrCorruptJournal", err)
	}
}

// TestGroupPlansBoundsObjects: plans go together up to about
// planGroupBytes an object; a larger plan goes alone.
func TestGroupPlansBoundsObjects(t *testing.T) {
	big := func(n int) *lance.Plan {
		p := &lance.Plan{}
		for i := range n {
			p.Files = append(p.Files, lance.PlannedFile{Key: strings.Repeat("k", 100) + string(rune('a'+i%26))})
		}
		return p
	}
	tables := []JournalTable{{Table: "a.lance"}, {Table: "b.lance"}, {Table: "c.lance"}, {Table: "d.lance"}, {Table: "e.lance"}}
	plans := []*lance.Plan{big(10), nil, big(6000), big(10), big(10)} // c: about 1.1 MB
	keys, bodies, err := groupPlans("op", tables, plans)
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 3 || tables[0].PlanKey != keys[0] || tables[1].PlanKey != "" || tables[2].PlanKey != keys[1] || tables[3].PlanKey != keys[2] || tables[4].PlanKey != keys[2] {
		t.Fatalf("keys %v, tables %+v", keys, tables)
	}
	for i, b := range bodies {
		var g planGroup
		if err := json.Unmarshal(b, &g); err != nil || len(g.Plans) == 0 {
			t.Fatalf("object %d: %v", i, err)
		}
	}
}
