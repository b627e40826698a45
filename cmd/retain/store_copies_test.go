package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/retain-dev/retain/core/checkpoint"
	"github.com/retain-dev/retain/internal/lancetest"
)

// lanceVersion is one version as real Lance reads it: rows scanned and the
// sum of their ids (build.cjs).
type lanceVersion struct {
	Version uint64 `json:"version"`
	Scanned int    `json:"scanned"`
	IDSum   int    `json:"idSum"`
}

type lanceView struct {
	Versions map[string][]lanceVersion `json:"versions"`
}

// lanceRun runs build.cjs on table t of db (a directory or an s3:// URI).
func lanceRun(t *testing.T, db, table, naming string, storage map[string]string, steps ...map[string]any) lanceView {
	t.Helper()
	arg := map[string]any{"dir": db, "table": table, "naming": naming, "steps": steps}
	if storage != nil {
		arg["storageOptions"] = storage
	}
	var out lanceView
	lancetest.Node(t, "build.cjs", arg, &out)
	return out
}

// livedStore is a LanceDB directory with table a (V2 manifest names) and
// b (V1 names), checkpoint "nightly" pinning v3 of each (5 rows, ids 0..4)
// and two versions after it.
func livedStore(t *testing.T) string {
	t.Helper()
	db := filepath.Join(t.TempDir(), "db")
	if err := os.MkdirAll(db, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tb := range []struct{ name, naming string }{{"a", "v2"}, {"b", "v1"}} {
		lanceRun(t, db, tb.name, tb.naming, nil, map[string]any{"op": "create", "rows": 3},
			map[string]any{"op": "add", "rows": 1}, map[string]any{"op": "add", "rows": 1})
	}
	if _, errs, code := retain(t, "checkpoint", "create", "nightly", db); code != 0 {
		t.Fatalf("create: %d %s", code, errs)
	}
	for _, tb := range []string{"a", "b"} {
		lanceRun(t, db, tb, "", nil, map[string]any{"op": "open", "nextId": 5},
			map[string]any{"op": "add", "rows": 1}, map[string]any{"op": "add", "rows": 1})
	}
	return db
}

// wantHealthyAndCleanable: every view of the store agrees it is healthy,
// and cleanup runs, keeping the pinned v3 of each table.
func wantHealthyAndCleanable(t *testing.T, what, store string, storage map[string]string) {
	t.Helper()
	out, errs, code := retain(t, "checkpoint", "list", store, "--json")
	var l struct {
		Checkpoints []checkpoint.Info `json:"checkpoints"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &l) != nil || len(l.Checkpoints) != 1 || l.Checkpoints[0].Health != "ok" {
		t.Fatalf("%s: checkpoint list: %d %s %s", what, code, out, errs)
	}
	out, errs, code = retain(t, "checkpoint", "show", "nightly", store, "--deep", "--json")
	var in checkpoint.Info
	if code != 0 || json.Unmarshal([]byte(out), &in) != nil || in.Health != "ok" || in.Deep == nil ||
		len(in.Deep.Missing) != 0 || len(in.Deep.Errors) != 0 {
		t.Fatalf("%s: show --deep: %d %s %s", what, code, out, errs)
	}
	out, errs, code = retain(t, "reconcile", store)
	if code != 0 || !strings.Contains(out, " 0 conflicts") {
		t.Fatalf("%s: reconcile: %d %s %s", what, code, out, errs)
	}
	out, errs, code = retain(t, "status", store, "--json")
	var st struct {
		Pins checkpoint.Health `json:"pin_health"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil || st.Pins.Pins != 3 || st.Pins.OK != 3 {
		t.Fatalf("%s: status: %d %s %s", what, code, out, errs)
	}
	if out, errs, code = retain(t, "cleanup", "preview", store, "--keep-last", "1"); code != 0 {
		t.Fatalf("%s: cleanup preview: %d %s %s", what, code, out, errs)
	}
	if out, errs, code = retain(t, "cleanup", "run", store, "--confirm-write-outage", "--keep-last", "1", "--json"); code != 0 {
		t.Fatalf("%s: cleanup run: %d %s %s", what, code, out, errs)
	}
	var rep struct {
		Totals struct {
			VersionsRemoved int `json:"versions_removed"`
		} `json:"totals"`
	}
	if json.Unmarshal([]byte(out), &rep) != nil || rep.Totals.VersionsRemoved != 6 {
		t.Fatalf("%s: cleanup run removed %d versions, want 6 (v1, v2, v4 of each table): %s", what, rep.Totals.VersionsRemoved, out)
	}
	// Real Lance judges: the pinned v3 and the head read whole; appends work.
	for _, tb := range []string{"a", "b"} {
		v := lanceRun(t, strings.SplitN(store, "?", 2)[0], tb, "", storage, map[string]any{"op": "open", "nextId": 7},
			map[string]any{"op": "add", "rows": 1})
		got := map[uint64]lanceVersion{}
		for _, lv := range v.Versions["main"] {
			got[lv.Version] = lv
		}
		if p := got[3]; p.Scanned != 5 || p.IDSum != 10 {
			t.Errorf("%s: Lance reads pinned v3 of %s as %+v, want 5 rows summing to 10 (all: %+v)", what, tb, p, v.Versions["main"])
		}
		if _, ok := got[2]; ok {
			t.Errorf("%s: v2 of %s survived the cleanup: %+v", what, tb, v.Versions["main"])
		}
		if h := got[6]; h.Scanned != 8 || h.IDSum != 28 {
			t.Errorf("%s: Lance's append after cleanup on %s: %+v", what, tb, v.Versions["main"])
		}
	}
}

// Item 1: a store that lived — copied with cp -a, chmod'ed, a pinned
// manifest hard-linked and unlinked, rsync'ed — stays cleanable, and every
// command says the same about it. Before pins named the commit's content,
// cleanup refused every such store ("holds the same commit but the object
// was rewritten") while list, show and reconcile said ok.
func TestCopiedStoreStaysCleanable(t *testing.T) {
	t.Parallel() // a process-bound test: it waits on retain, Lance and emulators, not the CPU
	db := livedStore(t)
	cp := filepath.Join(t.TempDir(), "copy")
	if out, err := exec.Command("cp", "-a", db, cp).CombinedOutput(); err != nil {
		t.Fatalf("cp -a: %v %s", err, out)
	}
	if out, err := exec.Command("chmod", "-R", "g-w,o-w", cp).CombinedOutput(); err != nil {
		t.Fatalf("chmod -R: %v %s", err, out)
	}
	pinned := filepath.Join(cp, "a.lance", "_versions", fmt.Sprintf("%020d.manifest", ^uint64(0)-3))
	if err := os.Link(pinned, pinned+".bak"); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(pinned + ".bak"); err != nil {
		t.Fatal(err)
	}
	wantHealthyAndCleanable(t, "cp -a, chmod -R, relink", cp, nil)

	if _, err := exec.LookPath("rsync"); err != nil {
		t.Log("rsync is not installed: the original is cleaned in place instead")
		wantHealthyAndCleanable(t, "the original", db, nil)
		return
	}
	rs := filepath.Join(t.TempDir(), "rsynced")
	if out, err := exec.Command("rsync", "-a", db+"/", rs+"/").CombinedOutput(); err != nil {
		t.Fatalf("rsync -a: %v %s", err, out)
	}
	wantHealthyAndCleanable(t, "rsync -a", rs, nil)
}

// Item 2: LanceDB's own migrateManifestPathsV2 renames table b's V1
// manifests after the checkpoint; the checkpoint stays valid everywhere.
// Before, show --deep said the manifest was missing and cleanup refused.
func TestLanceManifestMigrationKeepsCheckpoints(t *testing.T) {
	t.Parallel() // a process-bound test: it waits on retain, Lance and emulators, not the CPU
	db := livedStore(t)
	lanceRun(t, db, "b", "", nil, map[string]any{"op": "open"}, map[string]any{"op": "migrateManifestPathsV2"})
	if _, err := os.Stat(filepath.Join(db, "b.lance", "_versions", "3.manifest")); !os.IsNotExist(err) {
		t.Fatalf("Lance's migration kept the V1 name: %v", err)
	}
	wantHealthyAndCleanable(t, "after migrateManifestPathsV2", db, nil)
}

// An older store: checkpoint "nightly" was taken by the previous release,
// whose pins carry lance-physref/1 tokens (a manifest key and a localfs
// version token; see testdata/physref1-store/README.md). Copied here (new
// inodes) and with table b's manifests renamed by Lance's migration, it is
// healthy and cleanable as it is, with no migration: its tags are named
// from the tokens its rows hold. A new checkpoint beside it gets format-2
// tokens.
func TestOlderStoreFormat1PinsStayValid(t *testing.T) {
	t.Parallel() // a process-bound test: it waits on retain, Lance and emulators, not the CPU
	db := filepath.Join(t.TempDir(), "db")
	if err := os.CopyFS(db, os.DirFS(filepath.Join("testdata", "physref1-store", "db"))); err != nil {
		t.Fatal(err)
	}
	lanceRun(t, db, "b", "", nil, map[string]any{"op": "open"}, map[string]any{"op": "migrateManifestPathsV2"})
	out, _, _ := retain(t, "checkpoint", "show", "nightly", db, "--json")
	if strings.Count(out, "lance-physref/1 ") != 2 {
		t.Fatalf("the fixture's rows are not format 1: %s", out)
	}
	wantHealthyAndCleanable(t, "an older store, copied and migrated", db, nil)

	if _, errs, code := retain(t, "checkpoint", "create", "next", db); code != 0 {
		t.Fatalf("create beside format-1 pins: %d %s", code, errs)
	}
	out, errs, code := retain(t, "checkpoint", "show", "next", db, "--deep", "--json")
	var in checkpoint.Info
	if code != 0 || json.Unmarshal([]byte(out), &in) != nil || in.Health != "ok" || strings.Count(out, "lance-physref/2 ") != 2 {
		t.Fatalf("new checkpoint: %d %s %s", code, out, errs)
	}
	out, _, code = retain(t, "checkpoint", "list", db)
	if code != 0 || strings.Count(out, " ok") < 2 {
		t.Fatalf("list: %d %s", code, out)
	}
}

// ABA is still refused, and has one way out. Real Lance drops table a
// and recreates it at the same path with as many versions: the checkpoint's
// v3 of a is another commit. Every view says so the same way and names
// `retain checkpoint drop-lost`; pasted, it gives up that one pin (audited,
// recorded in the checkpoint) and the store is clean again while the
// checkpoint keeps b. Before, reconcile reported the conflict with no way
// out and `checkpoint delete` refused because of it.
func TestRecreatedTableRefusedUntilDropLost(t *testing.T) {
	t.Parallel() // a process-bound test: it waits on retain, Lance and emulators, not the CPU
	db := livedStore(t)
	lanceRun(t, db, "a", "", nil, map[string]any{"op": "open"}, map[string]any{"op": "drop"},
		map[string]any{"op": "create", "rows": 3}, map[string]any{"op": "add", "rows": 1}, map[string]any{"op": "add", "rows": 1},
		map[string]any{"op": "add", "rows": 1}, map[string]any{"op": "add", "rows": 1})

	_, errs, code := retain(t, "cleanup", "preview", db, "--keep-last", "1")
	if code == 0 || !strings.Contains(errs, "retain checkpoint drop-lost ") || !strings.Contains(errs, "recreated") {
		t.Fatalf("ABA: cleanup preview: %d %s", code, errs)
	}
	out, _, code := retain(t, "checkpoint", "list", db)
	if !strings.Contains(out, "invalid") {
		t.Fatalf("list after ABA: %d %s", code, out)
	}
	out, _, _ = retain(t, "status", db)
	if !strings.Contains(out, "1 invalid checkpoints") {
		t.Fatalf("status after ABA: %s", out)
	}
	out, errs, code = retain(t, "reconcile", db)
	if code == 0 || !strings.Contains(out, "incarnation-changed a.lance") {
		t.Fatalf("reconcile after ABA: %d %s %s", code, out, errs)
	}
	cmd := heldCommand(t, out, "retain checkpoint drop-lost ", db)
	if _, code := runShell(t, strings.Replace(cmd, "--reason WHY", "--reason 'the ingest job recreated a'", 1)); code != 0 {
		t.Fatalf("the drop-lost command reconcile names, pasted: %s: exit %d", cmd, code)
	}
	out, errs, code = retain(t, "checkpoint", "show", "nightly", db, "--json")
	var in checkpoint.Info
	if code != 0 || json.Unmarshal([]byte(out), &in) != nil || in.Health != "ok" || len(in.Pins) != 2 ||
		len(in.Lost) != 1 || in.Lost[0].Path != "a.lance" || in.Lost[0].Reason != "the ingest job recreated a" {
		t.Fatalf("show after drop-lost: %d %s %s", code, out, errs)
	}
	if _, errs, code := retain(t, "checkpoint", "drop-lost", "nightly", "b.lance", db, "--reason", "x"); code == 0 || !strings.Contains(errs, "intact") {
		t.Fatalf("drop-lost of an intact pin: %d %s", code, errs)
	}
	out, _, _ = retain(t, "audit", db)
	if !strings.Contains(out, "pin_dropping") || !strings.Contains(out, "pin_dropped") {
		t.Fatalf("audit: %s", out)
	}
	if out, errs, code = retain(t, "cleanup", "run", db, "--confirm-write-outage", "--keep-last", "1"); code != 0 {
		t.Fatalf("cleanup after drop-lost: %d %s %s", code, out, errs)
	}
	v := lanceRun(t, db, "b", "", nil, map[string]any{"op": "open"})
	if len(v.Versions["main"]) != 2 || v.Versions["main"][0].Version != 3 || v.Versions["main"][0].Scanned != 5 {
		t.Fatalf("Lance reads b after cleanup: %+v", v.Versions["main"])
	}
}

// A pinned manifest lost (a restore from an older backup) while its tag
// survives: drop-lost gives the pin up and deletes the tag; a tag left
// behind (the delete came after the commit and can fail or be cut short)
// is reclaimed by reconcile as given up, not reported as a pin the
// registry cannot explain.
func TestDropLostMissingManifestAndLeftoverTag(t *testing.T) {
	t.Parallel() // a process-bound test: it waits on retain, Lance and emulators, not the CPU
	db := livedStore(t)
	v3 := filepath.Join(db, "a.lance", "_versions", fmt.Sprintf("%020d.manifest", ^uint64(0)-3))
	if err := os.Remove(v3); err != nil {
		t.Fatal(err)
	}
	out, errs, code := retain(t, "reconcile", db)
	if code == 0 || !strings.Contains(out, "pin-lost a.lance") {
		t.Fatalf("reconcile with the pinned manifest gone: %d %s %s", code, out, errs)
	}
	tags, err := filepath.Glob(filepath.Join(db, "a.lance", "_refs", "tags", "ogcp_*.json"))
	if err != nil || len(tags) != 1 {
		t.Fatalf("pin tags of a: %v %v", tags, err)
	}
	tagBytes, err := os.ReadFile(tags[0])
	if err != nil {
		t.Fatal(err)
	}
	out, errs, code = retain(t, "checkpoint", "drop-lost", "nightly", "a.lance", db, "--reason", "restored from an older backup", "--json")
	if code != 0 || !strings.Contains(out, `"tag_deleted"`) {
		t.Fatalf("drop-lost: %d %s %s", code, out, errs)
	}
	if err := os.MkdirAll(filepath.Dir(tags[0]), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tags[0], tagBytes, 0o644); err != nil { // as if the delete never happened
		t.Fatal(err)
	}
	out, errs, code = retain(t, "reconcile", db)
	if code != 0 || !strings.Contains(out, "1 reclaimed") || !strings.Contains(out, " 0 conflicts") {
		t.Fatalf("reconcile with the given-up pin's tag left: %d %s %s", code, out, errs)
	}
	if _, errs, code := retain(t, "cleanup", "run", db, "--confirm-write-outage", "--keep-last", "1"); code != 0 {
		t.Fatalf("cleanup after drop-lost: %d %s", code, errs)
	}
}
