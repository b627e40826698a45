package lance

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// The workloads here are small: replay them whatever their size.
func init() { replayMinBytes = 0 }

// The replay differential: on datasets real Lance built, the planner that
// replays removed versions' transactions (cleanup_replay.go) makes the
// plan the planner reading every manifest makes, under several policies.

const (
	replaySeed      = 20261202
	replayWorkloads = 22
)

// replaySpec draws workload i: runs of appends, point and range deletes,
// updates, scalar indices, compaction, Lance's own cleanup mid-way, tags
// and branches, V1 manifest names for every fourth.
func replaySpec(i int) diffWorkload {
	r := rand.New(rand.NewSource(replaySeed + int64(i)))
	w := diffWorkload{name: fmt.Sprintf("r%02d", i), naming: "v2"}
	if i%4 == 1 {
		w.naming = "v1"
	}
	add := func(s step) { w.steps = append(w.steps, s) }
	rows := 3 + r.Intn(4)
	add(step{"op": "create", "rows": rows})
	adds := 1 // versions surely committed so far (appends always commit)
	branched, cleaned, tagged := false, false, false
	n := 10 + r.Intn(10)
	for j := 0; j < n; j++ {
		switch k := r.Intn(100); {
		case k < 25:
			m := 1 + r.Intn(3)
			add(step{"op": "add", "rows": m})
			rows += m
			adds++
		case k < 32:
			c := 3 + r.Intn(6)
			add(step{"op": "addMany", "count": c})
			rows += c
			adds += c
		case k < 44:
			add(step{"op": "delete", "where": fmt.Sprintf("id = %d", r.Intn(rows))})
		case k < 50:
			lo := r.Intn(rows)
			add(step{"op": "delete", "where": fmt.Sprintf("id >= %d AND id < %d", lo, lo+1+r.Intn(4))})
		case k < 62:
			add(step{"op": "update", "where": fmt.Sprintf("id = %d", r.Intn(rows)), "values": map[string]string{"v": fmt.Sprintf("'u%d'", j)}})
		case k < 72:
			// Scalar (btree on id, bitmap on v), full-text on v (the
			// bitmap's name: one replaces the other) and, with vectors, IVF_FLAT.
			kinds := 3
			if replayVectors(i) {
				kinds = 4
			}
			switch r.Intn(kinds) {
			case 0:
				add(step{"op": "createIndex", "column": "id"})
			case 1:
				add(step{"op": "createIndex", "column": "v", "index": "bitmap"})
			case 2:
				add(step{"op": "createIndex", "column": "v", "index": "fts"})
			default:
				add(step{"op": "createIndex", "column": "vector", "index": "ivfFlat"})
			}
		case k < 80:
			add(step{"op": "optimize", "cleanupOlderThanAt": 0})
		case k < 84 && !tagged:
			// Lance's cleanup refuses to remove tagged versions.
			add(step{"op": "optimize", "cleanupOlderThanMs": 0, "deleteUnverified": true})
			cleaned = true
		case k < 90 && !cleaned:
			// Versions 1..adds surely exist (Lance's cleanup has not run).
			add(step{"op": "tagCreate", "name": fmt.Sprintf("t%d", j), "version": 1 + r.Intn(adds)})
			tagged = true
		case k < 95 && !branched:
			branched = true
			add(step{"op": "branchCreate", "name": "b", "from": "main"})
			add(step{"op": "add", "rows": 1, "on": "b"})
			add(step{"op": "delete", "where": "id = 0", "on": "b"})
		default:
			add(step{"op": "add", "rows": 1})
			rows++
			adds++
		}
	}
	add(step{"op": "add", "rows": 1})
	return w
}

// replayVectors: workload i's rows carry a vector column.
func replayVectors(i int) bool { return i%3 != 1 }

// comparable returns p's JSON with what may differ between the planners
// blanked: the planning time, and the timestamp of a version the replay
// did not read (its object's modification time, not its commit time).
func comparable(t testing.TB, p *Plan, other *Plan) string {
	t.Helper()
	c := *p
	c.PlannedAt = time.Time{}
	c.Versions = append([]PlannedVersion(nil), p.Versions...)
	for i := range c.Versions {
		fromTxn := c.Versions[i].FromTransaction
		if other != nil && i < len(other.Versions) && other.Versions[i].FromTransaction {
			fromTxn = true
		}
		if fromTxn {
			c.Versions[i].Timestamp = time.Time{}
			c.Versions[i].FromTransaction = false
		}
	}
	b, err := json.MarshalIndent(&c, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// replayPolicies are the policies each workload is planned with.
func replayPolicies(r *rand.Rand, d *Dataset, t testing.TB) []Policy {
	vs, err := d.Versions(bg)
	if err != nil {
		t.Fatal(err)
	}
	// The real clock: files younger than the safety window (all of the
	// workload's, but the planted old debris) are deleted only when a
	// removed version references them, which is what the replay decides.
	pin := vs[r.Intn(len(vs))].N
	return []Policy{
		{KeepLast: 1},
		{KeepLast: 1, SafetyWindow: -1},
		{KeepLast: 3},
		{KeepLast: 2, SafetyWindow: -1, ExtraRoots: []Root{{Version: pin, Reason: "checkpoint"}}},
	}
}

// diffPlans plans d with p by both planners and reports a difference.
func diffPlans(t *testing.T, name string, d *Dataset, p Policy) (*Plan, bool) {
	t.Helper()
	full := p
	full.FromTransactions = false
	p.FromTransactions = true
	want, err := d.PlanCleanup(bg, full)
	if err != nil {
		t.Fatalf("%s: full planner: %v", name, err)
	}
	got, err := d.PlanCleanup(bg, p)
	if err != nil {
		t.Fatalf("%s: replay planner: %v", name, err)
	}
	if w, g := comparable(t, want, got), comparable(t, got, want); w != g {
		t.Errorf("%s (KeepLast %d, window %v, roots %v): the replay plans differently:\n%s", name, p.KeepLast, p.SafetyWindow, p.ExtraRoots, lineDiff(w, g))
		return got, false
	}
	if want.stats.txnsRead != 0 {
		t.Errorf("%s: the full planner read %d transactions", name, want.stats.txnsRead)
	}
	return got, true
}

// lineDiff shows the first differing lines of two texts.
func lineDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < len(al) && i < len(bl); i++ {
		if al[i] != bl[i] {
			lo := max(0, i-8)
			return fmt.Sprintf("full manifests, lines %d-:\n%s\nreplay:\n%s", lo, strings.Join(al[lo:min(len(al), i+8)], "\n"), strings.Join(bl[lo:min(len(bl), i+8)], "\n"))
		}
	}
	return fmt.Sprintf("%d lines vs %d", len(al), len(bl))
}

// TestReplayPlanner builds the workloads once (one Node process) for the
// differential and the tampering checks.
func TestReplayPlanner(t *testing.T) {
	if testing.Short() {
		t.Skip("builds datasets with real Lance")
	}
	start := time.Now()
	base := t.TempDir()
	var ws []diffWorkload
	var jobs []map[string]any
	for i := 0; i < replayWorkloads; i++ {
		w := replaySpec(i)
		ws = append(ws, w)
		job := buildJob(filepath.Join(base, w.name, "db"), "t", w.naming, w.steps)
		job["vectors"] = replayVectors(i)
		jobs = append(jobs, job)
	}
	// The workload for the misattribution check: v4's fragment (id 5)
	// is deleted whole by v6.
	jobs = append(jobs, buildJob(filepath.Join(base, "cancel", "db"), "t", "v2", []step{
		{"op": "create", "rows": 3}, {"op": "add", "rows": 1}, {"op": "add", "rows": 1}, {"op": "add", "rows": 1},
		{"op": "add", "rows": 1}, {"op": "delete", "where": "id = 5"}, {"op": "add", "rows": 1}, {"op": "add", "rows": 1}}))
	oracleRun(t, jobs...)
	indexes := map[string]int{}
	for _, w := range ws {
		for _, s := range w.steps {
			if s["op"] == "createIndex" {
				k, _ := s["index"].(string)
				indexes[cmp.Or(k, "btree")]++
			}
		}
	}
	t.Logf("built %d workloads in %v; index builds %v", len(jobs), time.Since(start).Round(time.Millisecond), indexes)
	t.Run("differential", func(t *testing.T) { testReplayDifferential(t, base, ws) })
	t.Run("tampered", func(t *testing.T) { testReplayTampered(t, base, ws) })
	t.Run("misattributed", func(t *testing.T) { testReplayMisattributed(t, filepath.Join(base, "cancel")) })
	t.Run("misattributed by page order", func(t *testing.T) { testReplayPageOrder(t, filepath.Join(base, "cancel")) })
	t.Run("compaction", func(t *testing.T) { testReplayCompaction(t, base, ws) })
}

func testReplayDifferential(t *testing.T, base string, ws []diffWorkload) {
	start := time.Now()
	kinds := map[string]int{}
	var replayed, versions, fellBack, plans int
	for i, w := range ws {
		work := filepath.Join(t.TempDir(), w.name)
		copyTree(t, filepath.Join(base, w.name, "db"), filepath.Join(work, "db"))
		plantDebris(t, filepath.Join(work, "db", "t.lance"), i)
		d := mustOpen(t, openStore(t, work), "db/t.lance")
		r := rand.New(rand.NewSource(replaySeed + int64(i)))
		for _, p := range replayPolicies(r, d, t) {
			got, ok := diffPlans(t, w.name, d, p)
			if !ok {
				t.Logf("%s steps: %v", w.name, w.steps)
				continue
			}
			plans++
			versions += got.Totals.VersionsRemoved
			replayed += got.stats.replayed
			if got.stats.fellBack {
				fellBack++
				t.Logf("%s: fell back: %s", w.name, got.stats.mismatch)
			}
			for k, n := range got.stats.kinds {
				kinds[k.String()] += n
			}
		}
	}
	t.Logf("%d plans, %d removed versions, %d replayed from transactions (%v), %d fell back to full manifests, in %v",
		plans, versions, replayed, kinds, fellBack, time.Since(start).Round(time.Millisecond))
	// The differential means something only if most removed versions were
	// replayed, through every modelled operation LanceDB writes.
	if replayed*2 < versions {
		t.Errorf("only %d of %d removed versions were replayed", replayed, versions)
	}
	for _, k := range []string{"Append", "Delete", "Update", "CreateIndex", "ReserveFragments", "Rewrite"} {
		if kinds[k] == 0 {
			t.Errorf("no %s transaction was replayed: %v", k, kinds)
		}
	}
}

// testReplayTampered changes the transaction of a replayed removed
// version on the store and checks the replay never trusts it into a
// different plan: unreadable, missing, ambiguous, for another commit, or
// well-formed but claiming a file the commit did not add (a young file of
// a commit in flight, which the plan must keep).
func testReplayTampered(t *testing.T, base string, ws []diffWorkload) {
	w := ws[0]
	fresh := func(t *testing.T) (string, *Dataset) {
		work := filepath.Join(t.TempDir(), w.name)
		copyTree(t, filepath.Join(base, w.name, "db"), filepath.Join(work, "db"))
		return filepath.Join(work, "db", "t.lance"), mustOpen(t, openStore(t, filepath.Join(work)), "db/t.lance")
	}
	// An Append of a replayed removed version.
	table, d := fresh(t)
	plan, err := d.PlanCleanup(bg, Policy{KeepLast: 1, FromTransactions: true})
	if err != nil {
		t.Fatal(err)
	}
	var name, path string
	var version uint64
	for _, v := range plan.Versions {
		if !v.FromTransaction || name != "" {
			continue
		}
		m, _ := filepath.Glob(filepath.Join(table, "_transactions", fmt.Sprintf("%d-*.txn", v.Version-1)))
		if len(m) != 1 {
			continue
		}
		b, err := os.ReadFile(m[0])
		if err != nil {
			t.Fatal(err)
		}
		op, err := parseTxn(b)
		if err != nil || op.kind != txnAppend || len(op.newFrags) == 0 || len(op.newFrags[0].Files) == 0 {
			continue
		}
		name, path, version = filepath.Base(m[0]), op.newFrags[0].Files[0].Path, v.Version
	}
	if name == "" {
		t.Fatalf("%s: no replayed Append to tamper with", w.name)
	}
	// The same length keeps the protobuf lengths valid.
	fake := "f" + path[1:]
	if path[0] == 'f' {
		fake = "e" + path[1:]
	}
	for _, c := range []struct {
		name   string
		tamper func(t *testing.T, txn string)
		// replayedOut: the tampered version must not be replayed;
		// fellBack: the replay must detect it at the end of the run.
		replayedOut, fellBack bool
	}{
		{"garbage", func(t *testing.T, txn string) { write(t, txn, []byte("not a transaction")) }, true, false},
		{"truncated", func(t *testing.T, txn string) {
			b := read(t, txn)
			write(t, txn, b[:len(b)/2])
		}, true, false},
		{"missing", func(t *testing.T, txn string) {
			if err := os.Remove(txn); err != nil {
				t.Fatal(err)
			}
		}, true, false},
		{"ambiguous", func(t *testing.T, txn string) {
			// Another commit read the same version, long ago, and failed.
			p := filepath.Join(filepath.Dir(txn), fmt.Sprintf("%d-00000000-0000-4000-8000-000000000000.txn", version-1))
			write(t, p, read(t, txn))
			old := time.Now().Add(-DefaultSafetyWindow - time.Hour)
			if err := os.Chtimes(p, old, old); err != nil {
				t.Fatal(err)
			}
		}, true, false},
		{"ambiguous and young", func(t *testing.T, txn string) {
			// The same, just now: perhaps a commit in flight, or one
			// rebased onto a later version whose transaction is then
			// unknown.
			write(t, filepath.Join(filepath.Dir(txn), fmt.Sprintf("%d-00000000-0000-4000-8000-000000000000.txn", version-1)), read(t, txn))
		}, true, true},
		{"a rebased commit's", func(t *testing.T, txn string) {
			// A young transaction of an older read version than any
			// version's own: which version it made is unknown.
			write(t, filepath.Join(filepath.Dir(txn), fmt.Sprintf("%d-00000000-0000-4000-8000-000000000001.txn", 0)), []byte("x"))
		}, false, true},
		{"another commit", func(t *testing.T, txn string) {
			// The content names another uuid than the file name.
			b := read(t, txn)
			_, u, _ := txnName(name)
			write(t, txn, bytes.Replace(b, []byte(u), []byte(strings.Repeat("0", len(u))), 1))
		}, true, false},
		{"claims a file in flight", func(t *testing.T, txn string) {
			write(t, txn, bytes.Replace(read(t, txn), []byte(path), []byte(fake), 1))
			// The young file of a commit in flight.
			write(t, filepath.Join(table, "data", fake), []byte("in flight"))
		}, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var d *Dataset
			table, d = fresh(t)
			c.tamper(t, filepath.Join(table, "_transactions", name))
			got, ok := diffPlans(t, w.name, d, Policy{KeepLast: 1})
			if !ok {
				return
			}
			for _, v := range got.Versions {
				if v.Version == version && v.FromTransaction && c.replayedOut {
					t.Errorf("v%d was replayed from its %s transaction", version, c.name)
				}
			}
			if got.stats.fellBack != c.fellBack {
				t.Errorf("fell back to every manifest: %v (%s), want %v", got.stats.fellBack, got.stats.mismatch, c.fellBack)
			}
			for _, f := range got.Files {
				if strings.HasSuffix(f.Key, "/data/"+fake) {
					t.Errorf("the plan deletes %s, a young file no version references: %s", f.Key, f.Reason)
				}
			}
			if c.replayedOut && !c.fellBack && got.stats.replayed == 0 {
				t.Errorf("nothing else was replayed")
			}
		})
	}
}

func read(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func write(t *testing.T, p string, b []byte) {
	t.Helper()
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestReplayPlansCommittedFixtures: the committed tables, LanceDB 0.22's
// (footer format 0.1, V1 names, no index file lists) among them, plan the
// same from transactions as from every manifest.
func TestReplayPlansCommittedFixtures(t *testing.T) {
	names := []string{"v2-appends", "v2-appends-again", "v1-naming", "deletes", "update", "index", "branch-tag", "optimized",
		"lancedb-0.22/v1", "lancedb-0.22/v2"}
	replayed := 0
	for _, name := range names {
		d, _ := openFixture(t, name)
		for _, p := range []Policy{{KeepLast: 1}, {KeepLast: 1, SafetyWindow: -1}, {KeepLast: 2, SafetyWindow: -1}} {
			got, ok := diffPlans(t, name, d, p)
			if !ok {
				continue
			}
			if got.stats.fellBack {
				t.Errorf("%s: fell back to every manifest: %s", name, got.stats.mismatch)
			}
			replayed += got.stats.replayed
		}
	}
	if replayed == 0 {
		t.Error("no version of the fixtures was replayed")
	}
	t.Logf("%d versions replayed", replayed)
}

// plantFailedCommit, on the "cancel" workload's table, finds v4's own
// transaction (read version 3, one Append) and adds a failed commit's: read
// v3 too, another uuid, claiming another data file, which it writes young.
func plantFailedCommit(t *testing.T, table string) (own string, b []byte, op *txnOp, fake string) {
	t.Helper()
	txns := filepath.Join(table, "_transactions")
	m, _ := filepath.Glob(filepath.Join(txns, "3-*.txn"))
	if len(m) != 1 {
		t.Fatalf("transactions of read version 3: %v", m)
	}
	b = read(t, m[0])
	op, err := parseTxn(b)
	if err != nil || op.kind != txnAppend || len(op.newFrags) != 1 {
		t.Fatalf("v4's transaction: %+v, %v", op, err)
	}
	path := op.newFrags[0].Files[0].Path
	fake = "f" + path[1:]
	if path[0] == 'f' {
		fake = "e" + path[1:]
	}
	other := "00000000-0000-4000-8000-0000000000aa"
	failed := bytes.Replace(bytes.Replace(b, []byte(op.uuid), []byte(other), 1), []byte(path), []byte(fake), 1)
	write(t, filepath.Join(txns, "3-"+other+".txn"), failed)
	write(t, filepath.Join(table, "data", fake), []byte("in flight"))
	return m[0], b, op, fake
}

// testReplayMisattributed: v4's commit looks rebased (its transaction file
// names read version 1), and a failed commit that read v3 left a young
// transaction claiming another data file. v4 is then replayed from the
// wrong transaction, and since v6 deletes v4's fragment whole, the run
// still replays to v8's manifest exactly: only the transaction no version
// accounts for, young, gives it away. Without that check the claimed file,
// young and referenced by no version, would be deleted as a removed
// version's.
func testReplayMisattributed(t *testing.T, src string) {
	work := filepath.Join(t.TempDir(), "cancel")
	copyTree(t, filepath.Join(src, "db"), filepath.Join(work, "db"))
	table := filepath.Join(work, "db", "t.lance")
	own, b, op, fake := plantFailedCommit(t, table)
	if !bytes.HasPrefix(b, []byte{0x08, 0x03}) {
		t.Fatalf("v4's transaction does not start with its read version: %x", b[:2])
	}
	// v4's own transaction, as if rebased from v1.
	rebased := append([]byte{0x08, 0x01}, b[2:]...)
	if err := os.Remove(own); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(table, "_transactions", "1-"+op.uuid+".txn"), rebased)

	d := mustOpen(t, openStore(t, work), "db/t.lance")
	got, ok := diffPlans(t, "cancel", d, Policy{KeepLast: 1})
	if !ok {
		return
	}
	if !got.stats.fellBack {
		t.Errorf("the replay of a misattributed transaction was trusted (%d versions replayed)", got.stats.replayed)
	}
	for _, f := range got.Files {
		if strings.HasSuffix(f.Key, "/data/"+fake) {
			t.Errorf("the plan deletes %s, a young file no version references: %s", f.Key, f.Reason)
		}
	}
}

// testReplayPageOrder: one listing page of the whole table is not a
// snapshot, and _transactions/ sorts before _versions/: v4's own
// transaction (read version 3), written just before its manifest, can be
// missing from the page that shows the manifest, while a failed commit's
// young transaction of read version 3 is on it. The replay must not take
// that one for v4's (its guard, exactly one file of read version 3, holds
// only for a listing made after the versions): the young file it claims
// is referenced by no version and must be kept.
func testReplayPageOrder(t *testing.T, src string) {
	work := filepath.Join(t.TempDir(), "cancel")
	copyTree(t, filepath.Join(src, "db"), filepath.Join(work, "db"))
	own, _, _, fake := plantFailedCommit(t, filepath.Join(work, "db", "t.lance"))

	s, pd, _ := pagedStore(t, work, "db/t.lance")
	pd.hide.Store("db/t.lance/_transactions/" + filepath.Base(own))
	d := mustOpen(t, s, "db/t.lance")
	got, err := d.PlanCleanup(bg, Policy{KeepLast: 1, FromTransactions: true})
	if err != nil {
		t.Fatal(err)
	}
	if !got.Snapshot.Whole {
		t.Fatal("not planned from one page: the case is not exercised")
	}
	for _, f := range got.Files {
		if strings.HasSuffix(f.Key, "/data/"+fake) {
			t.Errorf("the plan deletes %s, a young file no version references: %s", f.Key, f.Reason)
		}
	}
}

// testReplayCompaction replays compaction's commits as if the Rewrite
// were not rebased onto ReserveFragments (compactions attributes the
// rebased pair): with the Rewrite's file renamed to the read version after
// (and its content to match), both are attributed by name, and the run
// must still end exactly at the manifest Lance wrote. The renamed file is then a removed version's
// transaction to the replay and an unreferenced one to the full reads, so
// the plans are compared without a safety window, by what they delete.
func testReplayCompaction(t *testing.T, base string, ws []diffWorkload) {
	rewrites := 0
	for _, w := range ws {
		work := filepath.Join(t.TempDir(), w.name)
		copyTree(t, filepath.Join(base, w.name, "db"), filepath.Join(work, "db"))
		txns := filepath.Join(work, "db", "t.lance", "_transactions")
		byRV := map[uint64][]string{}
		all, _ := filepath.Glob(filepath.Join(txns, "*.txn"))
		for _, p := range all {
			if rv, _, ok := txnName(filepath.Base(p)); ok {
				byRV[rv] = append(byRV[rv], p)
			}
		}
		renamed := 0
		var renamedNames []string
		for rv, ps := range byRV {
			if len(ps) != 2 || len(byRV[rv+1]) != 0 || rv+1 >= 128 {
				continue
			}
			var reserve, rewrite string
			var rwUUID string
			for _, p := range ps {
				op, err := parseTxn(read(t, p))
				switch {
				case err != nil:
				case op.kind == txnReserveFragments:
					reserve = p
				case op.kind == txnRewrite:
					rewrite, rwUUID = p, op.uuid
				}
			}
			b := read(t, rewrite)
			if reserve == "" || rewrite == "" || !bytes.HasPrefix(b, []byte{0x08, byte(rv)}) {
				continue
			}
			if err := os.Remove(rewrite); err != nil {
				t.Fatal(err)
			}
			name := fmt.Sprintf("%d-%s.txn", rv+1, rwUUID)
			write(t, filepath.Join(txns, name), append([]byte{0x08, byte(rv + 1)}, b[2:]...))
			renamedNames = append(renamedNames, name)
			renamed++
		}
		if renamed == 0 {
			continue
		}
		d := mustOpen(t, openStore(t, work), "db/t.lance")
		p := Policy{KeepLast: 1, SafetyWindow: -1}
		want, err := d.PlanCleanup(bg, p)
		if err != nil {
			t.Fatal(err)
		}
		p.FromTransactions = true
		got, err := d.PlanCleanup(bg, p)
		if err != nil {
			t.Fatal(err)
		}
		if got.stats.fellBack {
			// A Rewrite whose own manifest ends a run (it is kept, or
			// what follows does not replay) still names the file by its
			// old name: the rename itself is the mismatch, and falling
			// back is right. Which workloads end that way depends on
			// what Lance's own cleanup mid-way removed, which follows
			// the clock.
			if slices.ContainsFunc(renamedNames, func(n string) bool { return strings.Contains(got.stats.mismatch, `the listing gave "`+n+`"`) }) {
				t.Logf("%s: the renamed Rewrite ends a run (%s): fell back, as it must", w.name, got.stats.mismatch)
				continue
			}
			t.Errorf("%s: the replay of compaction does not end at Lance's manifest: %s", w.name, got.stats.mismatch)
			continue
		}
		if a, b := strings.Join(planKeys(want), "\n"), strings.Join(planKeys(got), "\n"); a != b {
			t.Errorf("%s: the replay deletes\n%s\nthe full reads\n%s", w.name, b, a)
		}
		rewrites += got.stats.kinds[txnRewrite]
	}
	if rewrites == 0 {
		t.Fatal("no compaction was replayed")
	}
	t.Logf("%d rewrites replayed", rewrites)
}
