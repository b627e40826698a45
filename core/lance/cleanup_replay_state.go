package lance

// The replay's state: which files each kept version's transactions account for.

import (
	"fmt"
	"sort"
)

// replay is the files of the version being walked, kept as Lance's
// manifest holds them, and when each file entered: a file's references by
// removed versions are counted when it leaves (or at the end), from the
// interval of versions it was in.
type replay struct {
	pl    *planner
	m     *member
	frags map[uint64][]string
	idx   map[string]replayIndex
	txn   string
	hw    int64 // max_fragment_id; -1: none
	bases []BasePath
	live  map[string]*liveKey
	// removedBefore[i]: removed versions among the first i; nextRemoved[i]:
	// the first removed at or after i (n: none); prevRemoved[i]: the last
	// removed at or before i (-1: none).
	removedBefore, nextRemoved, prevRemoved []int
}

type replayIndex struct {
	name   string
	baseID *uint32
	key    string
}

type liveKey struct{ n, since int }

func newReplay(pl *planner, m *member, keep []bool) *replay {
	n := len(keep)
	st := &replay{pl: pl, m: m, frags: map[uint64][]string{}, idx: map[string]replayIndex{}, hw: -1, live: map[string]*liveKey{},
		removedBefore: make([]int, n+1), nextRemoved: make([]int, n+1), prevRemoved: make([]int, n)}
	for i, k := range keep {
		st.removedBefore[i+1] = st.removedBefore[i]
		if !k {
			st.removedBefore[i+1]++
		}
	}
	st.nextRemoved[n] = n
	for i := n - 1; i >= 0; i-- {
		st.nextRemoved[i] = st.nextRemoved[i+1]
		if !keep[i] {
			st.nextRemoved[i] = i
		}
	}
	last := -1
	for i, k := range keep {
		if !k {
			last = i
		}
		st.prevRemoved[i] = last
	}
	return st
}

func (st *replay) mismatch(format string, args ...any) error {
	st.pl.stats.mismatch = fmt.Sprintf(format, args...)
	return errReplayMismatch
}

func (st *replay) enter(key string, i int) {
	if lk := st.live[key]; lk != nil {
		lk.n++
		return
	}
	st.live[key] = &liveKey{n: 1, since: i}
}

func (st *replay) leave(key string, i int) {
	lk := st.live[key]
	if lk == nil {
		return
	}
	if lk.n--; lk.n > 0 {
		return
	}
	delete(st.live, key)
	st.count(key, lk.since, i)
}

// count records that key was referenced by versions [from, to).
func (st *replay) count(key string, from, to int) {
	c := st.removedBefore[to] - st.removedBefore[from]
	if c == 0 {
		return
	}
	vs := st.m.versions
	r := st.pl.removed[key]
	if r == nil {
		r = &RemovedRefs{First: VersionID{st.m.branch, vs[st.nextRemoved[from]].N}}
		st.pl.removed[key] = r
	}
	r.Count += c
	r.Last = VersionID{st.m.branch, vs[st.prevRemoved[to-1]].N}
}

func (st *replay) finish(n int) {
	keys := make([]string, 0, len(st.live))
	for k := range st.live {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		st.count(k, st.live[k].since, n)
	}
	st.live = nil
}

// fragKeys resolves a fragment's files as the manifest would.
func (st *replay) fragKeys(fr Fragment) ([]string, error) {
	refs, err := st.m.ds.resolveFiles(&Manifest{Fragments: []Fragment{fr}, BasePaths: st.bases})
	if err != nil {
		return nil, err
	}
	keys := make([]string, 0, len(refs))
	for _, r := range refs {
		if !r.Outside {
			keys = append(keys, r.Key)
		}
	}
	return keys, nil
}

// indexKey is an index's folder: removed versions reference an index by
// it (sweep looks an index file up by its folder).
func (st *replay) indexKey(ix Index) (string, error) {
	refs, err := st.m.ds.resolveFiles(&Manifest{Indexes: []Index{{UUID: ix.UUID, BaseID: ix.BaseID}}, BasePaths: st.bases})
	if err != nil {
		return "", err
	}
	for _, r := range refs {
		if r.Prefix && !r.Outside {
			return r.Key, nil
		}
	}
	return "", nil
}

func (st *replay) txnKey(name string) string {
	if name == "" {
		return ""
	}
	return st.m.ds.Key("_transactions/" + name)
}

// state is one version's files as the replay keeps them.
type replayState struct {
	frags map[uint64][]string
	idx   map[string]replayIndex
	txn   string
	hw    int64
}

// stateOf reads a manifest into replay form.
func (st *replay) stateOf(man *Manifest) (*replayState, error) {
	s := &replayState{frags: make(map[uint64][]string, len(man.Fragments)), idx: map[string]replayIndex{}, hw: -1,
		txn: st.txnKey(man.TransactionFile)}
	saved := st.bases
	st.bases = man.BasePaths
	defer func() { st.bases = saved }()
	for _, fr := range man.Fragments {
		if _, dup := s.frags[fr.ID]; dup {
			return nil, st.mismatch("%s lists fragment %d twice", man.Key, fr.ID)
		}
		k, err := st.fragKeys(fr)
		if err != nil {
			return nil, err
		}
		s.frags[fr.ID] = k
		s.hw = max(s.hw, int64(fr.ID))
	}
	if man.maxFragmentID != nil {
		s.hw = int64(*man.maxFragmentID)
	}
	for _, ix := range man.Indexes {
		k, err := st.indexKey(ix)
		if err != nil {
			return nil, err
		}
		s.idx[ix.UUID] = replayIndex{name: ix.Name, baseID: ix.BaseID, key: k}
	}
	return s, nil
}

// check compares the replayed state with man.
func (st *replay) check(man *Manifest) error {
	s, err := st.stateOf(man)
	if err != nil {
		return err
	}
	if s.txn != st.txn {
		return st.mismatch("%s: transaction %q, replayed %q", man.Key, s.txn, st.txn)
	}
	if len(s.frags) != len(st.frags) || len(s.idx) != len(st.idx) {
		return st.mismatch("%s: %d fragments and %d indices, replayed %d and %d", man.Key, len(s.frags), len(s.idx), len(st.frags), len(st.idx))
	}
	for id, keys := range s.frags {
		got, ok := st.frags[id]
		if !ok || !sameKeys(keys, got) {
			return st.mismatch("%s: fragment %d has %v, replayed %v", man.Key, id, keys, got)
		}
	}
	for u, ix := range s.idx {
		if got, ok := st.idx[u]; !ok || got.key != ix.key {
			return st.mismatch("%s: index %s not replayed", man.Key, u)
		}
	}
	if man.maxFragmentID != nil && s.hw != st.hw {
		return st.mismatch("%s: max fragment id %d, replayed %d", man.Key, s.hw, st.hw)
	}
	return nil
}

func sameKeys(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	a, b = append([]string(nil), a...), append([]string(nil), b...)
	sort.Strings(a)
	sort.Strings(b)
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// reset makes man's files the state at version i.
func (st *replay) reset(man *Manifest, i int) error {
	s, err := st.stateOf(man)
	if err != nil {
		return err
	}
	// Enter the new before leaving the old: a file in both stays open.
	for _, keys := range s.frags {
		for _, k := range keys {
			st.enter(k, i)
		}
	}
	for _, ix := range s.idx {
		st.enter(ix.key, i)
	}
	if s.txn != "" {
		st.enter(s.txn, i)
	}
	st.clear(i)
	st.frags, st.idx, st.txn, st.hw, st.bases = s.frags, s.idx, s.txn, s.hw, man.BasePaths
	return nil
}

// clear leaves every file of the current state at version i.
func (st *replay) clear(i int) {
	for _, keys := range st.frags {
		for _, k := range keys {
			st.leave(k, i)
		}
	}
	for _, ix := range st.idx {
		st.leave(ix.key, i)
	}
	if st.txn != "" {
		st.leave(st.txn, i)
	}
}

func (st *replay) addFrag(fr Fragment, i int) error {
	if _, dup := st.frags[fr.ID]; dup {
		return st.mismatch("fragment %d added twice", fr.ID)
	}
	keys, err := st.fragKeys(fr)
	if err != nil {
		return st.mismatch("fragment %d: %v", fr.ID, err)
	}
	for _, k := range keys {
		st.enter(k, i)
	}
	st.frags[fr.ID] = keys
	st.hw = max(st.hw, int64(fr.ID))
	return nil
}

func (st *replay) dropFrag(id uint64, i int) bool {
	keys, ok := st.frags[id]
	if !ok {
		return false
	}
	for _, k := range keys {
		st.leave(k, i)
	}
	delete(st.frags, id)
	return true
}

func (st *replay) dropIndex(u string, i int) {
	if ix, ok := st.idx[u]; ok {
		st.leave(ix.key, i)
		delete(st.idx, u)
	}
}

// apply replays op, the transaction (file name) of version i.
func (st *replay) apply(op *txnOp, name string, i int) error {
	if op == nil {
		return st.mismatch("version index %d has no transaction", i)
	}
	// Ids Lance assigns at commit: from the high-water mark on.
	next := uint64(st.hw + 1)
	assign := func(frs []Fragment) []Fragment {
		out := make([]Fragment, len(frs))
		for j, fr := range frs {
			if fr.ID == 0 {
				fr.ID = next
				next++
			}
			out[j] = fr
		}
		return out
	}
	// Leave the old transaction file after the new entered.
	nk := st.txnKey(name)
	st.enter(nk, i)
	if st.txn != "" {
		st.leave(st.txn, i)
	}
	st.txn = nk
	replace := func(updated []Fragment) error {
		for _, fr := range updated {
			if _, ok := st.frags[fr.ID]; !ok {
				continue // as Lance: only existing fragments are replaced
			}
			keys, err := st.fragKeys(fr)
			if err != nil {
				return st.mismatch("fragment %d: %v", fr.ID, err)
			}
			for _, k := range keys {
				st.enter(k, i)
			}
			st.dropFrag(fr.ID, i)
			st.frags[fr.ID] = keys
		}
		return nil
	}
	switch op.kind {
	case txnAppend:
		for _, fr := range assign(op.newFrags) {
			if err := st.addFrag(fr, i); err != nil {
				return err
			}
		}
	case txnDelete:
		for _, id := range op.removedIDs {
			st.dropFrag(id, i)
		}
		if err := replace(op.updated); err != nil {
			return err
		}
	case txnUpdate:
		for _, id := range op.removedIDs {
			st.dropFrag(id, i)
		}
		if err := replace(op.updated); err != nil {
			return err
		}
		for _, fr := range assign(op.newFrags) {
			if err := st.addFrag(fr, i); err != nil {
				return err
			}
		}
	case txnRewrite:
		for _, g := range op.groups {
			for _, id := range g.oldIDs {
				if !st.dropFrag(id, i) {
					return st.mismatch("a rewrite replaces fragment %d, which the replay does not have", id)
				}
			}
			for _, fr := range assign(g.frags) {
				if err := st.addFrag(fr, i); err != nil {
					return err
				}
			}
		}
		for _, r := range op.renamed {
			ix, ok := st.idx[r[0]]
			if !ok {
				return st.mismatch("a rewrite renames index %s, which the replay does not have", r[0])
			}
			k, err := st.indexKey(Index{UUID: r[1], BaseID: ix.baseID})
			if err != nil {
				return st.mismatch("index %s: %v", r[1], err)
			}
			st.enter(k, i)
			st.dropIndex(r[0], i)
			st.idx[r[1]] = replayIndex{name: ix.name, baseID: ix.baseID, key: k}
		}
	case txnCreateIndex:
		// Lance 12 drops the indices the transaction lists as removed,
		// and keeps others of the same name (an index optimisation adds
		// a delta beside the old one; older Lance dropped by name: a
		// replay that keeps too much fails the check at the run's end).
		removed := map[string]bool{}
		for _, ix := range op.removedIndexes {
			removed[ix.UUID] = true
		}
		for _, ix := range op.newIndexes {
			removed[ix.UUID] = true
		}
		var add []replayIndex
		for _, ix := range op.newIndexes {
			k, err := st.indexKey(ix)
			if err != nil {
				return st.mismatch("index %s: %v", ix.UUID, err)
			}
			st.enter(k, i)
			add = append(add, replayIndex{name: ix.Name, key: k})
		}
		for u := range st.idx {
			if removed[u] {
				st.dropIndex(u, i)
			}
		}
		for j, ix := range op.newIndexes {
			if _, dup := st.idx[ix.UUID]; dup {
				return st.mismatch("index %s added twice", ix.UUID)
			}
			st.idx[ix.UUID] = add[j]
		}
	case txnReserveFragments:
		st.hw = max(st.hw, 0) + int64(op.reserve)
	case txnUpdateConfig:
	default:
		return st.mismatch("operation %d", op.kind)
	}
	return nil
}
