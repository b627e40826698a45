package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/retain-dev/retain/core/checkpoint/registry"
	"github.com/retain-dev/retain/core/lance"
	"github.com/retain-dev/retain/core/storage"
)

// TableSuffix ends the folder name of every LanceDB table.
const TableSuffix = ".lance"

// MaxTables bounds discovery: a store root with more top-level entries is
// refused (storage.ErrLimitExceeded) rather than listed without end.
var MaxTables = 10_000

// DiscoverTables names the LanceDB tables at the top of the store: the
// folders "<table>.lance/" of the root, sorted. It lists one level of the
// root (storage.ListOptions.Delimiter): a request per 1,000 top-level entries
// where the adapter lists with a delimiter, a request per entry where it
// does not (the Store's skip-scan), never one per object inside a table. A
// store without ordered listing falls back to one full listing. More than MaxTables
// top-level entries is storage.ErrLimitExceeded. Folders ending in .lance
// that hold no manifest (a table being created or half deleted) are
// returned too; Capture skips them.
func DiscoverTables(ctx context.Context, s *storage.Store) ([]string, error) {
	seen := map[string]bool{}
	var out []string
	entries := 0
	add := func(key string) bool {
		first, _, ok := strings.Cut(key, "/")
		if !ok || seen[first] {
			return ok
		}
		seen[first] = true
		entries++
		if strings.HasSuffix(first, TableSuffix) && first != TableSuffix {
			out = append(out, first)
		}
		return true
	}
	if !s.Capabilities().OrderedList {
		objs, err := s.List(ctx, "", 0)
		if err != nil {
			return nil, err
		}
		for _, o := range objs {
			add(o.Key)
		}
	} else {
		// One level of the store's root: a page of folders per request
		// where the adapter lists with a delimiter, one folder per request
		// (the Store's skip-scan) where it does not.
		opts := storage.ListOptions{Delimiter: storage.Delimiter}
		for {
			page, err := s.ListPage(ctx, opts)
			if err != nil {
				return nil, err
			}
			for _, o := range page.Objects {
				add(o.Key)
			}
			for _, f := range page.Folders {
				add(f)
			}
			if entries > MaxTables || !page.More {
				break
			}
			if page.Last() == "" { // the Store refuses such a page; never stop short
				return nil, storage.Errorf("discover", "", storage.ErrUnknown, "listing the store root returned an empty page that claims more")
			}
			opts.StartAfter = page.Last()
		}
	}
	if entries > MaxTables {
		return nil, storage.Errorf("discover", "", storage.ErrLimitExceeded, "more than %d top-level entries in the store root: retain discovers tables only at the top of a LanceDB database directory", MaxTables)
	}
	sort.Strings(out)
	return out, nil
}

// catalogIndex is a snapshot's gc boundaries and rows by table id, decoded
// once: looking a table up in it costs the same however many tables and
// rows the registry holds (capture asks for every table of the store).
type catalogIndex struct {
	bounds    map[registry.ID][]registry.GCBoundary
	boundsErr error
	rows      map[registry.ID][]*registry.Row
}

func newCatalogIndex(snap *registry.Snapshot) *catalogIndex {
	c := &catalogIndex{bounds: map[registry.ID][]registry.GCBoundary{}, rows: map[registry.ID][]*registry.Row{}}
	var rows []registry.GCBoundary
	if rows, c.boundsErr = snap.GCBoundaries(); c.boundsErr == nil {
		for _, g := range rows {
			c.bounds[g.TableID] = append(c.bounds[g.TableID], g)
		}
	}
	for i := range snap.Rows {
		r := &snap.Rows[i]
		c.rows[r.TableID] = append(c.rows[r.TableID], r)
	}
	return c
}

// mainHead is what capture already read of a table's main head: its
// version and that version's physical ref. Given to incarnationChanged, it
// spares the reads it would repeat.
type mainHead struct {
	v   lance.Version
	ref lance.PhysRef
}

// Incarnation rule. A catalogued table is the same incarnation while the
// newest version any row of its current incarnation pins (on main when
// there is one, else on the row's branch) is still the same commit:
//
//   - the row's version, under whichever manifest name it has now, holds
//     the same commit (lance.PhysRef.Matches: the manifest's digest, or for
//     a format-1 token its timestamp and transaction uuid) → same
//     incarnation, even after a copy or Lance's manifest rename;
//   - it holds another commit → the table was deleted and recreated at the
//     path: a new incarnation;
//   - it is gone and the branch's newest version is below the row's
//     version → the versions restarted: a new incarnation;
//   - it is gone and the branch went on past it → same incarnation (cleanup
//     removed a version nothing pins any more).
//
// A table with no row in its current incarnation has nothing that could
// be confused with a recreation, and keeps its incarnation: a checkpoint
// taken now pins its current commit, which is what the next check
// compares against.
//
// head, when not nil, is main's head as just read.
func (c *catalogIndex) incarnationChanged(ctx context.Context, t registry.Table, ds *lance.Dataset, head *mainHead) (bool, string, error) {
	// A cleanup never removes a branch's latest version, so after a gc
	// boundary the main head is always newer than the newest version it
	// removed. A head at or below it is another table at the same path:
	// recreated (with or without checkpoint rows to compare against).
	if c.boundsErr == nil {
		for _, g := range c.bounds[t.ID] {
			if g.Incarnation != t.Incarnation {
				continue
			}
			for _, nr := range g.NewestRemoved {
				if nr.Branch != registry.MainBranch {
					continue
				}
				var n uint64
				if head != nil {
					n = head.v.N
				} else {
					h, err := ds.Latest(ctx)
					if err != nil {
						return false, "", err
					}
					n = h.N
				}
				if n <= nr.Version {
					return true, fmt.Sprintf("main's head v%d is at or below v%d, which cleanup %s removed: the table was recreated", n, nr.Version, g.OperationID), nil
				}
			}
		}
	}
	var best *registry.Row
	for _, r := range c.rows[t.ID] {
		if r.Incarnation != t.Incarnation {
			continue
		}
		switch {
		case best == nil:
			best = r
		case (r.Branch == registry.MainBranch) != (best.Branch == registry.MainBranch):
			if r.Branch == registry.MainBranch {
				best = r
			}
		case r.Version > best.Version:
			best = r
		}
	}
	if best == nil {
		return false, "", nil
	}
	ref, err := lance.ParsePhysRef(best.PhysicalRef)
	if err != nil {
		return false, "", err
	}
	if head != nil && best.Branch == registry.MainBranch && best.Version == head.v.N && ref.Matches(head.ref) {
		return false, "", nil // the pinned version is the head just read: the same commit
	}
	bds := ds
	if best.Branch != registry.MainBranch {
		if bds, err = ds.Branch(best.Branch); err != nil {
			return false, "", err
		}
	}
	_, err = bds.VerifyPhysRef(ctx, ref)
	switch {
	case errors.Is(err, storage.ErrNotFound):
		latest, lerr := bds.Latest(ctx)
		if errors.Is(lerr, lance.ErrNotDataset) || errors.Is(lerr, storage.ErrNotFound) {
			if best.Branch != registry.MainBranch {
				return false, "", nil // the branch is gone; main decides nothing here
			}
			return true, "the table has no version any more", nil
		}
		if lerr != nil {
			return false, "", lerr
		}
		if latest.N < ref.Version {
			return true, "its versions restarted below a pinned version", nil
		}
		return false, "", nil
	case errors.Is(err, lance.ErrPhysRefMismatch):
		return true, "a pinned version is now another commit", nil
	case err != nil:
		return false, "", err
	}
	return false, "", nil
}
