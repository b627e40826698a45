package lance

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The deletes fixture (testdata/README.md): main v1..v5; v4 adds the data
// file below, which v5 (the head) still reads; v3 and v5 read delData0.
const (
	delRoot  = "deletes.lance"
	delData0 = "deletes.lance/data/001011100111000101000010859ea247ca9cc209d2d1bd54e5.lance"
	delData1 = "deletes.lance/data/110100010010010001001010c4024349739e778a3a210cc0ec.lance"
	delDel5  = "deletes.lance/_deletions/1-4-11192117515610302444.arrow"
)

// flipInManifest changes one character of name where manifest n of the
// deletes fixture names it, as a torn write or a bad restore would: the
// manifest still parses, the name is one Lance cannot open.
func flipInManifest(t *testing.T, dir string, n uint64, name string) string {
	t.Helper()
	p := filepath.Join(dir, delRoot, versionsDir, ManifestName(n, NamingV2))
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	// The Manifest section is the last of the file (the inline
	// transaction before it may name the file too).
	i := bytes.LastIndex(b, []byte(name))
	if i < 0 {
		t.Fatalf("manifest v%d does not name %q", n, name)
	}
	flipped := []byte(name)
	flipped[0] ^= 1 // '1' <-> '0': still hex, still a plausible file name
	copy(b[i:], flipped)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return string(flipped)
}

// wantKeptBroken checks a refusal for a broken kept version: typed, naming
// the dataset, the version and the file, and saying what to do.
func wantKeptBroken(t *testing.T, err error, version VersionID, key string) *KeptFileError {
	t.Helper()
	var ce *CleanupError
	var kf *KeptFileError
	if !errors.Is(err, ErrKeptVersionBroken) || !errors.Is(err, ErrCleanupRefused) || !errors.As(err, &ce) || !errors.As(err, &kf) {
		t.Fatalf("want a broken kept version refused, got %v", err)
	}
	if ce.Dataset != delRoot || ce.Key != key || kf.Key != key || kf.Version != version {
		t.Fatalf("refusal names %q %q %s, want %q %q %s", ce.Dataset, ce.Key, kf.Version, delRoot, key, version)
	}
	msg := err.Error()
	for _, want := range []string{delRoot, version.String(), key, "nothing of this dataset was deleted", "restore the file"} {
		if !strings.Contains(msg, want) {
			t.Fatalf("the refusal does not say %q: %s", want, msg)
		}
	}
	return kf
}

// TestCleanupRefusesBrokenHead: the head manifest names its second data
// file with one character changed. Without the check the real file is
// referenced only by the removed v4 and would be deleted with it; with it
// the dataset is refused and nothing is deleted. Real Lance confirms the
// head is unreadable and the pinned v3 still reads in full.
func TestCleanupRefusesBrokenHead(t *testing.T) {
	dir := copyFixture(t, "deletes")
	flipped := "deletes.lance/data/" + flipInManifest(t, dir, 5, filepath.Base(delData1))
	before := dirFiles(t, dir)
	s := guardedStore(t, dir, &guardDriver{okBatches: -1, forbidDeletes: true})
	d := mustOpen(t, s, delRoot)
	plan, err := d.PlanCleanup(bg, Policy{KeepLast: 1, ExtraRoots: []Root{{Version: 3, Reason: "checkpoint nightly"}}})
	if plan != nil {
		for _, f := range plan.Files {
			if f.Key == delData1 {
				t.Errorf("the plan deletes %s, the file the head needs", f.Key)
			}
		}
	}
	kf := wantKeptBroken(t, err, VersionID{Version: 5}, flipped)
	if kf.Listed != -1 || kf.Folder || kf.Recorded != 635 || len(kf.Reasons) == 0 || kf.Reasons[0] != "latest" {
		t.Fatalf("broken file: %+v", kf)
	}
	if after := dirFiles(t, dir); len(gone(before, after)) != 0 {
		t.Fatalf("deleted %v", gone(before, after))
	}
	if testing.Short() {
		return
	}
	var vr verifyResult
	res := oracleRun(t, map[string]any{"kind": "verify", "dir": dir, "table": "deletes", "versions": map[string][]uint64{"main": {3, 5}}})
	if err := json.Unmarshal(res[0], &vr); err != nil {
		t.Fatal(err)
	}
	if r, ok := vr.Rows["main"]["3"]; !ok || r.Scanned != r.Rows || r.Rows == 0 {
		t.Fatalf("Lance reads the pinned v3 as %+v (%v)", r, vr.Errors)
	}
	t.Logf("real Lance on the broken head: %v", vr.Errors)
	if len(vr.Errors) != 1 || !strings.HasPrefix(vr.Errors[0], "main v5") {
		t.Fatalf("Lance must fail to read only the broken head: %v", vr.Errors)
	}
}

// TestCleanupRefusesBrokenPin: a data file the pinned v3 reads is replaced
// by a folder (as `checkpoint show --deep` reports it missing). The
// listing holds objects under its key, never the file: the dataset is
// refused naming the pinned version.
func TestCleanupRefusesBrokenPin(t *testing.T) {
	dir := copyFixture(t, "deletes")
	p := filepath.Join(dir, filepath.FromSlash(delData0))
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(p, "x"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := guardedStore(t, dir, &guardDriver{okBatches: -1, forbidDeletes: true})
	d := mustOpen(t, s, delRoot)
	_, err := d.PlanCleanup(bg, Policy{KeepLast: 1, ExtraRoots: []Root{{Version: 3, Reason: "checkpoint nightly"}}})
	kf := wantKeptBroken(t, err, VersionID{Version: 3}, delData0)
	if !kf.Folder || kf.Referencing != 2 || strings.Join(kf.Reasons, ",") != "extra root: checkpoint nightly" || !strings.Contains(err.Error(), "a folder stands there") {
		t.Fatalf("broken file: %+v: %v", kf, err)
	}
}

// TestCleanupRefusesKeptFileWrongSizeOrGone: a kept data file of another
// size than its manifest records, and a kept deletion file (no size
// recorded: existence is required) that is gone.
func TestCleanupRefusesKeptFileWrongSizeOrGone(t *testing.T) {
	t.Run("size", func(t *testing.T) {
		dir := copyFixture(t, "deletes")
		if err := os.Truncate(filepath.Join(dir, filepath.FromSlash(delData1)), 600); err != nil {
			t.Fatal(err)
		}
		d := mustOpen(t, guardedStore(t, dir, &guardDriver{okBatches: -1, forbidDeletes: true}), delRoot)
		_, err := d.PlanCleanup(bg, Policy{KeepLast: 1})
		if kf := wantKeptBroken(t, err, VersionID{Version: 5}, delData1); kf.Recorded != 635 || kf.Listed != 600 {
			t.Fatalf("broken file: %+v", kf)
		}
	})
	t.Run("gone", func(t *testing.T) {
		dir := copyFixture(t, "deletes")
		if err := os.Remove(filepath.Join(dir, filepath.FromSlash(delDel5))); err != nil {
			t.Fatal(err)
		}
		d := mustOpen(t, guardedStore(t, dir, &guardDriver{okBatches: -1, forbidDeletes: true}), delRoot)
		_, err := d.PlanCleanup(bg, Policy{KeepLast: 1})
		if kf := wantKeptBroken(t, err, VersionID{Version: 5}, delDel5); kf.Recorded != -1 || kf.Listed != -1 {
			t.Fatalf("broken file: %+v", kf)
		}
	})
	t.Run("a removed version's file may be gone", func(t *testing.T) {
		// Only kept versions are checked: v2's deletion file going does
		// not stop the cleanup that removes v2.
		dir := copyFixture(t, "deletes")
		if err := os.Remove(filepath.Join(dir, "deletes.lance/_deletions/0-1-6818587448706696137.arrow")); err != nil {
			t.Fatal(err)
		}
		d := mustOpen(t, guardedStore(t, dir, &guardDriver{okBatches: -1}), delRoot)
		if _, err := d.PlanCleanup(bg, Policy{KeepLast: 1}); err != nil {
			t.Fatal(err)
		}
	})
}
