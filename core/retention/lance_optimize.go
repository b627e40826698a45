package retention

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/retain-dev/retain/core/checkpoint"
	"github.com/retain-dev/retain/core/checkpoint/registry"
	"github.com/retain-dev/retain/core/lance"
	"github.com/retain-dev/retain/core/storage"
)

// LanceOptimizeCutoff is the cleanup cut-off LanceDB's optimize() uses when
// called without cleanupOlderThan. Its prune step refuses with "N tagged
// version(s) have been marked for cleanup" once a tagged version (a retain
// pin) was committed before the cut-off; by then compaction has committed
// and index optimisation never runs.
const LanceOptimizeCutoff = 7 * 24 * time.Hour

// LanceOptimizeCall is the LanceDB (Node, 0.39) call that still compacts
// and optimises indexes but removes no version: a cut-off at the epoch,
// before every commit, leaves prune nothing to consider.
const LanceOptimizeCall = "optimize({cleanupOlderThan: new Date(0)})"

// LancePin is one live checkpoint's pin on a table.
type LancePin struct {
	Checkpoint string `json:"checkpoint"`
	Branch     string `json:"branch"`
	Version    uint64 `json:"version"`
	// CommittedAt is the pinned version's commit time: what Lance compares
	// with its cut-off (not when the checkpoint was taken). Nil when the
	// manifest could not be read (Error says why).
	CommittedAt *time.Time `json:"committed_at,omitempty"`
}

// LanceCleanupHazard is one table whose own Lance cleanup trips over
// retain's pins, with when and the fix.
type LanceCleanupHazard struct {
	Table string     `json:"table"`
	Pins  []LancePin `json:"pins"`
	// OptimizeThrowsFrom is when optimize() with its default cut-off
	// starts to throw: the oldest pinned commit plus LanceOptimizeCutoff.
	OptimizeThrowsFrom *time.Time `json:"optimize_default_throws_from,omitempty"`
	// AutoCleanup is the main branch's lance.auto_cleanup config, if set;
	// AutoCleanupStallsFrom is when it starts removing nothing (the oldest
	// pinned commit plus its older_than), nil when that cannot be told.
	AutoCleanup           *lance.AutoCleanup `json:"auto_cleanup,omitempty"`
	AutoCleanupStallsFrom *time.Time         `json:"auto_cleanup_stalls_from,omitempty"`
	// Error is what could not be read; the pins still make the hazard.
	Error string `json:"error,omitempty"`
	// Warnings are the sentences `retain status` prints, each with its fix.
	Warnings []string `json:"warnings"`
}

// LanceCleanupHazards reports, per table that live checkpoints pin, how
// LanceDB's optimize() and Lance's auto-cleanup config collide with the
// pins. It never fails as a whole: what it cannot read goes in the
// table's Error, and the warning stands (the pin tag is what Lance trips
// over, however old).
func LanceCleanupHazards(ctx context.Context, s *storage.Store, infos []checkpoint.Info) []LanceCleanupHazard {
	byTable := map[string]*LanceCleanupHazard{}
	for _, in := range infos {
		if in.State != registry.Live {
			continue
		}
		for _, p := range in.Pins {
			// A missing tag is no tag for Lance to trip over.
			if p.Kind != "table" || p.Status == checkpoint.PinMissing {
				continue
			}
			h := byTable[p.Path]
			if h == nil {
				h = &LanceCleanupHazard{Table: p.Path}
				byTable[p.Path] = h
			}
			h.Pins = append(h.Pins, LancePin{Checkpoint: in.Name, Branch: p.Branch, Version: p.Version})
		}
	}
	out := make([]LanceCleanupHazard, 0, len(byTable))
	for _, h := range byTable {
		h.inspect(ctx, s)
		out = append(out, *h)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Table < out[j].Table })
	return out
}

func (h *LanceCleanupHazard) inspect(ctx context.Context, s *storage.Store) {
	var errs []string
	ds, err := lance.Open(s, h.Table)
	if err != nil {
		errs = append(errs, err.Error())
	}
	var oldest *LancePin
	// Checkpoints often share a version: read each manifest once.
	type bv struct {
		b string
		v uint64
	}
	seen := map[bv]*time.Time{}
	for i := range h.Pins {
		p := &h.Pins[i]
		if ds == nil {
			break
		}
		k := bv{p.Branch, p.Version}
		at, ok := seen[k]
		if !ok {
			t, err := commitTime(ctx, ds, p.Branch, p.Version)
			if err != nil {
				errs = append(errs, err.Error())
			} else {
				at = &t
			}
			seen[k] = at
		}
		if at == nil {
			continue
		}
		p.CommittedAt = at
		if oldest == nil || at.Before(*oldest.CommittedAt) {
			o := *p // a copy: the sort below moves the pins
			oldest = &o
		}
	}
	sort.Slice(h.Pins, func(i, j int) bool {
		a, b := h.Pins[i], h.Pins[j]
		if (a.CommittedAt == nil) != (b.CommittedAt == nil) {
			return a.CommittedAt != nil
		}
		if a.CommittedAt != nil && !a.CommittedAt.Equal(*b.CommittedAt) {
			return a.CommittedAt.Before(*b.CommittedAt)
		}
		return a.Version < b.Version
	})
	if ds != nil {
		if v, err := ds.Latest(ctx); err != nil {
			errs = append(errs, err.Error())
		} else if cfg, err := ds.ReadConfig(ctx, v); err != nil {
			errs = append(errs, err.Error())
		} else {
			h.AutoCleanup = lance.AutoCleanupOf(cfg)
		}
	}
	h.Error = strings.Join(errs, "; ")

	pinned := h.pinList()
	when := "once a pinned version is more than 7 days old"
	if oldest != nil {
		t := oldest.CommittedAt.Add(LanceOptimizeCutoff)
		h.OptimizeThrowsFrom = &t
		when = "from " + t.UTC().Format(time.RFC3339) + " (7 days after " + pinLabel(*oldest) + " was committed)"
	}
	h.Warnings = append(h.Warnings, fmt.Sprintf(
		"retain pins %s; LanceDB optimize() with its default 7-day cut-off throws \"tagged version(s) have been marked for cleanup\" %s, after compacting and before optimising indexes: call %s (it compacts and optimises indexes, removes no version) and let `retain cleanup run` or the daemon remove old versions",
		pinned, when, LanceOptimizeCall))
	if a := h.AutoCleanup; a != nil {
		what := "lance.auto_cleanup.interval=" + a.Interval
		if a.OlderThan != "" {
			what += ", older_than=" + a.OlderThan
		}
		if a.RetainVersions != "" {
			what += ", retain_versions=" + a.RetainVersions
		}
		stall := "while a pinned version is among the versions it would remove"
		if oldest != nil && a.OlderThanOK && a.RetainVersions == "" {
			t := oldest.CommittedAt.Add(a.OlderThanDuration)
			h.AutoCleanupStallsFrom = &t
			stall = "from " + t.UTC().Format(time.RFC3339) + " on"
		}
		h.Warnings = append(h.Warnings, fmt.Sprintf(
			"the table's config asks Lance to clean up on commit (%s): it removes no version at all %s (it logs \"tagged version(s) have been marked for cleanup\"; commits still succeed), so old versions pile up unless `retain cleanup run` or the daemon removes them; delete the lance.auto_cleanup.* config keys with Lance to stop the failing attempts",
			what, stall))
	}
}

// pinList names the oldest pins (the ones that trip Lance first); a
// store with many checkpoints would otherwise print a line per pin.
func (h *LanceCleanupHazard) pinList() string {
	const show = 3
	var parts []string
	for i, p := range h.Pins {
		if i == show {
			parts = append(parts, fmt.Sprintf("and %d more", len(h.Pins)-show))
			break
		}
		parts = append(parts, pinLabel(p)+" (checkpoint "+p.Checkpoint+")")
	}
	return strings.Join(parts, ", ")
}

func pinLabel(p LancePin) string {
	b := p.Branch
	if b == "" {
		b = registry.MainBranch
	}
	return fmt.Sprintf("%s v%d", b, p.Version)
}

// commitTime reads the commit time of version n of branch b.
func commitTime(ctx context.Context, ds *lance.Dataset, b string, n uint64) (time.Time, error) {
	if b != "" && b != registry.MainBranch {
		var err error
		if ds, err = ds.Branch(b); err != nil {
			return time.Time{}, err
		}
	}
	v, err := ds.VersionAt(ctx, n)
	if err != nil {
		return time.Time{}, err
	}
	m, err := ds.ReadManifest(ctx, v)
	if err != nil {
		return time.Time{}, err
	}
	return m.Timestamp, nil
}
