package retention

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/retain-dev/retain/core/checkpoint/registry"
	"github.com/retain-dev/retain/core/lance"
	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/internal/lancetest"
)

// deletes.lance's data files (lance/testdata): v4 adds delData1, which the
// head v5 still reads; the pinned v3 and v5 read delData0.
const (
	delData0 = "deletes.lance/data/001011100111000101000010859ea247ca9cc209d2d1bd54e5.lance"
	delData1 = "deletes.lance/data/110100010010010001001010c4024349739e778a3a210cc0ec.lance"
)

// pinsReadByLance has real Lance check out every checkpoint pin tag of the
// tables and read each in full (every data file with its deletions).
func pinsReadByLance(t *testing.T, s *storage.Store, dir string, tables ...string) {
	t.Helper()
	if testing.Short() {
		return
	}
	var jobs []map[string]any
	for _, table := range tables {
		ds, err := lance.Open(s, table+".lance")
		if err != nil {
			t.Fatal(err)
		}
		tags, err := ds.ListTags(bg)
		if err != nil {
			t.Fatal(err)
		}
		var pins []string
		for _, tg := range tags {
			if registry.IsReservedTag(tg.Name) {
				pins = append(pins, tg.Name)
			}
		}
		if len(pins) == 0 {
			t.Fatalf("%s has no pin tags", table)
		}
		jobs = append(jobs, map[string]any{"kind": "verify", "dir": dir, "table": table, "tags": pins})
	}
	var out struct {
		Results []struct {
			TagRows map[string]struct {
				Rows    int64 `json:"rows"`
				Scanned int64 `json:"scanned"`
			} `json:"tagRows"`
			Errors []string `json:"errors"`
		} `json:"results"`
	}
	lancetest.Node(t, "oracle.cjs", map[string]any{"jobs": jobs}, &out)
	t.Logf("real Lance reads the pins: %+v", out.Results)
	for i, r := range out.Results {
		if len(r.Errors) > 0 || len(r.TagRows) == 0 {
			t.Fatalf("real Lance on the pins of %s: %v", tables[i], r.Errors)
		}
		for tag, rows := range r.TagRows {
			if rows.Scanned != rows.Rows {
				t.Fatalf("%s: Lance reads pin %s as %+v", tables[i], tag, rows)
			}
		}
	}
}

// wantTableRefused checks the run refused deletes.lance alone, naming the
// version and the file, and cleaned branch-tag.lance.
func wantTableRefused(t *testing.T, dir string, s *storage.Store, rep *RunReport, err error, version, key string) string {
	t.Helper()
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if rep.Failed != 1 {
		t.Fatalf("failed %d: %+v", rep.Failed, rep.Tables)
	}
	msg := ""
	for _, tr := range rep.Tables {
		switch tr.Table {
		case "deletes.lance":
			var te *TableRefusedError
			if tr.State != TableRefused || !errors.Is(tr.Err(), ErrTableRefused) || !errors.Is(tr.Err(), lance.ErrKeptVersionBroken) || !errors.As(tr.Err(), &te) ||
				tr.FilesDeleted != 0 || tr.RootDigest != "" {
				t.Fatalf("deletes.lance: %+v (%v)", tr, tr.Err())
			}
			msg = tr.Error
			for _, want := range []string{"deletes.lance", version, key, "nothing of this table is deleted", "restore the file"} {
				if !strings.Contains(msg, want) {
					t.Fatalf("the refusal does not say %q: %s", want, msg)
				}
			}
		case "branch-tag.lance":
			if tr.Err() != nil || tr.State != TableDone || tr.FilesDeleted == 0 {
				t.Fatalf("branch-tag.lance was not cleaned: %+v", tr)
			}
		}
	}
	for _, g := range rep.Boundaries {
		if g.Path == "deletes.lance" {
			t.Fatalf("a gc boundary was published for the refused table: %+v", g)
		}
	}
	for _, k := range []string{delV4, delData1, "deletes.lance/_versions/18446744073709551614.manifest"} {
		if !exists(t, dir, k) {
			t.Fatalf("%s was deleted from the refused table", k)
		}
	}
	j, _, jerr := ReadJournal(bg, s, rep.OperationID)
	if jerr != nil || j.State != StateComplete {
		t.Fatalf("journal %+v, %v", j, jerr)
	}
	return msg
}

// TestRunRefusesTableWithBrokenHead: the unpinned head of deletes.lance
// names its second data file with one character changed. That file is
// then referenced only by the removed v4, and a run used to delete it with
// v4. Now the table is refused with nothing deleted; branch-tag.lance is
// cleaned; every pin still reads in real Lance.
func TestRunRefusesTableWithBrokenHead(t *testing.T) {
	dir, _ := setup(t)
	p := filepath.Join(dir, delV5)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	name := []byte(filepath.Base(delData1))
	i := bytes.LastIndex(b, name) // in the Manifest section, the file's last
	if i < 0 {
		t.Fatal("v5 does not name the data file")
	}
	b[i] ^= 1
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	flipped := "deletes.lance/data/0" + filepath.Base(delData1)[1:]
	s := open(t, dir, false)

	pv, err := Preview(bg, open(t, dir, true), Policy{KeepLast: 1})
	if err != nil {
		t.Fatalf("preview: %v", err)
	}
	for _, tp := range pv.Tables {
		if tp.Table == "deletes.lance" && (tp.Refused == "" || !errors.Is(tp.Err(), lance.ErrKeptVersionBroken) || tp.Totals.FilesToDelete != 0) {
			t.Fatalf("preview of deletes.lance: %+v", tp)
		}
	}

	rep, err := Run(bg, s, Policy{KeepLast: 1}, RunOptions{ConfirmWriteOutage: true})
	msg := wantTableRefused(t, dir, s, rep, err, "main v5", flipped)
	if !strings.Contains(msg, "latest version of its branch") {
		t.Fatalf("the refusal of a broken head: %s", msg)
	}
	pinsReadByLance(t, s, dir, "deletes", "branch-tag")
}

// TestRunRefusesTableWithBrokenPin: a data file of the pinned
// deletes.lance v3 is replaced by a folder. The run used to clean the
// table around it; now the table is refused naming the pin and saying how
// to release it.
func TestRunRefusesTableWithBrokenPin(t *testing.T) {
	dir, _ := setup(t)
	p := filepath.Join(dir, filepath.FromSlash(delData0))
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(p, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(p, "x", "y"), []byte("y"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := open(t, dir, false)
	rep, err := Run(bg, s, Policy{KeepLast: 1}, RunOptions{ConfirmWriteOutage: true})
	msg := wantTableRefused(t, dir, s, rep, err, "main v3", delData0)
	for _, want := range []string{"a folder stands there", "checkpoint nightly", "`retain checkpoint delete NAME-OR-ID STORE`"} {
		if !strings.Contains(msg, want) {
			t.Fatalf("the refusal of a broken pin does not say %q: %s", want, msg)
		}
	}
	pinsReadByLance(t, s, dir, "branch-tag")
}
