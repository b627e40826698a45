package lance

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

// The differential: on identical copies of datasets without tags, the
// files retain's cleanup removes are the files Lance's own cleanup removes.
//
// Lance's cleanup is only reachable through LanceDB's optimize, which
// compacts first, then cleans up, then optimizes indices — and commits new
// versions while doing so (compaction reserves fragment ids in one commit
// and rewrites in another, so even a dataset with nothing to compact gets
// new versions). Those versions are newer than the cut-off, so both
// cleanups keep them. The test therefore runs optimize on the dataset,
// records what it removed (before minus after), restores the dataset from
// a copy taken before optimize and adds back the files optimize added,
// and runs retain's cleanup with the same cut-off on that. Both cleanups
// then decide over the same versions and files; the only difference is
// that retain also sees index-optimize's files, which Lance's cleanup ran
// before, and which belong to the newest, kept version. Everything runs at
// the same absolute path, since Lance addresses files by absolute URI.

const (
	diffSeed      = 20261130
	diffWorkloads = 24
)

// diffWorkload is one randomized dataset and how it is cleaned.
type diffWorkload struct {
	name             string
	naming           string
	steps            []step
	partial          bool // a cut-off inside a sleep gap, else "now"
	deleteUnverified bool
}

// diffSpec draws workload i from the fixed seed: appends, point and range
// deletes (whole fragments leave), updates, scalar indices, and optimize
// steps (compaction only, or with Lance's own cleanup mid-way).
func diffSpec(i int) diffWorkload {
	r := rand.New(rand.NewSource(diffSeed + int64(i)))
	w := diffWorkload{name: fmt.Sprintf("w%02d", i), naming: "v2", partial: r.Intn(3) > 0, deleteUnverified: r.Intn(2) == 0}
	if i%4 == 1 {
		w.naming = "v1"
	}
	add := func(s step) { w.steps = append(w.steps, s) }
	rows := 3 + r.Intn(4)
	add(step{"op": "create", "rows": rows})
	n := 8 + r.Intn(6)
	sleepAt := -1
	if w.partial {
		sleepAt = 2 + r.Intn(n-3)
	}
	for j := 0; j < n; j++ {
		if j == sleepAt {
			add(step{"op": "sleep", "ms": 350})
		}
		switch k := r.Intn(100); {
		case k < 30:
			m := 1 + r.Intn(3)
			add(step{"op": "add", "rows": m})
			rows += m
		case k < 45:
			add(step{"op": "delete", "where": fmt.Sprintf("id = %d", r.Intn(rows))})
		case k < 55:
			lo := r.Intn(rows)
			add(step{"op": "delete", "where": fmt.Sprintf("id >= %d AND id < %d", lo, lo+1+r.Intn(4))})
		case k < 68:
			add(step{"op": "update", "where": fmt.Sprintf("id = %d", r.Intn(rows)), "values": map[string]string{"v": fmt.Sprintf("'u%d'", j)}})
		case k < 80:
			add(step{"op": "createIndex", "column": "id"})
		case k < 88:
			// Compaction and index optimization, no cleanup (a cut-off at
			// the epoch removes nothing).
			add(step{"op": "optimize", "cleanupOlderThanAt": 0})
		case k < 93:
			add(step{"op": "optimize", "cleanupOlderThanMs": 0, "deleteUnverified": true})
		default:
			add(step{"op": "add", "rows": 1})
			rows++
		}
	}
	return w
}

// fileStat is a file's size and modification time.
type fileStat struct {
	size  int64
	mtime time.Time
}

// treeStat lists the regular files under dir.
func treeStat(t testing.TB, dir string) map[string]fileStat {
	t.Helper()
	out := map[string]fileStat{}
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.Type().IsRegular() {
			info, err := e.Info()
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(dir, p)
			out[filepath.ToSlash(rel)] = fileStat{info.Size(), info.ModTime()}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// copyFile copies src to dst and keeps its modification time: the safety
// window judges files by it.
func copyFile(t testing.TB, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(dst, info.ModTime(), info.ModTime()); err != nil {
		t.Fatal(err)
	}
}

func copyTree(t testing.TB, src, dst string) {
	t.Helper()
	for rel := range treeStat(t, src) {
		copyFile(t, filepath.Join(src, rel), filepath.Join(dst, rel))
	}
}

func isHint(rel string) bool {
	return strings.HasSuffix(rel, "/"+latestHintName) || rel == versionsDir+"/"+latestHintName
}

// goneFiles lists the files of before that are not in after, without
// version hints (Lance rewrites them; they are no cleanup's business).
func goneFiles(before, after map[string]fileStat) []string {
	var out []string
	for k := range before {
		if _, ok := after[k]; !ok && !isHint(k) {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// plantDebris puts files no version references into Lance's folders, as
// crashed or abandoned commits leave them: some older than the safety
// window, some younger but older than every commit (so Lance's listing,
// which skips files newer than the oldest kept manifest, sees them), and
// some of kinds no cleanup touches.
func plantDebris(t testing.TB, table string, i int) {
	t.Helper()
	var first time.Time
	for rel, fs := range treeStat(t, table) {
		if strings.HasPrefix(rel, versionsDir+"/") && (first.IsZero() || fs.mtime.Before(first)) {
			first = fs.mtime
		}
	}
	old, young := time.Now().Add(-DefaultSafetyWindow-time.Hour), first.Add(-time.Second)
	uuid := fmt.Sprintf("0badc0de-0000-4000-8000-%012d", i)
	for rel, mtime := range map[string]time.Time{
		"data/0000debris-old.lance":             old,
		"data/0000debris-young.lance":           young,
		"_deletions/99-1-42.arrow":              old,
		"_deletions/99-1-43.bin":                young,
		"_transactions/99-debris-old.txn":       old,
		"_transactions/99-debris-young.txn":     young,
		"_indices/" + uuid + "/page_data.lance": old,
		"_versions/.tmp_debris.manifest":        old,
		"data/notes.txt":                        old,
		"_mem_wal/0/0.lance":                    old,
		"_indices/loose.idx":                    young,
	} {
		p := filepath.Join(table, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("debris"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
}

// knownDivergence explains a file Lance's cleanup removes and retain's
// keeps on purpose, or returns "".
func knownDivergence(rel string) string {
	if rest, ok := strings.CutPrefix(rel, "_indices/"); ok && !strings.Contains(rest, "/") {
		// Lance takes the first path part under _indices/ for an index
		// uuid, so a loose file there counts as an unreferenced index.
		// Lance writes indices only as _indices/<uuid>/<file>: retain
		// keeps what it does not recognise.
		return "a file directly under _indices/ is no index folder; retain keeps what it does not recognise"
	}
	return ""
}

// lanceCleanupReadVersion is the version Lance's cleanup inside an
// optimize from version before to after ran at: optimize commits
// compaction (ReserveFragments, Rewrite) before its cleanup and index
// optimization (CreateIndex) after it. It reads each new version's
// transaction file for its operation (Transaction's oneof, field 100 and
// up; 103 is CreateIndex).
func lanceCleanupReadVersion(t testing.TB, d *Dataset, before, after uint64) uint64 {
	t.Helper()
	read := before
	for n := before + 1; n <= after; n++ {
		v, err := d.VersionAt(bg, n)
		if err != nil {
			t.Fatal(err)
		}
		m, err := d.ReadManifest(bg, v)
		if err != nil {
			t.Fatal(err)
		}
		b, _, err := d.Store.ReadAll(bg, d.Key("_transactions/"+m.TransactionFile))
		if err != nil {
			t.Fatal(err)
		}
		op := 0
		for len(b) > 0 {
			num, typ, l := protowire.ConsumeTag(b)
			if l < 0 {
				t.Fatalf("%s: bad transaction", m.TransactionFile)
			}
			b = b[l:]
			if num >= 100 {
				op = int(num)
			}
			l = protowire.ConsumeFieldValue(num, typ, b)
			if l < 0 {
				t.Fatalf("%s: bad transaction", m.TransactionFile)
			}
			b = b[l:]
		}
		if op == 0 {
			t.Fatalf("%s: no operation", m.TransactionFile)
		}
		if op != 103 {
			read = n
		}
	}
	return read
}

// lanceVersions lists the version numbers of the manifests in a file list.
func lanceVersions(files map[string]fileStat) []uint64 {
	var out []uint64
	for rel := range files {
		if name, ok := strings.CutPrefix(rel, versionsDir+"/"); ok {
			if n, _, ok := parseManifestName(name); ok {
				out = append(out, n)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// diffList shows the difference of two sorted lists.
func diffList(a, b []string) (onlyA, onlyB []string) {
	in := func(l []string) map[string]bool {
		m := map[string]bool{}
		for _, s := range l {
			m[s] = true
		}
		return m
	}
	ma, mb := in(a), in(b)
	for _, s := range a {
		if !mb[s] {
			onlyA = append(onlyA, s)
		}
	}
	for _, s := range b {
		if !ma[s] {
			onlyB = append(onlyB, s)
		}
	}
	return onlyA, onlyB
}

// TestDifferentialWithLanceCleanup runs diffWorkloads randomized
// workloads (a quarter with V1 names) built by real Lance, cleans each
// once with Lance's optimize and once, on an identical copy, with retain,
// and requires the same files removed, the same versions kept, and Lance
// reading every kept version of retain's copy in full afterwards.
func TestDifferentialWithLanceCleanup(t *testing.T) {
	if testing.Short() {
		t.Skip("builds datasets with real Lance")
	}
	start := time.Now()
	base := t.TempDir()
	ws := make([]diffWorkload, diffWorkloads)
	var jobs []map[string]any
	for i := range ws {
		ws[i] = diffSpec(i)
		jobs = append(jobs, buildJob(filepath.Join(base, ws[i].name, "db"), "t", ws[i].naming, ws[i].steps))
	}
	builds := oracleRun(t, jobs...)
	t.Logf("built %d workloads in %v", len(ws), time.Since(start).Round(time.Millisecond))

	type state struct {
		table      string // the table's directory
		cut        time.Time
		before     map[string]fileStat
		rows       map[string]map[uint64]versionRows
		lanceGone  []string
		lanceAfter map[string]fileStat
	}
	st := make([]state, len(ws))
	jobs = nil
	for i, w := range ws {
		s := &st[i]
		s.rows = rowsOf(decodeBuild(t, builds[i]))
		s.table = filepath.Join(base, w.name, "db", "t.lance")
		d := mustOpen(t, openStore(t, filepath.Join(base, w.name)), "db/t.lance")
		s.cut = time.Now().Truncate(time.Millisecond)
		if w.partial {
			// A Lance cleanup inside the workload may have removed the
			// versions before the gap: then the cut-off is now.
			if cut, gap := gapCutoff(t, d); gap >= 300*time.Millisecond {
				s.cut = cut
			} else {
				ws[i].partial = false
			}
		}
		plantDebris(t, s.table, i)
		s.before = treeStat(t, s.table)
		copyTree(t, s.table, filepath.Join(base, w.name, "backup"))
		jobs = append(jobs, map[string]any{"kind": "optimize", "dir": filepath.Join(base, w.name, "db"), "table": "t",
			"olderThanAt": s.cut.UnixMilli(), "deleteUnverified": w.deleteUnverified})
	}
	optimized := oracleRun(t, jobs...)

	mismatches, divergences := 0, 0
	var totalLance, totalVersions int
	jobs = nil
	plans := make([]*Plan, len(ws))
	for i, w := range ws {
		s := &st[i]
		var opt struct{ Before, After uint64 }
		_ = json.Unmarshal(optimized[i], &opt)
		s.lanceAfter = treeStat(t, s.table)
		s.lanceGone = goneFiles(s.before, s.lanceAfter)
		// The copy: the dataset as before optimize, plus what optimize
		// added (new versions, compacted data, index files, the hint).
		lanceDir := filepath.Join(base, w.name, "lance")
		if err := os.Rename(s.table, lanceDir); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(base, w.name, "backup"), s.table); err != nil {
			t.Fatal(err)
		}
		for rel, fs := range s.lanceAfter {
			if old, ok := s.before[rel]; !ok || old != fs {
				copyFile(t, filepath.Join(lanceDir, rel), filepath.Join(s.table, rel))
			}
		}
		copyBefore := treeStat(t, s.table)
		d := mustOpen(t, openStore(t, filepath.Join(base, w.name)), "db/t.lance")
		p := Policy{OlderThan: s.cut}
		if w.deleteUnverified {
			p.SafetyWindow = -1
		}
		// Lance's cleanup always keeps the version it read: the latest
		// after compaction, before index optimization committed. retain
		// sees the later commits too, so that version is pinned
		// explicitly.
		p.ExtraRoots = []Root{{Version: lanceCleanupReadVersion(t, d, opt.Before, opt.After), Reason: "the version Lance's cleanup read"}}
		plan, err := d.PlanCleanup(bg, p)
		if err != nil {
			t.Fatalf("%s: %v", w.name, err)
		}
		plans[i] = plan
		if _, err := d.ExecuteCleanup(bg, plan); err != nil {
			t.Fatalf("%s: %v", w.name, err)
		}
		retainAfter := treeStat(t, s.table)
		retainGone := goneFiles(copyBefore, retainAfter)
		var planned []string
		for _, k := range planKeys(plan) {
			planned = append(planned, strings.TrimPrefix(k, "db/t.lance/"))
		}
		if strings.Join(planned, "\n") != strings.Join(retainGone, "\n") {
			t.Errorf("%s: retain planned\n  %s\nbut removed\n  %s", w.name, strings.Join(planned, "\n  "), strings.Join(retainGone, "\n  "))
		}
		onlyLance, onlyRetain := diffList(s.lanceGone, retainGone)
		onlyLance = slices.DeleteFunc(onlyLance, func(rel string) bool {
			if why := knownDivergence(rel); why != "" {
				divergences++
				t.Logf("%s: %s is removed by Lance only: %s", w.name, rel, why)
				return true
			}
			return false
		})
		var kept []uint64
		for _, v := range plan.Versions {
			if v.Keep {
				kept = append(kept, v.Version)
			}
		}
		lanceKept := lanceVersions(s.lanceAfter)
		if len(onlyLance)+len(onlyRetain) > 0 || !equalU64(kept, lanceKept) {
			mismatches++
			t.Errorf("%s (%s, cut-off %s, deleteUnverified %v, optimize v%d→v%d): versions kept by Lance %v, by retain %v\nremoved only by Lance:\n  %s\nremoved only by retain:\n  %s\nsteps: %v",
				w.name, w.naming, s.cut.Format("15:04:05.000"), w.deleteUnverified, opt.Before, opt.After, lanceKept, kept,
				strings.Join(onlyLance, "\n  "), strings.Join(onlyRetain, "\n  "), w.steps)
		}
		totalLance += len(s.lanceGone)
		totalVersions += plan.Totals.VersionsRemoved
		t.Logf("%s %s: %d versions, %d removed, %d files removed by Lance; cut-off %s", w.name, w.naming,
			len(plan.Versions), plan.Totals.VersionsRemoved, len(s.lanceGone), map[bool]string{true: "in a gap", false: "now"}[w.partial])
		jobs = append(jobs, verifyJob(filepath.Join(base, w.name, "db"), "t", plan, nil, "main"))
	}
	if totalVersions == 0 || totalLance == 0 {
		t.Fatalf("the workloads removed nothing: %d versions, %d files", totalVersions, totalLance)
	}
	// Lance reads every kept version of retain's copies in full, and
	// appends. Versions optimize added have no count from the build: the
	// check compares them with themselves (count, scan, filter).
	verified := oracleRun(t, jobs...)
	for i, w := range ws {
		t.Run(w.name, func(t *testing.T) {
			checkLanceReads(t, verified[i], plans[i], st[i].rows, nil, "main")
		})
	}
	t.Logf("%d workloads, %d versions and %d files removed, %d mismatches, %d known divergences, in %v", len(ws), totalVersions, totalLance,
		mismatches, divergences, time.Since(start).Round(time.Millisecond))
}
