package retention

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/retain-dev/retain/core/storage"
)

// Gate: a symlinked dataset or partition on localfs is never followed or
// deleted; the cleanup pass refuses and says so. The gate is localfs's
// List, which refuses a listing that meets a symlink instead of leaving it
// out (adapters/localfs/list.go). Without it, table discovery skips a
// symlinked dataset and cleans the rest of the store, and a table whose
// data/ is a symlink is planned as if it had no data files.

// snapshotFiles records every regular file and symlink under dir (symlinks
// not followed) with a digest of its content or its link target.
func snapshotFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			out[rel] = "-> " + target
		case d.Type().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(b)
			out[rel] = hex.EncodeToString(sum[:])
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// wantNothingDeleted fails if any file or symlink of before is gone from
// dir or changed. Files the run added and removed itself (its claim) do not
// matter; none of before's may go.
func wantNothingDeleted(t *testing.T, what, dir string, before map[string]string) {
	t.Helper()
	after := snapshotFiles(t, dir)
	var gone []string
	for k, v := range before {
		if after[k] != v {
			gone = append(gone, k)
		}
	}
	if len(gone) > 0 {
		t.Errorf("%s: %d files deleted or changed despite the refusal, e.g. %v", what, len(gone), gone[:min(len(gone), 5)])
	}
}

// wantSymlinkRefusal: err is the refusal of the symlink at link (a key
// relative to the store root), with its kind and the next step.
func wantSymlinkRefusal(t *testing.T, what string, err error, link string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: not refused", what)
	}
	if !errors.Is(err, storage.ErrPermissionDenied) {
		t.Fatalf("%s: kind %v, want permission denied: %v", what, storage.KindOf(err), err)
	}
	msg := err.Error()
	t.Logf("%s refused: %v", what, msg)
	for _, want := range []string{`"` + link + `"`, "symbolic link", "replace the link with the real folder, or point retain at the real location"} {
		if !strings.Contains(msg, want) {
			t.Fatalf("%s: the error does not say %q: %v", what, want, msg)
		}
	}
}

// linkedLanceFixture copies the fixture name (a Lance table with removable
// versions) to <outside>/real.lance and returns that path.
func linkedLanceFixture(t *testing.T, name string) (outside, real string) {
	t.Helper()
	outside = t.TempDir()
	real = filepath.Join(outside, "real.lance")
	if err := os.CopyFS(real, os.DirFS(filepath.Join(fixtures, name+".lance"))); err != nil {
		t.Fatal(err)
	}
	return outside, real
}

// TestGateSymlinkedDataset: a store whose linked.lance is a symlink to a
// real Lance table outside the store, next to normal tables with versions
// to remove. Run and Preview refuse, naming linked.lance, with permission
// denied; nothing in the store and nothing in the link's target is deleted.
func TestGateSymlinkedDataset(t *testing.T) {
	dir, _ := setup(t)
	outside, real := linkedLanceFixture(t, "update") // two versions: keep-last 1 would remove v1
	if err := os.Symlink(real, filepath.Join(dir, "linked.lance")); err != nil {
		t.Fatal(err)
	}
	store, target := snapshotFiles(t, dir), snapshotFiles(t, outside)

	_, err := Preview(bg, open(t, dir, true), Policy{KeepLast: 1})
	wantSymlinkRefusal(t, "preview", err, "linked.lance")

	_, err = Run(bg, open(t, dir, false), Policy{KeepLast: 1}, RunOptions{ConfirmWriteOutage: true})
	wantSymlinkRefusal(t, "run", err, "linked.lance")

	wantNothingDeleted(t, "the store", dir, store)
	wantNothingDeleted(t, "the link's target", outside, target)
	if !exists(t, dir, delV4) {
		t.Fatal("deletes.lance was cleaned despite the refusal")
	}
	if fi, err := os.Lstat(filepath.Join(dir, "linked.lance")); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Fatalf("the link itself was changed: %v %v", fi, err)
	}
}

// TestGateSymlinkedPartition: inside deletes.lance, a normal table with
// versions to remove, data/ is a symlink to a folder outside the store
// holding the same files. Run and Preview refuse, naming
// deletes.lance/data; nothing inside the store or outside is deleted.
func TestGateSymlinkedPartition(t *testing.T) {
	dir, _ := setup(t)
	outside := t.TempDir()
	data := filepath.Join(outside, "data")
	if err := os.Rename(filepath.Join(dir, "deletes.lance", "data"), data); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(data, filepath.Join(dir, "deletes.lance", "data")); err != nil {
		t.Fatal(err)
	}
	store, target := snapshotFiles(t, dir), snapshotFiles(t, outside)
	if len(target) == 0 {
		t.Fatal("no data files moved outside")
	}

	_, err := Preview(bg, open(t, dir, true), Policy{KeepLast: 1})
	wantSymlinkRefusal(t, "preview", err, "deletes.lance/data")

	_, err = Run(bg, open(t, dir, false), Policy{KeepLast: 1}, RunOptions{ConfirmWriteOutage: true})
	wantSymlinkRefusal(t, "run", err, "deletes.lance/data")

	wantNothingDeleted(t, "the store", dir, store)
	wantNothingDeleted(t, "the partition's target", outside, target)
	if !exists(t, dir, delV4) {
		t.Fatal("deletes.lance's manifests were cleaned despite the refusal")
	}
}
