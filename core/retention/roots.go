package retention

import (
	"context"
	"fmt"
	"sort"

	"github.com/retain-dev/retain/core/checkpoint"
	"github.com/retain-dev/retain/core/checkpoint/registry"
	"github.com/retain-dev/retain/core/internal/fanout"
	"github.com/retain-dev/retain/core/lance"
	"github.com/retain-dev/retain/core/storage"
)

// RootSet is what root planning resolved for a store: the live checkpoints
// and, per table, the versions they pin, each confirmed to exist and to be
// the commit its checkpoint names. Per-table planning (lance.PlanCleanup)
// adds what each table keeps by itself (branch heads, tags, fork points,
// the window).
type RootSet struct {
	// RegistryVersion is the registry head the checkpoints were read from.
	RegistryVersion uint64
	// Checkpoints are the live checkpoints, in registry order.
	Checkpoints []Checkpoint
	// Tables are the store's tables (checkpoint.DiscoverTables), sorted by
	// path, every one of them, pinned or not.
	Tables []TableRoots
	// snap is the registry head read.
	snap *registry.Snapshot
}

// TableRoots is one table's extra roots.
type TableRoots struct {
	// Table is the table folder at the top of the store ("t.lance").
	Table   string
	Dataset *lance.Dataset
	// Extra are the versions live checkpoints pin, with the reason
	// "checkpoint <name> (<id>)", in registry order; nil when none.
	Extra []lance.Root
	// Skipped says why the table is left out (its roots unresolved, not
	// planned); "" for a resolved table.
	Skipped string
}

// root is one checkpoint pin of a table.
type root struct {
	row  registry.Row
	name string
}

// ResolveRoots is root planning, the part of Preview (and so of Run) that
// comes before any table is planned: it reads the registry head, discovers
// the tables, opens each and confirms every pin of every live checkpoint
// with checkPin. It reads only: on a store with ordered listing, one
// listing and one get for the registry head, one get per pin, and table
// discovery (checkpoint.DiscoverTables: at most one listing request per
// top-level entry of the store plus one, fewer while small tables share a
// listing page). No request depends on how many versions a table has
// beyond that bound (docs/performance.md, "Cleanup planning cost"). Any
// root it cannot resolve refuses the whole store with a *RefusedError: a
// registry it cannot read, a checkpoint pinning a table that no longer
// exists, a pinned version that is missing or is another commit.
func ResolveRoots(ctx context.Context, s *storage.Store) (*RootSet, error) {
	return resolveRoots(ctx, s, nil, nil)
}

// resolveRoots is ResolveRoots leaving out the tables of skip (table →
// why): their roots are not resolved and they are not planned, so a table
// reconcile could not settle costs only itself (Policy.Skip). verifiedBy,
// when it gives a check for the registry version read, names the pinned
// commits already confirmed at that version (Policy.verified): they are
// not read again.
func resolveRoots(ctx context.Context, s *storage.Store, skip map[string]string, verifiedBy func(uint64) func(registry.Row) bool) (*RootSet, error) {
	return resolveRootsFrom(ctx, s, skip, verifiedBy, nil, nil)
}

// resolveRootsFrom is resolveRoots given, when head is not nil, the
// registry head and the store's tables as read already under the same
// claim (Run's reconcile): they are not read again.
func resolveRootsFrom(ctx context.Context, s *storage.Store, skip map[string]string, verifiedBy func(uint64) func(registry.Row) bool,
	head *registry.Snapshot, known []string) (*RootSet, error) {
	var tables []string
	var discErr error
	var rv registry.Version
	var snap *registry.Snapshot
	var err error
	if head != nil {
		rv, snap, tables = head.Version, head, known
	} else {
		// The tables are discovered while the registry head is read.
		discovered := make(chan struct{})
		go func() {
			defer close(discovered)
			tables, discErr = checkpoint.DiscoverTables(ctx, s)
		}()
		// The registry: live checkpoints and their rows.
		rv, snap, err = registry.Open(s, registry.Options{}).Head(ctx)
		<-discovered
	}
	if err != nil {
		return nil, &RefusedError{Key: registry.RegistryPath, Reason: "reading the checkpoint registry head", Cause: err}
	}
	rs := &RootSet{RegistryVersion: uint64(rv), Checkpoints: []Checkpoint{}, Tables: []TableRoots{}, snap: snap}
	var verified func(registry.Row) bool
	if verifiedBy != nil {
		verified = verifiedBy(uint64(rv))
	}
	pins := map[string][]root{} // by table path
	for _, c := range snap.Live() {
		rs.Checkpoints = append(rs.Checkpoints, Checkpoint{Name: c.Name, ID: string(c.ID), Pins: len(c.Rows)})
		for _, r := range c.Rows {
			pins[r.Path] = append(pins[r.Path], root{row: r, name: c.Name})
		}
	}

	if discErr != nil {
		return nil, &RefusedError{Reason: "discovering the store's tables", Cause: discErr}
	}
	found := map[string]bool{}
	for _, t := range tables {
		found[t] = true
	}
	var missing []string
	for path := range pins {
		if !found[path] && skip[path] == "" {
			missing = append(missing, path)
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		r := pins[missing[0]][0]
		return nil, &RefusedError{Table: missing[0], Key: missing[0] + "/",
			Reason: fmt.Sprintf("checkpoint %s (%s) pins %s v%d of a table that no longer exists: restore it from a backup, or give the pin up with `%s`",
				r.name, r.row.CheckpointID, r.row.Branch, r.row.Version, checkpoint.DropLostCommand(r.row.CheckpointID, r.row.Path))}
	}

	// Resolve every root before any table is planned; the tables side by
	// side, the first refusal in table order reported.
	trs, err := fanout.Map(ctx, s.Parallelism(), len(tables), func(ctx context.Context, i int) (TableRoots, error) {
		return tableRoots(ctx, s, tables[i], skip[tables[i]], pins[tables[i]], verified)
	})
	if err != nil {
		return nil, err
	}
	rs.Tables = append(rs.Tables, trs...)
	return rs, nil
}

// tableRoots resolves one table's roots: every version a live checkpoint
// pins, each distinct pinned version checked once (the cost grows with
// distinct pinned versions, not with checkpoints). A pin verified (not
// nil) reports confirmed already is not read again.
func tableRoots(ctx context.Context, s *storage.Store, t, skipped string, pins []root, verified func(registry.Row) bool) (TableRoots, error) {
	if skipped != "" {
		return TableRoots{Table: t, Skipped: skipped}, nil
	}
	ds, err := lance.Open(s, t)
	if err != nil {
		return TableRoots{}, &RefusedError{Table: t, Key: t + "/", Reason: "opening the table", Cause: err}
	}
	tr := TableRoots{Table: t, Dataset: ds}
	checked := map[string]bool{}
	for _, r := range pins {
		if k := r.row.Branch + "\x00" + r.row.PhysicalRef; !checked[k] && (verified == nil || !verified(r.row)) {
			if err := checkPin(ctx, ds, r); err != nil {
				return TableRoots{}, err
			}
			checked[k] = true
		}
		tr.Extra = append(tr.Extra, lance.Root{Branch: r.row.Branch, Version: r.row.Version,
			Reason: fmt.Sprintf("checkpoint %s (%s)", r.name, r.row.CheckpointID)})
	}
	return tr, nil
}
