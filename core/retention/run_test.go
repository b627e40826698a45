package retention

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/retain-dev/retain/adapters/localfs"
	"github.com/retain-dev/retain/core/checkpoint"
	"github.com/retain-dev/retain/core/checkpoint/registry"
	"github.com/retain-dev/retain/core/lance"
	"github.com/retain-dev/retain/core/retention/runs"
	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/claim"
	"github.com/retain-dev/retain/core/storage/storagetest"
	"github.com/retain-dev/retain/internal/lancetest"
)

func loc(dir string) storage.Location { return storage.Location{Scheme: "file", Path: dir} }

func exists(t *testing.T, dir, key string) bool {
	t.Helper()
	_, err := os.Stat(filepath.Join(dir, key))
	return err == nil
}

// pinTag returns the ogcp_ tag of deletes.lance's pin.
func pinTag(t *testing.T, s *storage.Store) string {
	t.Helper()
	ds, err := lance.Open(s, "deletes.lance")
	if err != nil {
		t.Fatal(err)
	}
	tags, err := ds.ListTags(bg)
	if err != nil {
		t.Fatal(err)
	}
	for _, tg := range tags {
		if strings.HasPrefix(tg.Name, "ogcp_") {
			return tg.Name
		}
	}
	t.Fatal("no ogcp_ tag on deletes.lance")
	return ""
}

// TestRunKeepsSparsePin: the checkpoint on deletes.lance v3 survives
// while v1, v2 and v4 next to it go; boundary rows are in the head;
// real Lance reads the pinned version by its tag.
func TestRunKeepsSparsePin(t *testing.T) {
	dir, _ := setup(t)
	s := open(t, dir, false)
	if _, err := Run(bg, s, Policy{KeepLast: 1}, RunOptions{}); storage.KindOf(err) != storage.ErrInvalidArgument || !strings.Contains(err.Error(), "write outage") {
		t.Fatalf("unconfirmed run: %v", err)
	}
	rep, err := Run(bg, s, Policy{KeepLast: 1}, RunOptions{ConfirmWriteOutage: true})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Failed != 0 || len(rep.Tables) != 2 || len(rep.Boundaries) != 2 || rep.Totals.FilesDeleted == 0 {
		t.Fatalf("report: %+v", rep)
	}
	v3 := "deletes.lance/_versions/18446744073709551612.manifest"
	for _, k := range []string{"deletes.lance/_versions/18446744073709551614.manifest", "deletes.lance/_versions/18446744073709551613.manifest", delV4} {
		if exists(t, dir, k) {
			t.Fatalf("%s survived", k)
		}
	}
	for _, k := range []string{v3, delV5} {
		if !exists(t, dir, k) {
			t.Fatalf("%s removed", k)
		}
	}
	// The boundary rows are in the registry head.
	rv, snap, err := registry.Open(s, registry.Options{}).Head(bg)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := snap.GCBoundaries()
	if err != nil || uint64(rv) != rep.BoundaryVersion || len(rows) != 2 {
		t.Fatalf("head v%d (report v%d): %+v %v", rv, rep.BoundaryVersion, rows, err)
	}
	digests := map[string]string{}
	for _, tr := range rep.Tables {
		digests[tr.Table] = tr.RootDigest
	}
	for _, g := range rows {
		if g.OperationID != rep.OperationID || g.RootDigest != digests[g.Path] || !strings.Contains(g.Cutoff, "keep-last 1") {
			t.Fatalf("boundary %+v, report %+v", g, rep)
		}
	}
	for _, g := range rows {
		if g.Path == "deletes.lance" && !strings.Contains(g.Cutoff, "newest removed: main v4") {
			t.Fatalf("cut-off: %q", g.Cutoff)
		}
	}
	// A second run has nothing left to remove and keeps the pin.
	rep2, err := Run(bg, s, Policy{KeepLast: 1}, RunOptions{ConfirmWriteOutage: true})
	if err != nil || rep2.Failed != 0 || !exists(t, dir, v3) {
		t.Fatalf("second run: %+v %v", rep2, err)
	}

	if testing.Short() {
		return
	}
	tag := pinTag(t, s)
	var res struct {
		Results []any `json:"results"`
	}
	lancetest.Node(t, "refs.cjs", map[string]any{"dir": dir, "table": "deletes", "naming": "v2",
		"ops": []map[string]any{{"op": "count", "ref": tag}, {"op": "versions"}}}, &res)
	t.Logf("real Lance after cleanup run: checkout of %s: %v; versions: %v", tag, res.Results[0], res.Results[1])
	c := res.Results[0].(map[string]any)
	if c["version"].(float64) != 3 || c["rows"].(float64) != 4 { // fixtures.json: deletes main v3 has 4 rows
		t.Fatalf("Lance reads %s as %v", tag, c)
	}
	var vs []float64
	for _, v := range res.Results[1].([]any) {
		vs = append(vs, v.(map[string]any)["version"].(float64))
	}
	if len(vs) != 2 || vs[0] != 3 || vs[1] != 5 {
		t.Fatalf("Lance lists versions %v, want [3 5]", vs)
	}
}

// failDeletes fails every delete under prefix with an error the driver
// could not classify.
func failDeletes(d storage.Driver, prefix string) storage.Driver {
	return &storagetest.Fail{Driver: d, Kind: storage.ErrUnknown, Deletes: storagetest.Prefix(prefix)}
}

// TestRunIsolatesTableFailure: deletes failing in one table fail that
// table only; the other is cleaned.
func TestRunIsolatesTableFailure(t *testing.T) {
	dir, _ := setup(t)
	drv, err := localfs.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	s, err := storage.NewStore(bg, "localfs", failDeletes(drv, "branch-tag.lance/"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rep, err := Run(bg, s.At(loc(dir)), Policy{KeepLast: 1}, RunOptions{ConfirmWriteOutage: true})
	var ie *IncompleteError
	if !errors.As(err, &ie) || !errors.Is(err, ErrRunIncomplete) || ie.Done != 1 || ie.Left != 1 {
		t.Fatalf("want an incomplete run, got %v", err)
	}
	if rep.Failed != 1 {
		t.Fatalf("failed %d: %+v", rep.Failed, rep.Tables)
	}
	for _, tr := range rep.Tables {
		switch tr.Table {
		case "branch-tag.lance":
			if !errors.Is(tr.Err(), storagetest.ErrInjected) || !strings.Contains(tr.Error, "injected") || tr.FilesDeleted != 0 {
				t.Fatalf("branch-tag: %+v", tr)
			}
		case "deletes.lance":
			if tr.Err() != nil || tr.FilesDeleted == 0 || tr.VersionsRemoved != 3 {
				t.Fatalf("deletes: %+v", tr)
			}
		}
	}
	if exists(t, dir, delV4) {
		t.Fatal("deletes.lance was not cleaned")
	}
	// The claim is released (the run is durably resumable) and a new run
	// is refused until this one is resumed.
	if p, _, err := claim.Read(bg, s); err == nil && p != nil {
		t.Fatalf("claim left held: %+v", p)
	}
	if _, err := Run(bg, s.At(loc(dir)), Policy{KeepLast: 1}, RunOptions{ConfirmWriteOutage: true}); !errors.Is(err, runs.ErrOpen) {
		t.Fatalf("new run while one is open: %v", err)
	}
	j, _, err := ReadJournal(bg, s, rep.OperationID)
	if err != nil || j.State != StateIncomplete {
		t.Fatalf("journal %+v, %v", j, err)
	}
	// Resume on the healthy store carries out the failed table's plan only.
	healthy := open(t, dir, false)
	rr, err := Resume(bg, healthy, ResumeOptions{})
	if err != nil {
		t.Fatalf("resume: %v", err)
	}
	if !rr.Resumed || rr.OperationID != rep.OperationID || rr.Totals.Tables != 1 || rr.Failed != 0 {
		t.Fatalf("resume report: %+v", rr)
	}
	for _, tr := range rr.Tables {
		if tr.Table == "branch-tag.lance" && (tr.State != TableDone || tr.FilesDeleted == 0) {
			t.Fatalf("branch-tag after resume: %+v", tr)
		}
		if tr.RootDigest != digestOf(rep, tr.Table) {
			t.Fatalf("%s: resumed under digest %s, the run published %s", tr.Table, tr.RootDigest, digestOf(rep, tr.Table))
		}
	}
	if j, _, err = ReadJournal(bg, s, rep.OperationID); err != nil || j.State != StateComplete || j.Resumes != 1 {
		t.Fatalf("journal after resume %+v, %v", j, err)
	}
	if ops, err := runs.Open(bg, s); err != nil || len(ops) != 0 {
		t.Fatalf("open runs after resume: %v %v", ops, err)
	}
	if _, err := Resume(bg, healthy, ResumeOptions{}); storage.KindOf(err) != storage.ErrNotFound {
		t.Fatalf("second resume: %v", err)
	}
}

func digestOf(rep *RunReport, table string) string {
	for _, tr := range rep.Tables {
		if tr.Table == table {
			return tr.RootDigest
		}
	}
	return ""
}

// TestRunRefusesUnresolvedRoot: a corrupt manifest is a root that cannot
// be read: the whole store is refused before the first deletion.
func TestRunRefusesUnresolvedRoot(t *testing.T) {
	dir, _ := setup(t)
	key := "branch-tag.lance/_versions/18446744073709551614.manifest"
	if err := os.WriteFile(filepath.Join(dir, key), []byte("not a manifest"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := open(t, dir, false)
	_, h0, _ := registry.Open(s, registry.Options{}).Head(bg)
	_, err := Run(bg, s, Policy{KeepLast: 1}, RunOptions{ConfirmWriteOutage: true})
	var re *RefusedError
	if !errors.As(err, &re) || re.Table != "branch-tag.lance" || !errors.Is(err, lance.ErrCorruptManifest) {
		t.Fatalf("got %v", err)
	}
	if !exists(t, dir, delV4) {
		t.Fatal("deletes.lance was cleaned despite the refusal")
	}
	if _, h1, _ := registry.Open(s, registry.Options{}).Head(bg); h1.Version != h0.Version {
		t.Fatal("a boundary was committed despite the refusal")
	}
	if p, _, err := claim.Read(bg, s); err == nil && p != nil {
		t.Fatalf("claim left held: %+v", p)
	}
}

// TestRunRefusedWhileClaimHeld and with pending sidecars.
func TestRunRefusals(t *testing.T) {
	dir, _ := setup(t)
	s := open(t, dir, false)
	h, err := claim.Acquire(bg, s, claim.Request{OperationID: "cleanup-other", Action: "cleanup", Scope: claim.ScopeFor(loc(dir))})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Run(bg, s, Policy{KeepLast: 1}, RunOptions{ConfirmWriteOutage: true}); !errors.Is(err, claim.ErrHeld) {
		t.Fatalf("held claim: %v", err)
	}
	if err := h.Release(bg); err != nil {
		t.Fatal(err)
	}
	sc := filepath.Join(dir, checkpoint.SidecarKey("create-dead"))
	if err := os.MkdirAll(filepath.Dir(sc), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(sc, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Run(bg, s, Policy{KeepLast: 1}, RunOptions{ConfirmWriteOutage: true}); !errors.Is(err, ErrSidecarsPending) || storage.KindOf(err) != storage.ErrPreconditionFailed {
		t.Fatalf("pending sidecar: %v", err)
	}
	if !exists(t, dir, delV4) {
		t.Fatal("cleaned despite the refusal")
	}
}

// TestRunCleansRegistry: the run removes old registry versions that no
// `_m_` tag pins and the window allows; the version a live checkpoint's
// registry pin names survives, and a checkpoint whose registry version is
// gone is reported invalid.
func TestRunCleansRegistry(t *testing.T) {
	dir, id := setup(t)
	s := open(t, dir, false)
	if _, err := checkpoint.Create(bg, s, "tmp", ""); err != nil { // registry v2
		t.Fatal(err)
	}
	if _, err := checkpoint.Delete(bg, s, "tmp"); err != nil { // v3, its pins reclaimed
		t.Fatal(err)
	}
	rep, err := Run(bg, s, Policy{KeepLast: 1}, RunOptions{ConfirmWriteOutage: true})
	if err != nil {
		t.Fatal(err)
	}
	if rep.BoundaryVersion != 4 || rep.Registry.State != TableDone || rep.Registry.Deleted != 2 ||
		len(rep.Registry.Remove) != 2 || rep.Registry.Remove[0] != 2 || rep.Registry.Remove[1] != 3 {
		t.Fatalf("registry cleanup: %+v (boundary v%d)", rep.Registry, rep.BoundaryVersion)
	}
	for v, want := range map[registry.Version]bool{1: true, 2: false, 3: false, 4: true} {
		if got := exists(t, dir, registry.VersionKey(v)); got != want {
			t.Fatalf("registry v%d present=%v, want %v", v, got, want)
		}
	}
	in, err := checkpoint.Show(bg, s, id, true)
	if err != nil || in.Health != "ok" || len(in.Deep.Missing) != 0 {
		t.Fatalf("nightly after cleanup: %+v, %v", in, err)
	}
	// A checkpoint whose registry pin's version is gone is invalid.
	if err := os.Remove(filepath.Join(dir, registry.VersionKey(1))); err != nil {
		t.Fatal(err)
	}
	in, err = checkpoint.Show(bg, s, id, false)
	if err != nil || in.Health != "invalid" || in.Pins[0].Kind != "registry" || in.Pins[0].Status != checkpoint.PinGone {
		t.Fatalf("nightly without its registry version: %+v, %v", in, err)
	}
}

// TestRunAudit: every table's removals are framed by a "removing" and a
// "removed" line with the exact counts; a run that removes nothing writes
// no line; without a "removing" line nothing is deleted.
func TestRunAudit(t *testing.T) {
	dir, _ := setup(t)
	s := open(t, dir, false)
	rep, err := Run(bg, s, Policy{KeepLast: 1}, RunOptions{ConfirmWriteOutage: true})
	if err != nil {
		t.Fatal(err)
	}
	lines, err := ReadAudit(bg, s, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	byTable := map[string][]AuditRecord{}
	for _, l := range lines {
		if l.OperationID != rep.OperationID || l.Actor == "" || l.Format != 1 {
			t.Fatalf("line: %+v", l)
		}
		byTable[l.Table] = append(byTable[l.Table], l)
	}
	for _, tr := range rep.Tables {
		ls := byTable[tr.Table]
		if len(ls) != 2 || ls[0].Event != AuditRemoving || ls[1].Event != AuditRemoved {
			t.Fatalf("%s: lines %+v", tr.Table, ls)
		}
		got := ls[1]
		if got.VersionsRemoved != tr.VersionsRemoved || got.FilesRemoved != tr.FilesDeleted || got.BytesRemoved != tr.BytesDeleted ||
			len(got.Versions) != tr.VersionsRemoved || got.FilesPlanned != tr.FilesDeleted || got.RootDigest != tr.RootDigest || got.Cutoff == "" {
			t.Fatalf("%s: removed line %+v, table %+v", tr.Table, got, tr)
		}
	}
	if del := byTable["deletes.lance"]; len(del) == 2 && strings.Join(del[1].Versions, ",") != "main v1,main v2,main v4" {
		t.Fatalf("deletes.lance versions: %v", del[1].Versions)
	}
	// Nothing left to remove: the second run is quiet.
	if _, err := Run(bg, s, Policy{KeepLast: 1}, RunOptions{ConfirmWriteOutage: true}); err != nil {
		t.Fatal(err)
	}
	again, err := ReadAudit(bg, s, time.Time{})
	if err != nil || len(again) != len(lines) {
		t.Fatalf("a run that removed nothing wrote %d lines (%v)", len(again)-len(lines), err)
	}
}

// TestRunNoAuditNoDeletion: the audit gate. When the "removing" line
// cannot be written, the table is not touched.
func TestRunNoAuditNoDeletion(t *testing.T) {
	dir, _ := setup(t)
	drv, err := localfs.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	s, err := storage.NewStore(bg, "localfs", &storagetest.Fail{Driver: drv, Kind: storage.ErrPermissionDenied, Puts: storagetest.Prefix(AuditPrefix)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	before := tableFiles(t, dir)
	_, err = Run(bg, s.At(loc(dir)), Policy{KeepLast: 1}, RunOptions{ConfirmWriteOutage: true})
	if !errors.Is(err, ErrRunIncomplete) || !strings.Contains(err.Error(), "audit") {
		t.Fatalf("run without an audit log: %v", err)
	}
	if after := tableFiles(t, dir); strings.Join(after, "\n") != strings.Join(before, "\n") {
		t.Fatal("deleted without an audit line")
	}
}

// TestReleaseReportsLostClaim: a claim already gone at the first release
// was lost during the run, and release says so; gone after an attempt
// whose outcome was unknown, it is our own delete.
func TestReleaseReportsLostClaim(t *testing.T) {
	dir, _ := setup(t)
	s := open(t, dir, false)
	h, err := claim.Acquire(bg, s, claim.Request{Action: "cleanup", Scope: claim.ScopeFor(loc(dir))})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, claim.Key)); err != nil {
		t.Fatal(err)
	}
	if err := release(bg, h); !errors.Is(err, claim.ErrLost) {
		t.Fatalf("release of a claim lost before: %v", err)
	}
}
