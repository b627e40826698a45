package main

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/retain-dev/retain/adapters/s3"
	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/internal/emulator"
)

// datasetFiles is every path under dir with its size: what a refused
// command must leave exactly as it was.
func datasetFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out = append(out, fmt.Sprintf("%s %s %d", rel, info.Mode(), info.Size()))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// A table (or a folder inside one) given where a store is expected is
// refused, exit 2, naming the store it probably meant, and nothing is
// written into the dataset; the table commands keep taking it.
func TestStoreThatIsATableIsRefused(t *testing.T) {
	db := fixtureDB(t, "v2-appends")
	table := filepath.Join(db, "v2-appends.lance")
	before := datasetFiles(t, table)
	for _, args := range [][]string{
		{"cleanup", "run", table, "--confirm-write-outage", "--keep-last", "1"},
		{"checkpoint", "list", table},
		{"cleanup", "preview", table, "--keep-last", "1"},
		{"checkpoint", "create", "x", table},
		{"claim", "status", table},
		{"cleanup", "run", filepath.Join(table, "data"), "--confirm-write-outage", "--keep-last", "1"},
		{"checkpoint", "list", filepath.Join(table, "_versions")},
	} {
		out, errs, code := retain(t, args...)
		if code != 2 || !strings.Contains(errs, "not a store") || !strings.Contains(errs, "the store is probably "+db+" ") {
			t.Errorf("retain %s: exit %d, want 2 naming the store %s:\n%s%s", strings.Join(args, " "), code, db, out, errs)
		}
	}
	if after := datasetFiles(t, table); !slices.Equal(before, after) {
		t.Fatalf("a refused command changed the dataset:\nbefore %v\nafter  %v", before, after)
	}
	if _, err := os.Stat(filepath.Join(db, ".retain-localfs")); err == nil {
		t.Fatal("a refused command opened the store beside the table")
	}
	// The commands that take a TABLE-URI still take it.
	for _, args := range [][]string{
		{"inspect", table},
		{"tag", "create", "good", table},
		{"tag", "list", table},
		{"branch", "list", table},
	} {
		if out, errs, code := retain(t, args...); code != 0 {
			t.Errorf("retain %s: exit %d:\n%s%s", strings.Join(args, " "), code, out, errs)
		}
	}
	// The store itself still works.
	if out, errs, code := retain(t, "checkpoint", "list", db); code != 0 || strings.Contains(out, "no Lance tables") {
		t.Fatalf("checkpoint list of the store: exit %d:\n%s%s", code, out, errs)
	}
}

// Empty results are only shown for a store that holds tables: a store
// with none says so.
func TestStoreWithoutTablesSaysSo(t *testing.T) {
	empty := t.TempDir()
	for _, args := range [][]string{
		{"checkpoint", "list", empty},
		{"cleanup", "preview", empty, "--keep-last", "1"},
	} {
		out, errs, code := retain(t, args...)
		if code != 0 || !strings.Contains(out, "no Lance tables under "+empty) {
			t.Errorf("retain %s: exit %d, want 0 with a note:\n%s%s", strings.Join(args, " "), code, out, errs)
		}
	}
}

// On an object store a table is seen by its name (…/t.lance, …/t.lance/data)
// before anything is opened, or by its _versions/ through a read-only open,
// and refused before a writable open probes (writes) the prefix.
func TestS3StoreThatIsATableIsRefused(t *testing.T) {
	e := emulator.GoFakeS3(t)
	emulator.IsolateAWS(t, e.Env())
	ctx := context.Background()
	// A table folder named without .lance: only its _versions/ tells.
	table := "s3://retain-misuse/db/mytable"
	loc, err := storage.ParseLocation(table)
	if err != nil {
		t.Fatal(err)
	}
	d, err := s3.Open(ctx, loc)
	if err != nil {
		t.Fatal(err)
	}
	st, err := storage.NewStore(ctx, "s3", d)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	// The test's own writable open probed the prefix: clear it first.
	if objs, err := st.List(ctx, "", 0); err == nil {
		for _, o := range objs {
			if err := st.Delete(ctx, o.Key, storage.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	fx := loadFixtures(t)["v2-appends"]
	for _, f := range fx.Files {
		b, err := os.ReadFile(filepath.Join(fixturesDir, fx.Table, filepath.FromSlash(f)))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.PutBytes(ctx, f, b, storage.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	keys := func() []string {
		objs, err := st.List(ctx, "", 0)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, o := range objs {
			out = append(out, o.Key+" "+o.Version)
		}
		return out
	}
	before := keys()
	for _, args := range [][]string{
		{"checkpoint", "list", table},
		{"cleanup", "run", table, "--confirm-write-outage", "--keep-last", "1"},
		{"checkpoint", "create", "x", table},
		{"checkpoint", "list", "s3://retain-misuse/db/t.lance/data"},
	} {
		out, errs, code := retain(t, args...)
		if code != 2 || !strings.Contains(errs, "not a store") || !strings.Contains(errs, "the store is probably s3://retain-misuse/db ") {
			t.Errorf("retain %s: exit %d, want 2 naming s3://retain-misuse/db:\n%s%s", strings.Join(args, " "), code, out, errs)
		}
	}
	if after := keys(); !slices.Equal(before, after) {
		t.Fatalf("a refused command changed the dataset:\nbefore %v\nafter  %v", before, after)
	}
	if _, errs, code := retain(t, "inspect", table); code != 0 {
		t.Fatalf("inspect of the table: exit %d: %s", code, errs)
	}
}
