package branch

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/retain-dev/retain/core/checkpoint/registry"
	"github.com/retain-dev/retain/core/lance"
	"github.com/retain-dev/retain/core/storage"
)

// Typed refusals and outcomes of Delete.
var (
	// ErrCheckpointPinsBranch: a live checkpoint pins a version of the
	// branch in a table the delete would touch; deleting the branch would
	// delete the pinned version's files. The concrete error is
	// *CheckpointPinsBranchError (kind storage.ErrPreconditionFailed).
	ErrCheckpointPinsBranch = errors.New("a live checkpoint pins the branch")
	// ErrRefused: the delete was refused in at least one table and nothing
	// was deleted in any. The concrete error is *RefusedError; it also
	// matches the reason of every refusal (ErrCheckpointPinsBranch,
	// lance.ErrBranchHasChildren, lance.ErrBranchHasTags, ...).
	ErrRefused = errors.New("branch delete refused")
	// ErrIncomplete: the branch file was deleted but objects of its folder
	// could not all be deleted (or a table failed). Nothing references
	// what is left; running the delete again finishes it. The report says
	// which table and objects.
	ErrIncomplete = errors.New("branch delete incomplete")
	// ErrBranchChanged: Options.StillDue judged the branch file under the
	// claim no longer due (re-created, its expiry moved): the delete
	// refuses (kind storage.ErrPreconditionFailed).
	ErrBranchChanged = errors.New("the branch changed since it was judged")
)

// PinnedTable is one table a checkpoint pins on the branch.
type PinnedTable struct {
	Path    string `json:"path"`
	Version uint64 `json:"version"`
}

// PinningCheckpoint is a live checkpoint that pins the branch.
type PinningCheckpoint struct {
	ID     registry.ID   `json:"id"`
	Name   string        `json:"name"`
	Tables []PinnedTable `json:"tables"`
}

// CheckpointPinsBranchError lists the live checkpoints that pin the branch
// and the tables they pin it in. It matches ErrCheckpointPinsBranch and
// storage.ErrPreconditionFailed.
type CheckpointPinsBranchError struct {
	Branch      string              `json:"branch"`
	Checkpoints []PinningCheckpoint `json:"checkpoints"`
}

// Tables returns the tables pinned on the branch, sorted, each once.
func (e *CheckpointPinsBranchError) Tables() []string {
	seen := map[string]bool{}
	var out []string
	for _, c := range e.Checkpoints {
		for _, t := range c.Tables {
			if !seen[t.Path] {
				seen[t.Path] = true
				out = append(out, t.Path)
			}
		}
	}
	sort.Strings(out)
	return out
}

// IDs returns the ids of the pinning checkpoints.
func (e *CheckpointPinsBranchError) IDs() []registry.ID {
	out := make([]registry.ID, len(e.Checkpoints))
	for i, c := range e.Checkpoints {
		out[i] = c.ID
	}
	return out
}

func (e *CheckpointPinsBranchError) Error() string {
	parts := make([]string, len(e.Checkpoints))
	for i, c := range e.Checkpoints {
		ts := make([]string, len(c.Tables))
		for j, t := range c.Tables {
			ts[j] = fmt.Sprintf("%s v%d", t.Path, t.Version)
		}
		parts[i] = fmt.Sprintf("%q (id %s) on %s", c.Name, c.ID, strings.Join(ts, ", "))
	}
	return fmt.Sprintf("%v: branch %q is pinned by %d live checkpoint(s): %s; deleting the branch would delete the pinned versions: delete the checkpoint(s) first (`retain checkpoint delete`)",
		ErrCheckpointPinsBranch, e.Branch, len(e.Checkpoints), strings.Join(parts, "; "))
}

// Unwrap matches ErrCheckpointPinsBranch and its kind.
func (e *CheckpointPinsBranchError) Unwrap() []error {
	return []error{ErrCheckpointPinsBranch, storage.ErrPreconditionFailed}
}

// TableRefusal is why one table refused the delete.
type TableRefusal struct {
	Table string `json:"table"`
	// Reason is the refusal's message.
	Reason string `json:"reason"`
	// Children, Tags and Overlaps are the Lance-level reasons, when the
	// refusal is a *lance.BranchDeleteError.
	Children []lance.BranchRef `json:"children,omitempty"`
	Tags     []lance.BranchRef `json:"tags,omitempty"`
	Overlaps []string          `json:"overlaps,omitempty"`
	Err      error             `json:"-"`
}

// RefusedError is a refused delete: nothing was deleted in any table. It
// matches ErrRefused, the pins' *CheckpointPinsBranchError (when a live
// checkpoint pins the branch) and every table's refusal.
type RefusedError struct {
	Branch string `json:"branch"`
	Store  string `json:"store"`
	// Pins is non-nil when live checkpoints pin the branch.
	Pins *CheckpointPinsBranchError `json:"-"`
	// Tables are the tables whose Lance refs refuse the delete.
	Tables []TableRefusal `json:"tables"`
	// RolledBack are the tables where the branch, left deleting by an
	// earlier delete that stopped before anything was deleted, went back
	// to ready.
	RolledBack []string `json:"rolled_back,omitempty"`
}

func (e *RefusedError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%v: branch %q of store %s: nothing was deleted", ErrRefused, e.Branch, e.Store)
	if e.Pins != nil {
		b.WriteString(": " + e.Pins.Error())
	}
	for _, t := range e.Tables {
		fmt.Fprintf(&b, "; table %s: %s", t.Table, t.Reason)
	}
	if len(e.RolledBack) > 0 {
		fmt.Fprintf(&b, "; the branch, left deleting by an earlier delete, is ready again in %s", strings.Join(e.RolledBack, ", "))
	}
	return b.String()
}

// Unwrap matches ErrRefused, the pins error and each table's refusal.
func (e *RefusedError) Unwrap() []error {
	out := []error{ErrRefused}
	if e.Pins != nil {
		out = append(out, e.Pins)
	}
	for _, t := range e.Tables {
		if t.Err != nil {
			out = append(out, t.Err)
		}
	}
	return out
}

// tableRefusal describes a per-table refusal.
func tableRefusal(table string, err error) TableRefusal {
	r := TableRefusal{Table: table, Reason: err.Error(), Err: err}
	var be *lance.BranchDeleteError
	if errors.As(err, &be) {
		r.Children, r.Tags, r.Overlaps = be.Children, be.Tags, be.Overlaps
	}
	return r
}
