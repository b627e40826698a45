package retention

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/retain-dev/retain/adapters/localfs"
	"github.com/retain-dev/retain/core"
	"github.com/retain-dev/retain/core/checkpoint"
	"github.com/retain-dev/retain/core/checkpoint/protocol"
	"github.com/retain-dev/retain/core/claim"
	"github.com/retain-dev/retain/core/lance"
	"github.com/retain-dev/retain/internal/lancetest"
)

func loc(dir string) core.Location { return core.Location{Scheme: "file", Path: dir} }

func exists(t *testing.T, dir, key string) bool {
	t.Helper()
	_, err := os.Stat(filepath.Join(dir, key))
	return err == nil
}

// pinTag returns the ogcp_ tag of deletes.lance's pin.
func pinTag(t *testing.T, s *core.Store) string {
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
	if _, err := Run(bg, s, loc(dir), Policy{KeepLast: 1}, RunOptions{}); core.KindOf(err) != core.ErrInvalidArgument || !strings.Contains(err.Error(), "write outage") {
		t.Fatalf("unconfirmed run: %v", err)
	}
	rep, err := Run(bg, s, loc(dir), Policy{KeepLast: 1}, RunOptions{ConfirmWriteOutage: true})
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
	rv, snap, err := checkpoint.Open(s, checkpoint.Options{}).Head(bg)
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
	rep2, err := Run(bg, s, loc(dir), Policy{KeepLast: 1}, RunOptions{ConfirmWriteOutage: true})
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

// failDeletes fails every delete under prefix.
type failDeletes struct {
	core.Driver
	prefix string
}

var errInjected = errors.New("injected delete failure")

func (d failDeletes) Delete(ctx context.Context, key string, opts core.DeleteOptions) error {
	if strings.HasPrefix(key, d.prefix) {
		return errInjected
	}
	return d.Driver.Delete(ctx, key, opts)
}

func (d failDeletes) DeleteMany(ctx context.Context, keys []string) ([]core.DeleteResult, error) {
	for _, k := range keys {
		if strings.HasPrefix(k, d.prefix) {
			return nil, errInjected
		}
	}
	return d.Driver.DeleteMany(ctx, keys)
}

// TestRunIsolatesTableFailure: deletes failing in one table fail that
// table only; the other is cleaned.
func TestRunIsolatesTableFailure(t *testing.T) {
	dir, _ := setup(t)
	drv, err := localfs.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	s, err := core.NewStore(bg, "localfs", failDeletes{Driver: drv, prefix: "branch-tag.lance/"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rep, err := Run(bg, s, loc(dir), Policy{KeepLast: 1}, RunOptions{ConfirmWriteOutage: true})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Failed != 1 {
		t.Fatalf("failed %d: %+v", rep.Failed, rep.Tables)
	}
	for _, tr := range rep.Tables {
		switch tr.Table {
		case "branch-tag.lance":
			if !errors.Is(tr.Err(), errInjected) || !strings.Contains(tr.Error, "injected") || tr.FilesDeleted != 0 {
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
	_, h0, _ := checkpoint.Open(s, checkpoint.Options{}).Head(bg)
	_, err := Run(bg, s, loc(dir), Policy{KeepLast: 1}, RunOptions{ConfirmWriteOutage: true})
	var re *RefusedError
	if !errors.As(err, &re) || re.Table != "branch-tag.lance" || !errors.Is(err, lance.ErrCorruptManifest) {
		t.Fatalf("got %v", err)
	}
	if !exists(t, dir, delV4) {
		t.Fatal("deletes.lance was cleaned despite the refusal")
	}
	if _, h1, _ := checkpoint.Open(s, checkpoint.Options{}).Head(bg); h1.Version != h0.Version {
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
	if _, err := Run(bg, s, loc(dir), Policy{KeepLast: 1}, RunOptions{ConfirmWriteOutage: true}); !errors.Is(err, claim.ErrHeld) {
		t.Fatalf("held claim: %v", err)
	}
	if err := h.Release(bg); err != nil {
		t.Fatal(err)
	}
	sc := filepath.Join(dir, protocol.SidecarKey("create-dead"))
	if err := os.MkdirAll(filepath.Dir(sc), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(sc, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Run(bg, s, loc(dir), Policy{KeepLast: 1}, RunOptions{ConfirmWriteOutage: true}); !errors.Is(err, ErrSidecarsPending) || core.KindOf(err) != core.ErrPreconditionFailed {
		t.Fatalf("pending sidecar: %v", err)
	}
	if !exists(t, dir, delV4) {
		t.Fatal("cleaned despite the refusal")
	}
}
