package localfs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/retain-dev/retain/core/storage"
)

// A batch delete syncs each directory it deletes from once, after all its
// unlinks, not once per key: a cleanup's batch of 1,000 data files cost
// 1,000 directory fsyncs. Results stay one per key, in order: a missing
// key is deleted, a symlink and a bad key are refused, and everything else
// is gone from disk.
func TestDeleteManySyncsEachDirectoryOnce(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	d, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var keys []string
	for _, dir := range []string{"t.lance/data", "t.lance/_versions", "t.lance/_transactions"} {
		for i := 0; i < 40; i++ {
			k := fmt.Sprintf("%s/f%02d", dir, i)
			if err := os.MkdirAll(filepath.Join(root, dir), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(root, k), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
			keys = append(keys, k)
		}
	}
	if err := os.Symlink("f00", filepath.Join(root, "t.lance/data/link")); err != nil {
		t.Fatal(err)
	}
	keys = append(keys, "t.lance/data/missing", "t.lance/data/link", "t.lance/../escape", "nodir/x")
	before := dirSyncs.Load()
	res, err := d.DeleteMany(ctx, keys)
	if err != nil {
		t.Fatal(err)
	}
	if n := dirSyncs.Load() - before; n != 3 {
		t.Errorf("deleting 120 files in 3 directories synced %d times, want 3", n)
	}
	if len(res) != len(keys) {
		t.Fatalf("%d results for %d keys", len(res), len(keys))
	}
	for i, r := range res {
		if r.Key != keys[i] {
			t.Fatalf("result %d is for %q, want %q", i, r.Key, keys[i])
		}
		switch keys[i] {
		case "t.lance/data/link":
			if r.Err == nil {
				t.Errorf("the symlink was deleted")
			}
		case "t.lance/../escape":
			if !errors.Is(r.Err, storage.ErrInvalidArgument) {
				t.Errorf("a bad key: %v, want invalid argument", r.Err)
			}
		default:
			if r.Err != nil {
				t.Errorf("%s: %v", keys[i], r.Err)
			}
			if _, err := os.Lstat(filepath.Join(root, keys[i])); !os.IsNotExist(err) {
				t.Errorf("%s is still on disk", keys[i])
			}
		}
	}
}
