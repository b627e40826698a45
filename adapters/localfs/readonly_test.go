//go:build linux

package localfs

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/storagetest"
)

// snapshot lists every entry under root, hidden ones and the reserved
// directory included, with its size and modification time.
func snapshot(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		st, err := os.Lstat(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		out = append(out, fmt.Sprintf("%s %v %d %s", rel, st.Mode(), st.Size(), st.ModTime()))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestOpenReadOnlyWritesNothing(t *testing.T) {
	root := t.TempDir()
	// A dataset written by someone else: no .retain-localfs here.
	if err := os.MkdirAll(filepath.Join(root, "ds.lance", "_versions"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "ds.lance", "_versions", "1.manifest"), []byte("m1"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, ".hidden"), []byte("h"), 0o644); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, root)

	for _, open := range []struct {
		name string
		fn   func() (storage.Driver, error)
	}{
		{"OpenReadOnly", func() (storage.Driver, error) { return OpenReadOnly(root) }},
		{"Adapter.Open", func() (storage.Driver, error) {
			return Adapter.Open(bg, storage.Location{Scheme: "file", Path: root, ReadOnly: true})
		}},
	} {
		t.Run(open.name, func(t *testing.T) {
			d, err := open.fn()
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			if _, err := os.Lstat(filepath.Join(root, reservedDir)); !os.IsNotExist(err) {
				t.Fatalf("%s exists after a read-only open (%v)", reservedDir, err)
			}
			caps, err := d.Capabilities(bg)
			if err != nil {
				t.Fatal(err)
			}
			if !caps.ReadOnly || len(caps.Gates) != 0 {
				t.Errorf("caps: read-only %v, gates %v", caps.ReadOnly, caps.Gates)
			}
			for f, c := range map[string]storage.Capability{"create": caps.CreateIfAbsent, "replace": caps.ReplaceIfVersion, "delete": caps.DeleteIfVersion} {
				if c.Level != storage.LevelNone || c.Reason != "opened read-only" {
					t.Errorf("%s: %+v, want none (opened read-only)", f, c)
				}
			}

			// Reads work.
			r, err := d.Get(bg, "ds.lance/_versions/1.manifest")
			if err != nil {
				t.Fatal(err)
			}
			r.Close()
			if _, err := d.Stat(bg, "ds.lance/_versions/1.manifest"); err != nil {
				t.Fatal(err)
			}
			page, err := d.List(bg, storage.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var keys []string
			for _, o := range page.Objects {
				keys = append(keys, o.Key)
			}
			if want := []string{".hidden", "ds.lance/_versions/1.manifest"}; !slices.Equal(keys, want) {
				t.Errorf("list: %v, want %v", keys, want)
			}

			// Writes are refused.
			ro := func(what string, err error) {
				t.Helper()
				storagetest.WantKind(t, what, err, storage.ErrPermissionDenied)
				if !strings.Contains(err.Error(), "store opened read-only") {
					t.Errorf("%s: %v", what, err)
				}
			}
			for _, m := range []storage.PutMode{storage.PutOverwrite, storage.PutCreateIfAbsent} {
				_, err := d.Put(bg, "new/k", strings.NewReader("x"), storage.PutOptions{Mode: m})
				ro("put", err)
			}
			_, err = d.Put(bg, "ds.lance/_versions/1.manifest", strings.NewReader("x"), storage.PutOptions{Mode: storage.PutReplaceIfVersion, IfVersion: "v"})
			ro("put replace", err)
			ro("delete", d.Delete(bg, "ds.lance/_versions/1.manifest", storage.DeleteOptions{}))
			_, err = d.DeleteMany(bg, []string{"ds.lance/_versions/1.manifest"})
			ro("delete-many", err)
			_, err = d.AcquireGate(bg, MetadataGate)
			ro("acquire-gate", err)

			// Through the portable Store too.
			s, err := storage.NewStore(bg, "localfs", d)
			if err != nil {
				t.Fatal(err)
			}
			_, err = s.PutBytes(bg, "k", []byte("x"), storage.PutOptions{})
			ro("store put", err)
		})
	}
	if after := snapshot(t, root); !slices.Equal(before, after) {
		t.Errorf("the directory changed:\nbefore %q\nafter  %q", before, after)
	}
}

// A read-only open of a store a writable open set up still hides the
// reserved directory and temp files from List.
func TestOpenReadOnlyHidesReserved(t *testing.T) {
	d, root := newT(t)
	storagetest.MustPut(t, d, "a/b", "x")
	if err := os.WriteFile(filepath.Join(root, "a", tmpPrefix+"left"), []byte("t"), 0o644); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, root)
	ro := openT(t, root, openOptions{readOnly: true})
	if keys := listAll(t, ro, ""); !slices.Equal(keys, []string{"a/b"}) {
		t.Errorf("list: %v", keys)
	}
	if got, _ := mustRead(t, ro, "a/b"); got != "x" {
		t.Errorf("read: %q", got)
	}
	ro.Close()
	if after := snapshot(t, root); !slices.Equal(before, after) {
		t.Errorf("the directory changed:\nbefore %q\nafter  %q", before, after)
	}
}
