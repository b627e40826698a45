package retention

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/retain-dev/retain/adapters/localfs"
	"github.com/retain-dev/retain/core/checkpoint"
	"github.com/retain-dev/retain/core/checkpoint/registry"
	"github.com/retain-dev/retain/core/lance"
	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/memstore"
	"github.com/retain-dev/retain/core/storage/storagetest"
)

// The depth-flat gate of cleanup planning (issue 7, section 6): with 3
// checkpoints over 10 tables, root planning (ResolveRoots) costs the same
// requests at table depth 100 and 2,000 (table discovery included: one
// request per top-level entry + 1), and Preview costs a
// constant plus what the versions it removes cost (reading each removed
// manifest once, the listing pages their objects fill).
//
// Building 2,000 versions x 10 tables with real Lance would take hours, so
// the tables are synthetic: manifests written by costManifest in Lance's
// format (as lance's synthetic manifest tests do), each version an
// overwrite referencing a data file shared by every version, its own data
// file and its own transaction file. They are written as Lance leaves
// them (plain files under a localfs root, or memstore objects); the
// checkpoints are made by checkpoint.Create.

const (
	costTables   = 10
	costKeepLast = 2
	// costPage is localfs's (and memstore's) listing page.
	costPage = 1000
)

var costT0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func costTable(i int) string { return fmt.Sprintf("t%02d.lance", i) }

// costTxn is version n's transaction file name: "{read_version}-{uuid}.txn".
func costTxn(table int, n uint64) string {
	return fmt.Sprintf("%d-%08x-0000-4000-8000-%012x.txn", n-1, table, n)
}

func costData(n uint64) string { return fmt.Sprintf("v%06d.lance", n) }

// costManifest is version n of a table: two fragments (the shared
// base.lance and the version's own data file), the commit time and the
// transaction file, in Lance's manifest layout (the Manifest section, then
// the 16-byte footer).
func costManifest(table int, n uint64) []byte {
	frag := func(id uint64, path string) []byte {
		df := protowire.AppendTag(nil, 1, protowire.BytesType)
		df = protowire.AppendString(df, path)
		df = protowire.AppendTag(df, 6, protowire.VarintType)
		df = protowire.AppendVarint(df, 16)
		fr := protowire.AppendTag(nil, 1, protowire.VarintType)
		fr = protowire.AppendVarint(fr, id)
		fr = protowire.AppendTag(fr, 2, protowire.BytesType)
		fr = protowire.AppendBytes(fr, df)
		fr = protowire.AppendTag(fr, 4, protowire.VarintType)
		return protowire.AppendVarint(fr, 1)
	}
	ts := costT0.Add(time.Duration(n) * time.Second)
	tsMsg := protowire.AppendTag(nil, 1, protowire.VarintType)
	tsMsg = protowire.AppendVarint(tsMsg, uint64(ts.Unix()))
	tsMsg = protowire.AppendTag(tsMsg, 2, protowire.VarintType)
	tsMsg = protowire.AppendVarint(tsMsg, uint64(table)) // distinct commit times across tables
	var m []byte
	m = protowire.AppendTag(m, 2, protowire.BytesType)
	m = protowire.AppendBytes(m, frag(0, "base.lance"))
	m = protowire.AppendTag(m, 2, protowire.BytesType)
	m = protowire.AppendBytes(m, frag(n, costData(n)))
	m = protowire.AppendTag(m, 3, protowire.VarintType)
	m = protowire.AppendVarint(m, n)
	m = protowire.AppendTag(m, 7, protowire.BytesType)
	m = protowire.AppendBytes(m, tsMsg)
	m = protowire.AppendTag(m, 12, protowire.BytesType)
	m = protowire.AppendString(m, costTxn(table, n))
	out := binary.LittleEndian.AppendUint32(nil, uint32(len(m)))
	out = append(out, m...)
	out = binary.LittleEndian.AppendUint64(out, 0) // the Manifest section's offset
	out = binary.LittleEndian.AppendUint16(out, 0) // format 0.2
	out = binary.LittleEndian.AppendUint16(out, 2)
	return append(out, "LANC"...)
}

// costBackend is where a cost store lives: plain files under a localfs
// root, or a memstore.
type costBackend interface {
	// put writes an object as Lance would, outside retain.
	put(t testing.TB, key string, body []byte)
	// writable opens the store for checkpoint create.
	writable(t testing.TB) (*storage.Store, storage.Location)
	// reader opens the store as the preview does.
	reader(t testing.TB) storage.Driver
	name() string
}

type localBackend struct {
	root string
	dirs map[string]bool
}

func (l *localBackend) name() string { return "localfs" }

func (l *localBackend) put(t testing.TB, key string, body []byte) {
	p := filepath.Join(l.root, filepath.FromSlash(key))
	if dir := filepath.Dir(p); !l.dirs[dir] {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		l.dirs[dir] = true
	}
	if err := os.WriteFile(p, body, 0o644); err != nil {
		t.Fatal(err)
	}
}

func (l *localBackend) writable(t testing.TB) (*storage.Store, storage.Location) {
	drv, err := localfs.Open(l.root)
	if err != nil {
		t.Fatal(err)
	}
	s, err := storage.NewStore(bg, "localfs", drv)
	if err != nil {
		t.Fatal(err)
	}
	loc := storage.Location{Scheme: "file", Path: l.root}
	return s.At(loc), loc
}

// reader opens read-only, as `retain cleanup preview` does.
func (l *localBackend) reader(t testing.TB) storage.Driver {
	drv, err := localfs.OpenReadOnly(l.root)
	if err != nil {
		t.Fatal(err)
	}
	return drv
}

type memBackend struct{ drv *memstore.Driver }

func (m *memBackend) name() string { return "memstore" }

func (m *memBackend) put(t testing.TB, key string, body []byte) {
	if _, err := m.drv.Put(bg, key, bytes.NewReader(body), storage.PutOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (m *memBackend) writable(t testing.TB) (*storage.Store, storage.Location) {
	s, err := storage.NewStore(bg, "memstore", m.drv)
	if err != nil {
		t.Fatal(err)
	}
	loc := storage.Location{Scheme: "mem", Bucket: "cost"}
	return s.At(loc), loc
}

func (m *memBackend) reader(t testing.TB) storage.Driver { return m.drv } // Close is a no-op

// writeCostVersions writes versions from..to of every table (and
// data/base.lance with version 1): for each version its data file, its
// transaction file and then, as Lance commits, its manifest.
func writeCostVersions(t testing.TB, be costBackend, from, to uint64) {
	t.Helper()
	body := make([]byte, 16)
	for i := range costTables {
		tbl := costTable(i)
		if from == 1 {
			be.put(t, tbl+"/data/base.lance", body)
		}
		for n := from; n <= to; n++ {
			be.put(t, tbl+"/data/"+costData(n), body)
			be.put(t, tbl+"/_transactions/"+costTxn(i, n), body)
			be.put(t, tbl+"/_versions/"+lance.ManifestName(n, lance.NamingV2), costManifest(i, n))
		}
	}
}

// costPins are the versions the three checkpoints pin at depth: each is
// created when every table's head is that version.
func costPins(depth int) []uint64 {
	d := uint64(depth)
	return []uint64{d / 4, d / 2, 3 * d / 4}
}

// buildCostStore fills be with costTables tables of depth versions,
// checkpoints "cp-1" … "cp-3" pinning costPins(depth).
func buildCostStore(t testing.TB, be costBackend, depth int) {
	t.Helper()
	s, _ := be.writable(t)
	defer s.Close()
	next := uint64(1)
	for i, v := range costPins(depth) {
		writeCostVersions(t, be, next, v)
		next = v + 1
		c, err := checkpoint.Create(bg, s, fmt.Sprintf("cp-%d", i+1), "")
		if err != nil {
			t.Fatal(err)
		}
		if len(c.Tables) != costTables {
			t.Fatalf("checkpoint %s pins %d tables, want %d", c.Name, len(c.Tables), costTables)
		}
	}
	writeCostVersions(t, be, next, uint64(depth))
}

func newLocalBackend(t testing.TB) *localBackend {
	return &localBackend{root: t.TempDir(), dirs: map[string]bool{}}
}

// request is one request that reached the driver.
type request struct {
	op, key, after string // after: a listing's StartAfter
}

// recorder records every request a Hook sees; it is safe for the
// concurrent manifest reads of lance.PlanCleanup.
type recorder struct {
	mu   sync.Mutex
	reqs []request
}

func (r *recorder) note(c storagetest.Call) error {
	q := request{op: string(c.Op), key: c.Key}
	switch c.Op {
	case storagetest.OpDeleteMany:
		q.key = strings.Join(c.Keys, ",")
	case storagetest.OpList:
		q.after = c.List.StartAfter
	case storagetest.OpGate:
		q.op = "gate"
	case storagetest.OpRelease:
		q.op, q.key = "gate", ""
	}
	r.mu.Lock()
	r.reqs = append(r.reqs, q)
	r.mu.Unlock()
	return nil
}

// measured is one measured call: its requests, counted by storagetest.Counting
// and recorded one by one.
type measured struct {
	counts storagetest.Counts
	reqs   []request
}

// measure runs fn on a fresh store opened on be as the preview opens it,
// counted and recorded.
func measure(t testing.TB, be costBackend, fn func(*storage.Store) error) measured {
	t.Helper()
	rec := &recorder{}
	cnt := storagetest.NewCounting(storagetest.NewHook(be.reader(t)).Before(rec.note))
	s, err := storage.NewStore(bg, be.name(), cnt)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := fn(s); err != nil {
		t.Fatal(err)
	}
	m := measured{counts: cnt.Counts(), reqs: rec.reqs}
	if int64(len(m.reqs)) != m.counts.Total() {
		t.Fatalf("recorded %d requests, counted %d", len(m.reqs), m.counts.Total())
	}
	return m
}

// Request classes. Everything but classDiscovery, classRemovedManifest and
// classMorePages is expected to be the same at every depth.
const (
	classDiscovery       = "discovery: list of the store root"
	classRegistry        = "registry head (list + get)"
	classPinCheck        = "pin check: get of a pinned manifest (checkPin)"
	classWholePage       = "one listing page of a whole table"
	classRefs            = "refs: list of _refs/, get of each tag"
	classFirstPage       = "first listing page of a table folder (_versions/ and 4 managed folders)"
	classKeptManifest    = "get of a kept version's manifest (PlanCleanup)"
	classRemovedManifest = "get of a removed version's manifest (PlanCleanup)"
	classTransaction     = "get of a transaction file (PlanCleanup from transactions)"
	classMorePages       = "further listing pages of a table folder"
	classOther           = "other"
)

// classify sorts m's requests into classes. removed holds the manifest
// keys of removed versions; pins the manifest keys checkpoints pin (their
// first read is checkPin's, the second PlanCleanup's).
func classify(m measured, removed map[string]bool, pins map[string]bool) map[string]int64 {
	out := map[string]int64{}
	pinReads := map[string]int{}
	for _, r := range m.reqs {
		tableKey := strings.HasSuffix(strings.SplitN(r.key, "/", 2)[0], checkpoint.TableSuffix)
		switch {
		case r.op == "list" && r.key == "":
			out[classDiscovery]++
		case strings.HasPrefix(r.key, registry.RegistryPath+"/") && (r.op == "list" || r.op == "get"):
			out[classRegistry]++
		case r.op == "get" && pins[r.key] && pinReads[r.key] == 0:
			pinReads[r.key]++
			out[classPinCheck]++
		case r.op == "list" && tableKey && strings.Count(r.key, "/") == 1 && strings.HasSuffix(r.key, "/"):
			out[classWholePage]++
		case tableKey && strings.Contains(r.key, "/_refs/"):
			out[classRefs]++
		case r.op == "list" && tableKey && r.after == "":
			out[classFirstPage]++
		case r.op == "list" && tableKey && strings.HasPrefix(r.after, r.key):
			out[classMorePages]++
		case r.op == "get" && removed[r.key]:
			out[classRemovedManifest]++
		case r.op == "get" && tableKey && strings.Contains(r.key, "/_transactions/"):
			out[classTransaction]++
		case r.op == "get" && tableKey && strings.Contains(r.key, "/_versions/"):
			out[classKeptManifest]++
		default:
			out[classOther]++
		}
	}
	return out
}

// topLevelEntries counts the entries of the store root a listing shows
// (files and folders holding at least one file; localfs hides its own
// reserved folder).
func topLevelEntries(t testing.TB, be costBackend) int {
	t.Helper()
	s, err := storage.NewStore(bg, be.name(), be.reader(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	objs, err := s.List(bg, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, o := range objs {
		first, _, _ := strings.Cut(o.Key, "/")
		seen[first] = true
	}
	return len(seen)
}

// depthCost is what one depth measured.
type depthCost struct {
	backend        string
	depth          int
	entries        int // top-level entries of the store
	roots, preview measured
	rootsBy        map[string]int64
	previewBy      map[string]int64
	removed        int // versions the preview removes
}

var costPolicy = Policy{KeepLast: costKeepLast, Now: func() time.Time { return costT0.Add(time.Hour) }}

// measureDepth builds a store of depth on be, measures ResolveRoots and
// Preview on it and checks the plan is what the store says.
func measureDepth(t *testing.T, be costBackend, depth int) depthCost {
	t.Helper()
	buildCostStore(t, be, depth)
	dc := depthCost{backend: be.name(), depth: depth, entries: topLevelEntries(t, be)}
	var rs *RootSet
	dc.roots = measure(t, be, func(s *storage.Store) (err error) {
		rs, err = ResolveRoots(bg, s)
		return err
	})
	var plan *StorePlan
	dc.preview = measure(t, be, func(s *storage.Store) (err error) {
		plan, err = Preview(bg, s, costPolicy)
		return err
	})

	// The plan is what the tables and checkpoints say: every table keeps
	// its 3 pinned versions and the last 2, and removes the rest with
	// their data and transaction files; base.lance stays.
	pins := costPins(depth)
	if len(rs.Checkpoints) != 3 || len(rs.Tables) != costTables || len(plan.Checkpoints) != 3 || len(plan.Tables) != costTables {
		t.Fatalf("%s depth %d: %d/%d checkpoints, %d/%d tables", dc.backend, depth, len(rs.Checkpoints), len(plan.Checkpoints), len(rs.Tables), len(plan.Tables))
	}
	removed, pinKeys := map[string]bool{}, map[string]bool{}
	for i, tp := range plan.Tables {
		if tp.Table != costTable(i) || rs.Tables[i].Table != tp.Table || len(rs.Tables[i].Extra) != len(pins) {
			t.Fatalf("%s depth %d: table %d is %s / %s with %d extra roots", dc.backend, depth, i, tp.Table, rs.Tables[i].Table, len(rs.Tables[i].Extra))
		}
		keep := map[uint64]bool{uint64(depth): true, uint64(depth) - 1: true}
		for _, p := range pins {
			keep[p] = true
			pinKeys[tp.Table+"/_versions/"+lance.ManifestName(p, lance.NamingV2)] = true
		}
		if len(tp.Versions) != depth {
			t.Fatalf("%s depth %d: %s has %d versions in the plan", dc.backend, depth, tp.Table, len(tp.Versions))
		}
		for _, v := range tp.Lance.Versions {
			if v.Keep != keep[v.Version] {
				t.Errorf("%s depth %d: %s v%d keep=%v (%v)", dc.backend, depth, tp.Table, v.Version, v.Keep, v.Reasons)
			}
			if !v.Keep {
				removed[v.Key] = true
				dc.removed++
			}
		}
		want := 3 * (depth - len(keep)) // manifest, data and transaction file of each removed version
		if tp.Totals.FilesToDelete != want || tp.Lance.Totals.ReferencedFiles != 3*len(keep)+1 {
			t.Errorf("%s depth %d: %s deletes %d files (want %d), keeps %d referenced (want %d)", dc.backend, depth, tp.Table,
				tp.Totals.FilesToDelete, want, tp.Lance.Totals.ReferencedFiles, 3*len(keep)+1)
		}
	}
	dc.rootsBy = classify(dc.roots, removed, pinKeys)
	dc.previewBy = classify(dc.preview, removed, pinKeys)
	for _, m := range []measured{dc.roots, dc.preview} {
		if c := m.counts; c.Put+c.Delete+c.DeleteMany+c.Gate+c.Stat != 0 {
			t.Errorf("%s depth %d: planning did more than get and list: %+v", dc.backend, depth, c)
		}
	}
	t.Logf("%s depth %d: %d top-level entries; root planning %d requests (%d list, %d get), preview %d requests (%d list, %d get), %d versions removed",
		dc.backend, depth, dc.entries, dc.roots.counts.Total(), dc.roots.counts.List, dc.roots.counts.Get,
		dc.preview.counts.Total(), dc.preview.counts.List, dc.preview.counts.Get, dc.removed)
	for _, what := range []struct {
		name string
		by   map[string]int64
	}{{"roots  ", dc.rootsBy}, {"preview", dc.previewBy}} {
		var keys []string
		for k := range what.by {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			t.Logf("  %s %s: %-76s %6d", dc.backend, what.name, k, what.by[k])
		}
	}
	return dc
}

// TestPlanningCostDepthFlat is the gate: root planning (table discovery
// included: one request per top-level entry + 1) and the part of Preview
// not owed to removed versions cost exactly the same requests at depth 100
// and 2,000.
// The gate runs on memstore (63,000 objects written in memory); localfs
// at depth 100 must classify every request the same, so the gate holds for
// it too (BenchmarkPreviewDepth measures localfs at both depths).
func TestPlanningCostDepthFlat(t *testing.T) {
	lo := measureDepth(t, &memBackend{drv: memstore.New()}, 100)
	hi := measureDepth(t, &memBackend{drv: memstore.New()}, 2000)
	got := []depthCost{lo, hi}

	// (a) Root planning: everything but table discovery is the same
	// requests at both depths, and none of it reads a removed manifest or
	// pages through a table folder.
	for _, dc := range got {
		for _, k := range []string{classRemovedManifest, classMorePages, classFirstPage, classWholePage, classKeptManifest, classRefs, classOther} {
			if dc.rootsBy[k] != 0 {
				t.Errorf("depth %d: root planning made %d requests of class %q", dc.depth, dc.rootsBy[k], k)
			}
		}
		if want := int64(costTables * len(costPins(dc.depth))); dc.rootsBy[classPinCheck] != want {
			t.Errorf("depth %d: root planning read %d pinned manifests, want %d (one per pin)", dc.depth, dc.rootsBy[classPinCheck], want)
		}
		// Discovery lists the root's level: one request for up to 1,000
		// top-level entries (memstore lists with a delimiter), however deep
		// the tables are.
		if d := dc.rootsBy[classDiscovery]; d != 1 {
			t.Errorf("depth %d: discovery made %d listing requests, want 1 (one level of %d entries)", dc.depth, d, dc.entries)
		}
	}
	if lo.entries != hi.entries {
		t.Fatalf("the stores have %d and %d top-level entries", lo.entries, hi.entries)
	}
	if lo.roots.counts != hi.roots.counts {
		t.Errorf("root planning: %+v requests at depth %d, %+v at depth %d: not depth-flat", lo.roots.counts, lo.depth, hi.roots.counts, hi.depth)
	}
	rootsFlat := func(dc depthCost) int64 { return dc.roots.counts.Total() - dc.rootsBy[classDiscovery] }
	if rootsFlat(lo) != rootsFlat(hi) {
		t.Errorf("root planning without discovery: %d requests at depth %d, %d at depth %d: not depth-flat", rootsFlat(lo), lo.depth, rootsFlat(hi), hi.depth)
	}

	// (b) Preview = constant + what removed versions cost, + discovery.
	pages := func(n int) int64 { return int64(max(1, (n+costPage-1)/costPage)) }
	for _, dc := range got {
		for _, k := range []string{classDiscovery, classRegistry, classPinCheck} {
			if dc.previewBy[k] != dc.rootsBy[k] {
				t.Errorf("depth %d: Preview made %d requests of class %q, ResolveRoots %d", dc.depth, dc.previewBy[k], k, dc.rootsBy[k])
			}
		}
		// Every removed manifest is read exactly once: the store's
		// transaction files are not ones Lance writes (16 zero bytes), so
		// planning from transactions falls back to each manifest, after
		// one read of the transaction — the worst case, at most two
		// requests per removed version (real transactions spare the
		// manifest: lance's TestReplayPlanner).
		if dc.previewBy[classRemovedManifest] != int64(dc.removed) {
			t.Errorf("depth %d: %d reads of removed manifests for %d removed versions", dc.depth, dc.previewBy[classRemovedManifest], dc.removed)
		}
		if n := dc.previewBy[classTransaction]; n > int64(dc.removed+costTables*len(costPins(dc.depth))) {
			t.Errorf("depth %d: %d reads of transaction files for %d removed versions", dc.depth, n, dc.removed)
		}
		// Further pages: a folder of n objects takes ceil(n/page) pages.
		// Per table _versions/ (depth manifests) is listed once (the
		// versions; the sweep for .tmp files reuses that listing),
		// _transactions/ holds depth files, data/ depth+1; the 5 kept
		// versions' objects sit on the first pages.
		want := int64(costTables) * (2*(pages(dc.depth)-1) + (pages(dc.depth+1) - 1))
		if dc.previewBy[classMorePages] != want {
			t.Errorf("depth %d: %d further listing pages, want %d", dc.depth, dc.previewBy[classMorePages], want)
		}
		if dc.previewBy[classOther] != 0 {
			t.Errorf("depth %d: %d requests of no known class", dc.depth, dc.previewBy[classOther])
		}
	}
	for _, k := range []string{classRegistry, classPinCheck, classWholePage, classKeptManifest} {
		if lo.previewBy[k] != hi.previewBy[k] {
			t.Errorf("preview %q: %d requests at depth %d, %d at depth %d: not depth-flat", k, lo.previewBy[k], lo.depth, hi.previewBy[k], hi.depth)
		}
	}
	// A table that fits one listing page (depth 100: about 300 objects) is
	// planned from that page, its refs and folders included; one that does
	// not (depth 2000) is listed folder by folder after it: the first pages
	// of _versions/ and 4 managed folders and one listing of _refs/ more,
	// the same at every depth beyond one page.
	if lo.previewBy[classWholePage] != costTables || lo.previewBy[classFirstPage] != 0 {
		t.Errorf("depth %d: %d whole-table pages and %d folder listings, want one page a table and no folder listed", lo.depth, lo.previewBy[classWholePage], lo.previewBy[classFirstPage])
	}
	if hi.previewBy[classFirstPage] != 5*costTables || hi.previewBy[classRefs]-lo.previewBy[classRefs] != costTables {
		t.Errorf("depth %d: %d folder first pages, %d refs requests (%d at depth %d), want 5 and 1 more a table", hi.depth, hi.previewBy[classFirstPage], hi.previewBy[classRefs], lo.previewBy[classRefs], lo.depth)
	}
	flat := func(dc depthCost) int64 {
		return dc.preview.counts.Total() - dc.previewBy[classDiscovery] - dc.previewBy[classRemovedManifest] - dc.previewBy[classTransaction] - dc.previewBy[classMorePages]
	}
	if flat(lo)+6*costTables != flat(hi) {
		t.Errorf("preview's constant part: %d requests at depth %d, %d at depth %d, want 6 a table more beyond one page", flat(lo), lo.depth, flat(hi), hi.depth)
	}
	owed := func(dc depthCost) int64 {
		return dc.previewBy[classRemovedManifest] + dc.previewBy[classTransaction] + dc.previewBy[classMorePages]
	}
	slope := float64(owed(hi)-owed(lo)) / float64(hi.removed-lo.removed)
	total := float64(hi.preview.counts.Total()-lo.preview.counts.Total()) / float64(hi.removed-lo.removed)
	t.Logf("root planning: %d requests at depth %d, %d at depth %d (%d without discovery at both)",
		lo.roots.counts.Total(), lo.depth, hi.roots.counts.Total(), hi.depth, rootsFlat(lo))
	t.Logf("preview: %d requests at depth %d, %d at depth %d; constant part %d (+ discovery %d / %d); "+
		"%.4f requests per removed version owed to removed versions, %.4f per removed version in all",
		lo.preview.counts.Total(), lo.depth, hi.preview.counts.Total(), hi.depth, flat(lo),
		lo.previewBy[classDiscovery], hi.previewBy[classDiscovery], slope, total)

	// The same store on localfs makes the same requests, but for discovery:
	// memstore lists the root's level in one request (a delimiter), localfs
	// one request per top-level entry and one to end (the Store's skip-scan;
	// a local disk's round trip costs nothing to speak of).
	local := measureDepth(t, newLocalBackend(t), 100)
	withoutDiscovery := func(m map[string]int64) map[string]int64 {
		c := maps.Clone(m)
		delete(c, classDiscovery)
		return c
	}
	if local.entries != lo.entries || !maps.Equal(withoutDiscovery(local.rootsBy), withoutDiscovery(lo.rootsBy)) || !maps.Equal(withoutDiscovery(local.previewBy), withoutDiscovery(lo.previewBy)) {
		t.Errorf("depth 100: localfs made other requests than memstore:\nroots   %v\n        %v\npreview %v\n        %v",
			local.rootsBy, lo.rootsBy, local.previewBy, lo.previewBy)
	}
	if local.previewBy[classDiscovery] != int64(local.entries+1) {
		t.Errorf("discovery on localfs: %d requests, want %d (a skip-scan: top-level entries + 1)", local.previewBy[classDiscovery], local.entries+1)
	}
}

// BenchmarkPreviewDepth measures Preview (req/op, and its time) and root
// planning (roots-req) on the cost test's store on localfs at depth 100
// and 2,000:
//
//	go test -p 1 -run '^$' -bench BenchmarkPreviewDepth -benchtime 5x ./core/retention/
func BenchmarkPreviewDepth(b *testing.B) {
	for _, depth := range []int{100, 2000} {
		b.Run(fmt.Sprintf("depth=%d", depth), func(b *testing.B) {
			be := newLocalBackend(b)
			buildCostStore(b, be, depth)
			roots := measure(b, be, func(s *storage.Store) error {
				_, err := ResolveRoots(bg, s)
				return err
			})
			var reqs int64
			var removed, iters int
			for b.Loop() {
				m := measure(b, be, func(s *storage.Store) error {
					plan, err := Preview(bg, s, costPolicy)
					if err == nil {
						removed = plan.Totals.VersionsRemoved
					}
					return err
				})
				reqs += m.counts.Total()
				iters++
			}
			b.ReportMetric(float64(reqs)/float64(iters), "req/op")
			b.ReportMetric(float64(roots.counts.Total()), "roots-req")
			b.ReportMetric(float64(removed), "versions-removed")
		})
	}
}
