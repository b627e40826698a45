package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// folderState records every entry under dir, hidden ones and the localfs
// adapter's folder included: path, mode, size, modification time and a
// hash of the bytes. Two equal states mean nothing was added, removed or
// rewritten.
func folderState(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		st, err := os.Lstat(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		line := fmt.Sprintf("%s %v %d %d", filepath.ToSlash(rel), st.Mode(), st.Size(), st.ModTime().UnixNano())
		if st.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			h := sha256.Sum256(b)
			line += " " + hex.EncodeToString(h[:])
		}
		out = append(out, line)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func wantUnchanged(t *testing.T, what string, before, after []string) {
	t.Helper()
	if slices.Equal(before, after) {
		return
	}
	var added, removed []string
	for _, l := range after {
		if !slices.Contains(before, l) {
			added = append(added, l)
		}
	}
	for _, l := range before {
		if !slices.Contains(after, l) {
			removed = append(removed, l)
		}
	}
	t.Errorf("%s changed the folder:\nnew or changed: %q\ngone or changed: %q", what, added, removed)
}

// The read-only commands open the store read-only through the plugin: they
// leave the folder byte-identical, without even the adapter's own folder.
func TestReadOnlyCommandsWriteNothing(t *testing.T) {
	dir := copyFixture(t, "branch-tag.lance")
	root := filepath.Dir(dir) // the database folder holding the table
	before := folderState(t, root)
	for _, args := range [][]string{
		{"inspect", dir},
		{"inspect", "--json", "file://" + dir},
		{"inspect", "--json", dir, "--version", "1"},
		{"claim", "status", root},
		{"checkpoint", "list", filepath.Dir(dir)},
		{"cleanup", "preview", filepath.Dir(dir), "--keep-last", "1"},
		{"cleanup", "preview", filepath.Dir(dir), "--older-than", "1h", "--json"},
	} {
		_, errs, code := retain(t, args...)
		if code != 0 {
			t.Errorf("%v: exit %d: %s", args, code, errs)
		}
		wantUnchanged(t, strings.Join(args, " "), before, folderState(t, root))
	}
	// show of a checkpoint that does not exist fails, still writing nothing.
	if _, _, code := retain(t, "checkpoint", "show", "nope", root); code == 0 {
		t.Error("checkpoint show of a missing checkpoint succeeded")
	}
	wantUnchanged(t, "checkpoint show", before, folderState(t, root))
	for _, d := range []string{dir, root} {
		if _, err := os.Lstat(filepath.Join(d, ".retain-localfs")); err == nil {
			t.Errorf("a read-only command created %s/.retain-localfs", d)
		}
	}
}

// claim status on a fresh, empty folder creates nothing in it.
func TestClaimStatusFreshDirCreatesNothing(t *testing.T) {
	dir := t.TempDir()
	out, errs, code := retain(t, "claim", "status", dir, "--json")
	if code != 0 || !strings.Contains(out, `"held": false`) {
		t.Fatalf("claim status: %d %s %s", code, out, errs)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 0 {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("claim status created %q", names)
	}
}

// A writing command still sets the store up as before.
func TestWritingCommandStillOpensWritable(t *testing.T) {
	dir := filepath.Dir(copyFixture(t, "branch-tag.lance")) // a database of one table
	if _, errs, code := retain(t, "checkpoint", "create", "c1", dir); code != 0 {
		t.Fatalf("checkpoint create: %d %s", code, errs)
	}
	if _, err := os.Lstat(filepath.Join(dir, ".retain-localfs")); err != nil {
		t.Errorf("checkpoint create did not set up the adapter's folder: %v", err)
	}
	before := folderState(t, dir)
	if out, errs, code := retain(t, "checkpoint", "show", "c1", dir); code != 0 || !strings.Contains(out, `"c1"`) {
		t.Errorf("checkpoint show: %d %s %s", code, out, errs)
	}
	if out, errs, code := retain(t, "checkpoint", "list", dir); code != 0 || !strings.Contains(out, "c1") {
		t.Errorf("checkpoint list: %d %s %s", code, out, errs)
	}
	if out, errs, code := retain(t, "cleanup", "preview", dir, "--keep-last", "1"); code != 0 || !strings.Contains(out, "c1") {
		t.Errorf("cleanup preview: %d %s %s", code, out, errs)
	}
	wantUnchanged(t, "checkpoint show/list, cleanup preview", before, folderState(t, dir))
}
