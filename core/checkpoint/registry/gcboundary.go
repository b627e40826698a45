package registry

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"
)

// GCBoundary is one row of a snapshot's gc_boundary list: how far the
// cleanup operation OperationID pruned one table lineage, published in one
// registry commit before it deleted anything (issue 7, section 3).
//
// Format 1 already carried gc_boundary rows verbatim as opaque JSON, so
// defining the row needs no format bump: a build that does not know the
// row type still reads the snapshot and carries the rows unchanged.
type GCBoundary struct {
	TableID     ID     `json:"table_id"`
	Path        string `json:"path"`
	Incarnation uint64 `json:"incarnation"`
	// Cutoff describes the window and the newest version removed per
	// branch ("keep-last 2; newest removed: main v7").
	Cutoff string `json:"cutoff"`
	// RootDigest is "sha256:<hex>" over the sorted kept roots and planned
	// removals of the table's plan.
	RootDigest  string    `json:"root_digest"`
	OperationID string    `json:"operation_id"`
	At          time.Time `json:"at"`
	// NewestRemoved is, per branch the cleanup removed versions from, the
	// newest of them: the boundary CheckGCBoundary enforces. Sorted by
	// branch.
	NewestRemoved []BranchVersion `json:"newest_removed,omitempty"`
}

func (g GCBoundary) check() error {
	if err := g.TableID.Validate(); err != nil {
		return err
	}
	if g.Path == "" || g.Incarnation == 0 {
		return fmt.Errorf("gc boundary of table %s: path and incarnation must be set", g.TableID)
	}
	if !strings.HasPrefix(g.RootDigest, "sha256:") || len(g.RootDigest) != len("sha256:")+64 {
		return fmt.Errorf("gc boundary of table %s: root digest %q is not sha256:<64 hex>", g.TableID, g.RootDigest)
	}
	for i, nr := range g.NewestRemoved {
		if err := validateBranch(nr.Branch); err != nil || nr.Version == 0 {
			return fmt.Errorf("gc boundary of table %s: newest removed %q v%d is not a branch and version", g.TableID, nr.Branch, nr.Version)
		}
		if i > 0 && g.NewestRemoved[i-1].Branch >= nr.Branch {
			return fmt.Errorf("gc boundary of table %s: newest removed versions are not sorted by branch, one per branch", g.TableID)
		}
	}
	if err := checkOpID(g.OperationID); err != nil {
		return fmt.Errorf("gc boundary of table %s: %v", g.TableID, err)
	}
	return checkTime("gc boundary of "+string(g.TableID)+" at", g.At)
}

// GCBoundaries decodes the gc_boundary rows, sorted by table id.
func (s *Snapshot) GCBoundaries() ([]GCBoundary, error) {
	out := make([]GCBoundary, 0, len(s.GCBoundary))
	for i, raw := range s.GCBoundary {
		var g GCBoundary
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&g); err != nil {
			return nil, fmt.Errorf("gc_boundary row %d is not a boundary this build reads: %v", i, err)
		}
		out = append(out, g)
	}
	return out, nil
}

// SetGCBoundary records g on a draft, replacing the row of the same table
// id; rows stay sorted by table id.
func (s *Snapshot) SetGCBoundary(g GCBoundary) error {
	const op = "set-gc-boundary"
	if err := s.mustDraft(op, g.Path); err != nil {
		return err
	}
	if err := g.check(); err != nil {
		return errorf(op, g.Path, ErrInvalidSnapshot, "%v", err)
	}
	rows, err := s.GCBoundaries()
	if err != nil {
		return errorf(op, g.Path, ErrInvalidSnapshot, "%v", err)
	}
	g.At = g.At.UTC()
	replaced := false
	for i := range rows {
		if rows[i].TableID == g.TableID {
			rows[i], replaced = g, true
		}
	}
	if !replaced {
		rows = append(rows, g)
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].TableID < rows[j].TableID })
	raws := make([]json.RawMessage, 0, len(rows))
	for _, r := range rows {
		b, err := json.Marshal(r)
		if err != nil {
			return errorf(op, g.Path, ErrInvalidSnapshot, "%v", err)
		}
		raws = append(raws, b)
	}
	s.GCBoundary = raws
	return nil
}

// BranchVersion is one branch's version in a gc boundary row ("main" for
// main).
type BranchVersion struct {
	Branch  string `json:"branch"`
	Version uint64 `json:"version"`
}

// CheckGCBoundary refuses a pin at or behind its table's gc boundary:
// a version no newer than the newest version the boundary's cleanup
// removed from the pin's branch, in the same table incarnation. Such a
// version is gone, or an older neighbour of what went that only a root of
// that cleanup kept; pinning it would make a pruned past current again
// (issue 7, section 3). A recreated table (another incarnation) and a
// branch the cleanup removed nothing from are not behind any boundary.
func (s *Snapshot) CheckGCBoundary(p Pin) error {
	rows, err := s.GCBoundaries()
	if err != nil {
		return errorf("check-gc-boundary", p.Path, ErrCorruptRegistry, "%v", err)
	}
	branch := p.Branch
	if branch == "" {
		branch = MainBranch
	}
	for _, g := range rows {
		if g.TableID != p.TableID || g.Incarnation != p.Incarnation {
			continue
		}
		for _, nr := range g.NewestRemoved {
			if nr.Branch == branch && p.Version <= nr.Version {
				return errorf("check-gc-boundary", p.Path, ErrBehindGCBoundary,
					"%s v%d of table %s is at or behind its gc boundary: cleanup %s removed up to %s v%d (%s); pin a newer version",
					branch, p.Version, p.Path, g.OperationID, branch, nr.Version, g.At.Format(time.RFC3339))
			}
		}
	}
	return nil
}
