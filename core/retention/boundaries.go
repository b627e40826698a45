package retention

import (
	"encoding/json"
	"fmt"
	"sort"

	"github.com/retain-dev/retain/core/checkpoint/registry"
)

// setGCBoundaries records rows on draft as one registry.SetGCBoundary per
// row would (a row replaces the one of the same table id; rows sorted by
// table id), in time linear in the rows. SetGCBoundary decodes and
// re-encodes every row already on the draft, so a run publishing a
// boundary per table paid the square of the store's tables (4 s of CPU at
// 1,000 tables, before any deletion). Each row is validated by
// SetGCBoundary itself, on a scratch draft holding only that row.
func setGCBoundaries(draft *registry.Snapshot, rows []registry.GCBoundary) error {
	if len(rows) == 0 {
		return nil
	}
	scratch := registry.Empty().Next()
	fresh := make(map[registry.ID]json.RawMessage, len(rows))
	for _, g := range rows {
		scratch.GCBoundary = nil
		if err := scratch.SetGCBoundary(g); err != nil {
			return err
		}
		if len(scratch.GCBoundary) != 1 {
			return fmt.Errorf("gc boundary of %s: recorded as %d rows", g.Path, len(scratch.GCBoundary))
		}
		fresh[g.TableID] = scratch.GCBoundary[0]
	}
	old, err := draft.GCBoundaries()
	if err != nil {
		// The draft's own rows do not decode: SetGCBoundary refuses that,
		// with its words.
		return draft.SetGCBoundary(rows[0])
	}
	type keyed struct {
		id  registry.ID
		raw json.RawMessage
	}
	out := make([]keyed, 0, len(old)+len(fresh))
	for i, g := range old {
		if _, ok := fresh[g.TableID]; !ok {
			out = append(out, keyed{g.TableID, draft.GCBoundary[i]})
		}
	}
	for id, raw := range fresh {
		out = append(out, keyed{id, raw})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	raws := make([]json.RawMessage, len(out))
	for i, k := range out {
		raws[i] = k.raw
	}
	draft.GCBoundary = raws
	return nil
}
