package lance

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/retain-dev/retain/core/internal/fanout"
	"github.com/retain-dev/retain/core/storage"
)

// Planning from transactions.
//
// Reading every removed version's manifest costs bytes quadratic in the
// history (manifest N lists every fragment of version N: 41 MB for 1,000
// single-row appends). But version N's files are version N-1's changed by
// N's transaction, a few hundred bytes. So for main, under a policy that
// needs no commit times (KeepLast, tags, fork points, extra roots), the
// planner reads in full only:
//   - every kept version's manifest (as ever: kept manifests alone decide
//     what is kept, and every check on them stays);
//   - the first version, and any version after a gap in the numbering;
//   - a removed version whose transaction it cannot pin down or does not
//     model (see replayable below), and the version before it;
//
// and replays the transactions of the removed versions between them
// (Append, Delete, Update, Rewrite, CreateIndex, ReserveFragments,
// UpdateConfig, as Lance's Transaction::build_manifest applies them),
// tracking each file's references version by version, so the plan is the
// one the full reads give: the same delete set, the same RemovedBy counts.
//
// Version N's transaction is found by name: Lance writes it as
// _transactions/{read_version}-{uuid}.txn, and a commit that was not
// rebased read N-1. It is used only when exactly one file carries
// N-1 (a failed or concurrent commit leaves another: then the manifest is
// read), or for compaction's two commits (see compactions), and only when
// its content names the same read version and uuid.
// Every replayed run ends at a manifest read in full: the replay of that
// version (which must name the transaction the manifest names) has to
// equal the manifest fragment for fragment, file for file, index for index,
// and in the next fragment id. Any difference, or anything not modelled
// turning up mid-run, drops the replay and the plan is made again from
// every manifest, as before.
//
// Safety: what is kept comes from the kept manifests only, so a
// transaction that under-reports can only leave garbage. Over-reporting
// would mark a file as "referenced by a removed version" (deleted whatever
// its age) — which is why an attribution must be unique and every run
// must replay to exactly the manifest at its end. A branch (its files
// resolve through base paths into its parent), a policy with a cut-off
// (it needs each version's commit time, which only the manifest holds),
// and a manifest with base paths or stable row ids are planned from full
// manifests.
//
// What differs from a plan made from every manifest: a replayed removed
// version's Timestamp is its manifest object's modification time (as
// listed), not the commit time inside it, and FromTransaction is set; its
// manifest is not checked for unknown feature flags or corruption (it is
// deleted, never trusted for what is kept).

// errReplayMismatch: the replay of a run differs from the manifest at its
// end, or met something it does not model; the plan is made again from
// every manifest.
var errReplayMismatch = errors.New("the transactions do not replay to the manifest")

// planStats counts what a plan read (for tests and the benchmark).
type planStats struct {
	manifestsRead, manifestBytes int64
	txnsRead, txnBytes           int64
	replayed                     int
	kinds                        map[txnKind]int // replayed operations
	// fellBack: a replay mismatch made the planner read every manifest.
	fellBack bool
	mismatch string
}

// replayable says whether member m is planned from transactions.
func (pl *planner) replayable(m *member) bool {
	return pl.p.FromTransactions && pl.branchWindow(m.branch).olderThan.IsZero() && m.branch == ""
}

// replayMinBytes is how many bytes of removed manifests make planning
// from transactions worth its requests: it lists _transactions/ up front
// and reads a transaction per replayed version, where the manifests it
// spares cost one read each too. Below this the bytes saved are too few to
// matter and the full planner's requests are fewer. A variable for the
// package's tests, which replay small workloads.
var replayMinBytes int64 = 1 << 20

// worthReplaying says whether the removed (unrooted) manifests of m, by
// their listed sizes, are many bytes enough to plan from transactions.
func (pl *planner) worthReplaying(m *member, roots map[uint64][]string) bool {
	var removed int64
	for _, v := range m.versions {
		if len(roots[v.N]) == 0 {
			removed += v.Info.Size
		}
	}
	return removed >= replayMinBytes
}

// decideReplay is decide for a member planned from transactions.
func (pl *planner) decideReplay(ctx context.Context, m *member, roots map[uint64][]string) error {
	vs := m.versions
	w := pl.branchWindow(m.branch)
	n := len(vs)
	keep := make([]bool, n)
	for i, v := range vs {
		keep[i] = len(roots[v.N]) > 0
	}
	names, pairs, err := pl.txnCandidates(ctx, m, keep)
	if err != nil {
		return err
	}
	ops := pl.readTxns(ctx, m, names)
	pl.compactions(ctx, m, pairs, names, ops)
	if err := ctx.Err(); err != nil {
		return pl.refuse(m.ds.Key("_transactions/"), "reading transactions", err)
	}
	full := make([]bool, n)
	for i, v := range vs {
		// A manifest too short to be one is read, to be refused as the
		// full planner refuses it: a write that never finished, or a
		// tombstone, says something is wrong with the history.
		full[i] = keep[i] || i == 0 || ops[i] == nil || v.Info.Size < footerLen+4
	}
	// A run must end at a manifest that its successor's transaction can
	// be replayed onto, else at one of its own.
	for j := n - 1; j >= 1; j-- {
		if full[j] && !full[j-1] && ops[j] == nil {
			full[j-1] = true
		}
	}
	var fullVs []Version
	for i, v := range vs {
		if full[i] {
			fullVs = append(fullVs, v)
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	next := readAhead(ctx, m.ds, fullVs, pl.p.ReadAhead)
	st := newReplay(pl, m, keep)
	// used: the transactions some version accounts for.
	used := map[string]bool{}
	replayed := 0
	for i, v := range vs {
		id := VersionID{m.branch, v.N}
		if !full[i] {
			if err := st.apply(ops[i], names[i], i); err != nil {
				return err
			}
			used[names[i]] = true
			replayed++
			pl.stats.replayed++
			if pl.stats.kinds == nil {
				pl.stats.kinds = map[txnKind]int{}
			}
			pl.stats.kinds[ops[i].kind]++
			pl.plan.Versions = append(pl.plan.Versions, PlannedVersion{Branch: m.branch, Version: v.N, Timestamp: v.Info.ModTime, Rule: w.rule,
				Key: v.Key, Size: v.Info.Size, Reasons: []string{pl.removedReason(w, v.Info.ModTime)}, FromTransaction: true})
			continue
		}
		man, err := next()
		if err != nil {
			return pl.refuse(v.Key, "reading the manifest of "+id.String(), err)
		}
		pl.stats.manifestsRead++
		pl.stats.manifestBytes += man.Size
		used[man.TransactionFile] = true
		if man.Branch != m.branch {
			return pl.refuse(v.Key, fmt.Sprintf("the manifest says it belongs to %s, but it lies under %s; cleanup runs on the main dataset's root",
				branchName(man.Branch), branchName(m.branch)), nil)
		}
		if i > 0 && !full[i-1] {
			// The end of a run: replay this version and compare.
			if man.TransactionFile != names[i] {
				return st.mismatch("%s names transaction %q, the listing gave %q", id, man.TransactionFile, names[i])
			}
			if err := st.apply(ops[i], names[i], i); err != nil {
				return err
			}
			if err := st.check(man); err != nil {
				return err
			}
		}
		if err := st.reset(man, i); err != nil {
			return err
		}
		if i+1 < n && !full[i+1] && (len(man.BasePaths) > 0 || man.ReaderFlags&FeatureStableRowIDs != 0) {
			return st.mismatch("%s has base paths or stable row ids", id)
		}
		pv := PlannedVersion{Branch: m.branch, Version: v.N, Timestamp: man.Timestamp, Key: v.Key, Size: v.Info.Size, Keep: keep[i], Rule: w.rule}
		if pv.Keep {
			pv.Reasons = append([]string(nil), roots[v.N]...)
			pl.kept.Add(man.Files()...)
			if err := pl.needFiles(v.Key, id, man.Files()); err != nil {
				return err
			}
		} else {
			pv.Reasons = []string{pl.removedReason(w, man.Timestamp)}
		}
		pl.plan.Versions = append(pl.plan.Versions, pv)
	}
	if replayed > 0 {
		if err := st.unexplained(used); err != nil {
			return err
		}
	}
	st.finish(n)
	return nil
}

// unexplained refuses the replay when a transaction file no version
// accounts for is young: a commit that was rebased onto a later version
// (its file names an older read version) or one still in flight. Then a
// replayed version may have been given another commit's transaction, and
// a run could still end at the right manifest if a later delete dropped
// the fragment in question; the files that transaction claims would be
// taken for a removed version's and deleted however young. An old one is
// a commit that failed: its files are garbage whatever the plan says.
// Transactions read from the latest version on cannot be given to a
// removed version. Without a safety window the caller guarantees no
// commit is in flight.
func (st *replay) unexplained(used map[string]bool) error {
	pl := st.pl
	if pl.window < 0 {
		return nil
	}
	prefix := st.m.ds.Key("_transactions") + "/"
	latest := st.m.versions[len(st.m.versions)-1].N
	for _, o := range st.m.txns {
		name := strings.TrimPrefix(o.Key, prefix)
		rv, _, ok := txnName(name)
		if !ok || used[name] || rv >= latest {
			continue
		}
		if o.ModTime.IsZero() || !o.ModTime.Before(pl.now.Add(-pl.window)) {
			return st.mismatch("%s is no version's transaction and younger than the %s safety window: perhaps a commit in flight", o.Key, pl.window)
		}
	}
	return nil
}

// txnCandidates lists m's transaction files and names, for each version
// that may need one (a removed version, or a kept one right after a removed
// one), the single file whose read version is the version before; "" when
// there is none, more than one, or a gap in the numbering. pairs[i] holds
// the two files of a possible compaction at versions i and i+1 (see
// compactions).
func (pl *planner) txnCandidates(ctx context.Context, m *member, keep []bool) ([]string, map[int][2]string, error) {
	vs := m.versions
	byRV := map[uint64][]string{}
	prefix := m.ds.Key("_transactions") + "/"
	objs := []storage.Info{}
	if pl.whole != nil {
		// The page of the whole table read _transactions/ before
		// _versions/: a version's own transaction, written just before its
		// manifest, may be missing from it while another commit's of the
		// same read version is not, and the one-file-per-read-version
		// guard below would take that one for it. List it after the
		// versions (cleanup_whole.go).
		delete(m.first, "_transactions")
	}
	if err := pl.listDir(ctx, m, "_transactions", func(o storage.Info) { objs = append(objs, o) }); err != nil {
		return nil, nil, pl.refuse(prefix, "listing "+branchName(m.branch)+"'s transactions", err)
	}
	m.txns = objs
	for _, o := range objs {
		name := strings.TrimPrefix(o.Key, prefix)
		if rv, _, ok := txnName(name); ok {
			byRV[rv] = append(byRV[rv], name)
		}
	}
	names := make([]string, len(vs))
	pairs := map[int][2]string{}
	for i := 1; i < len(vs); i++ {
		if vs[i].N != vs[i-1].N+1 {
			continue
		}
		c := byRV[vs[i].N-1]
		switch {
		case len(c) == 1 && !(keep[i] && keep[i-1]):
			names[i] = c[0]
		case len(c) == 2 && i+1 < len(vs) && vs[i+1].N == vs[i].N+1 && len(byRV[vs[i+1].N-1]) == 0:
			pairs[i] = [2]string{c[0], c[1]}
		}
	}
	return names, pairs, nil
}

// compactions attributes the two commits of a compaction: LanceDB's
// optimize reserves fragment ids (ReserveFragments, version N) and then
// commits the Rewrite rebased onto it, which keeps its read version N-1,
// so two files name N-1 and none N. When they are exactly one
// ReserveFragments and one Rewrite, they are N's and N+1's in that order.
// Like every attribution it is checked: the run must replay to the
// manifest at its end, and no young transaction may be left over.
func (pl *planner) compactions(ctx context.Context, m *member, pairs map[int][2]string, names []string, ops []*txnOp) {
	for i, pair := range pairs {
		var reserve, rewrite *txnOp
		var rn, wn string
		for _, name := range pair {
			op, nb, err := m.ds.readTxn(ctx, name)
			pl.stats.txnsRead++
			pl.stats.txnBytes += nb
			switch {
			case err != nil:
			case op.kind == txnReserveFragments && reserve == nil:
				reserve, rn = op, name
			case op.kind == txnRewrite && rewrite == nil:
				rewrite, wn = op, name
			}
		}
		if reserve != nil && rewrite != nil {
			names[i], ops[i] = rn, reserve
			names[i+1], ops[i+1] = wn, rewrite
		}
	}
}

// readTxns reads the named transactions in batches (Store.GetMany: one
// request a batch through a plugin whose driver reads batches, the
// store's parallelism of single reads otherwise); one that cannot be read
// or is not modelled is nil (its version's manifest is read instead).
func (pl *planner) readTxns(ctx context.Context, m *member, names []string) []*txnOp {
	ops := make([]*txnOp, len(names))
	var idx []int
	var keys []string
	for i, name := range names {
		if _, _, ok := txnName(name); ok {
			idx = append(idx, i)
			keys = append(keys, m.ds.Key("_transactions/"+name))
		}
	}
	// A few batches side by side: each is one request, and through a
	// plugin the batches of one table would otherwise wait on each other.
	var reads, bytes atomic.Int64
	batches := (len(keys) + txnBatch - 1) / txnBatch
	_ = fanout.Each(ctx, min(txnBatchesAtOnce, m.ds.Store.Parallelism()), batches, func(ctx context.Context, b int) error {
		lo := b * txnBatch
		hi := min(lo+txnBatch, len(keys))
		res, _ := m.ds.Store.GetMany(ctx, keys[lo:hi])
		for j, r := range res {
			if r.Key == "" {
				continue // not answered before the call failed: read as a manifest
			}
			reads.Add(1)
			if r.Err != nil {
				continue
			}
			i := idx[lo+j]
			rv, uuid, _ := txnName(names[i])
			op, nb, perr := parseTxnFile(r.Key, rv, uuid, r.Data)
			bytes.Add(nb)
			if perr == nil {
				ops[i] = op
			}
		}
		return nil
	})
	pl.stats.txnsRead += reads.Load()
	pl.stats.txnBytes += bytes.Load()
	return ops
}

// txnBatchesAtOnce bounds the transaction batches of one table in flight.
const txnBatchesAtOnce = 4

// txnBatch is how many transactions one GetMany asks for: small files,
// so a batch holds at most a few MB.
const txnBatch = 128
