package retention

import (
	"encoding/binary"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/retain-dev/retain/core/lance"
)

// appendsHead is v2-appends.lance's latest manifest (version 3, V2 name).
const appendsHead = "v2-appends.lance/_versions/18446744073709551612.manifest"

// unknownFeature rewrites a manifest so its Manifest message ends with
// reader_feature_flags = 1<<9 (a later field wins), a bit Lance 12 does
// not have.
func unknownFeature(b []byte) []byte {
	pos := binary.LittleEndian.Uint64(b[len(b)-16:])
	foot := b[len(b)-16:]
	msg := b[pos+4 : len(b)-16]
	msg = append(append([]byte(nil), msg...), 9<<3, 0x80, 0x04) // field 9 varint 512
	out := append([]byte(nil), b[:pos]...)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(msg)))
	out = append(out, msg...)
	return append(out, foot...)
}

// filesUnder lists every file under a table folder.
func filesUnder(t *testing.T, dir, table string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	err := filepath.WalkDir(filepath.Join(dir, table), func(p string, e fs.DirEntry, err error) error {
		if err == nil && !e.IsDir() {
			out[p] = true
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestCleanupIsolatesUnreadableTable: in a store of two tables with no
// checkpoint, one table's latest manifest is truncated, garbage, or sets an
// unknown feature flag. The preview plans the other table and names the
// broken one with its key and the next step; the run cleans the other
// table and deletes nothing of the broken one. It used to refuse the whole
// store.
func TestCleanupIsolatesUnreadableTable(t *testing.T) {
	for _, c := range []struct {
		name  string
		mut   func([]byte) []byte
		cause error
		next  string
	}{
		{"truncated", func(b []byte) []byte { return b[:len(b)/2] }, lance.ErrCorruptManifest, "restore the manifest named"},
		{"garbage", func([]byte) []byte { return []byte("not a manifest at all") }, lance.ErrCorruptManifest, "restore the manifest named"},
		{"unknown feature", unknownFeature, lance.ErrUnknownFeature, "upgrade retain"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "db")
			copyFixtures(t, dir, "deletes", "v2-appends")
			p := filepath.Join(dir, filepath.FromSlash(appendsHead))
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, c.mut(b), 0o644); err != nil {
				t.Fatal(err)
			}
			before := filesUnder(t, dir, "v2-appends.lance")

			pv, err := Preview(bg, open(t, dir, true), Policy{KeepLast: 1})
			if err != nil {
				t.Fatalf("preview: %v", err)
			}
			for _, tp := range pv.Tables {
				switch tp.Table {
				case "v2-appends.lance":
					var te *TableRefusedError
					if !errors.As(tp.Err(), &te) || !errors.Is(tp.Err(), ErrTableRefused) || !errors.Is(tp.Err(), c.cause) ||
						tp.Totals.FilesToDelete != 0 || tp.Lance != nil {
						t.Fatalf("preview of the broken table: %+v (%v)", tp, tp.Err())
					}
					t.Logf("preview: %s", tp.Refused)
					for _, want := range []string{`"v2-appends.lance"`, appendsHead, "nothing of this table is deleted", c.next} {
						if !strings.Contains(tp.Refused, want) {
							t.Fatalf("the refusal does not say %q: %s", want, tp.Refused)
						}
					}
				case "deletes.lance":
					if tp.Err() != nil || tp.Totals.FilesToDelete == 0 {
						t.Fatalf("preview of deletes.lance: %+v", tp)
					}
				}
			}

			s := open(t, dir, false)
			rep, err := Run(bg, s, Policy{KeepLast: 1}, RunOptions{ConfirmWriteOutage: true})
			if err != nil {
				t.Fatalf("run: %v", err)
			}
			if rep.Failed != 1 {
				t.Fatalf("failed %d: %+v", rep.Failed, rep.Tables)
			}
			for _, tr := range rep.Tables {
				switch tr.Table {
				case "v2-appends.lance":
					if tr.State != TableRefused || !errors.Is(tr.Err(), ErrTableRefused) || !errors.Is(tr.Err(), c.cause) ||
						!strings.Contains(tr.Error, appendsHead) || tr.FilesDeleted != 0 {
						t.Fatalf("run, broken table: %+v (%v)", tr, tr.Err())
					}
				case "deletes.lance":
					if tr.Err() != nil || tr.State != TableDone || tr.FilesDeleted == 0 {
						t.Fatalf("run, deletes.lance was not cleaned: %+v", tr)
					}
				}
			}
			if exists(t, dir, delV4) {
				t.Fatal("deletes.lance was not cleaned")
			}
			for _, g := range rep.Boundaries {
				if g.Path == "v2-appends.lance" {
					t.Fatalf("a gc boundary was published for the broken table: %+v", g)
				}
			}
			if after := filesUnder(t, dir, "v2-appends.lance"); len(after) != len(before) {
				t.Fatalf("the broken table had %d files, now %d", len(before), len(after))
			}
		})
	}
}

// TestCleanupRefusesStoreWhenPinnedTableUnreadable: the same damage in a
// table a live checkpoint pins (deletes.lance's head v5, after the pinned
// v3) still refuses the whole store, fail closed: nothing of either table
// is deleted.
func TestCleanupRefusesStoreWhenPinnedTableUnreadable(t *testing.T) {
	dir, _ := setup(t)
	p := filepath.Join(dir, filepath.FromSlash(delV5))
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b[:len(b)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	// branch-tag.lance v1: neither tagged, a fork point nor pinned.
	btV1 := "branch-tag.lance/_versions/18446744073709551614.manifest"
	for _, run := range []bool{false, true} {
		var err error
		if run {
			_, err = Run(bg, open(t, dir, false), Policy{KeepLast: 1}, RunOptions{ConfirmWriteOutage: true})
		} else {
			_, err = Preview(bg, open(t, dir, true), Policy{KeepLast: 1})
		}
		var re *RefusedError
		if !errors.As(err, &re) || re.Table != "deletes.lance" || !errors.Is(err, lance.ErrCorruptManifest) || !errors.Is(err, ErrPreviewRefused) {
			t.Fatalf("run %v: want the store refused for deletes.lance, got %v", run, err)
		}
	}
	if !exists(t, dir, btV1) || !exists(t, dir, delV4) {
		t.Fatal("a table was cleaned despite the refusal")
	}
}
