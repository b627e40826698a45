package retention

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/retain-dev/retain/core/checkpoint"
	"github.com/retain-dev/retain/core/checkpoint/registry"
)

// TestRecreatedTableWronglyBehindBoundary: a table that no checkpoint
// ever pinned is cleaned (Run catalogues it and publishes a boundary "main
// v4"), then dropped and recreated at the same path with versions 1..2.
// The incarnation rule only bumps the incarnation when a row of the current
// incarnation exists, so the new table keeps incarnation 1 and its head v2
// is refused as "behind the gc boundary" of the old table: no checkpoint
// of the recreated table can be taken until it grows past v4.
func TestRecreatedTableNotBehindOldBoundary(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	copyFixtures(t, dir, "deletes")
	s := open(t, dir, false)
	rep, err := Run(bg, s, Policy{KeepLast: 1}, RunOptions{ConfirmWriteOutage: true})
	if err != nil || len(rep.Boundaries) != 1 {
		t.Fatalf("run: %+v %v", rep, err)
	}
	t.Logf("boundary: %+v", rep.Boundaries[0].NewestRemoved)
	// Drop the table and create another one at the same path (2 versions).
	if err := os.RemoveAll(filepath.Join(dir, "deletes.lance")); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(filepath.Join(dir, "deletes.lance"), os.DirFS(filepath.Join(fixtures, "update.lance"))); err != nil {
		t.Fatal(err)
	}
	_, err = checkpoint.Create(bg, s, "after-recreate", "")
	if errors.Is(err, registry.ErrBehindGCBoundary) {
		t.Fatalf("a checkpoint of the recreated table is refused by the old table's boundary: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
}
