package retention

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/retain-dev/retain/core/duration"
	"github.com/retain-dev/retain/core/lance"
	"github.com/retain-dev/retain/core/storage"
)

// ReviewedFormat names the saved plan's format; a file of another format
// is refused rather than guessed at.
const ReviewedFormat = "retain.cleanup-plan/1"

// ErrPlanStale: the cleanup a run would carry out now is not the reviewed
// plan (a root changed, or it would remove something the plan does not
// list). Nothing was deleted; make and review a new plan.
var ErrPlanStale = errors.New("the reviewed cleanup plan is stale")

// ErrPlanInvalid: a saved plan file cannot be used (unreadable, another
// format, edited since its digest, or not the digest expected).
var ErrPlanInvalid = errors.New("the cleanup plan file cannot be used")

// ReviewedPlan is a cleanup plan saved for review (`retain cleanup preview
// --out plan.json`) and applied by `retain cleanup run --plan plan.json`,
// as terraform applies a saved plan: the run recomputes the plan under the
// claim, at the reviewed plan's cut-off, and refuses unless every root of
// every table is the same and everything it would remove is listed here.
// It may remove less (a file already gone, a table dropped).
//
// Digest covers everything else in the file, so a reviewer can approve
// the digest and a script pass it with --expect-digest.
type ReviewedPlan struct {
	Format string `json:"format"`
	// Store is the store's location as the plan was made; a run on any
	// other store is refused.
	Store           string          `json:"store"`
	PlannedAt       time.Time       `json:"planned_at"`
	Policy          PolicyEcho      `json:"policy"`
	RegistryVersion uint64          `json:"registry_version"`
	Checkpoints     []Checkpoint    `json:"checkpoints"`
	Tables          []ReviewedTable `json:"tables"`
	Totals          Totals          `json:"totals"`
	// Digest is "sha256:<hex>" over the plan without this field.
	Digest string `json:"digest"`
}

// ReviewedTable is one table of a reviewed plan.
type ReviewedTable struct {
	Table string `json:"table"`
	// Roots lists what keeps a version other than the window, one line
	// each ("main v12: branch head main", "main v7: checkpoint n (id)"),
	// sorted. A run refuses if the table's roots are not these.
	Roots []string `json:"roots"`
	// VersionsRemoved names the removed versions ("main v3"), for the
	// reviewer; Remove is every object the run may delete, sorted.
	VersionsRemoved []string `json:"versions_removed"`
	Remove          []string `json:"remove"`
	BytesToDelete   int64    `json:"bytes_to_delete"`
	// Refused or Notes, when the table is planned with nothing to delete.
	Refused string   `json:"refused,omitempty"`
	Notes   []string `json:"notes,omitempty"`
}

// NewReviewedPlan saves p, the plan of the store at loc, for review.
func NewReviewedPlan(loc storage.Location, p *StorePlan) *ReviewedPlan {
	r := &ReviewedPlan{Format: ReviewedFormat, Store: loc.String(), PlannedAt: p.PlannedAt, Policy: p.Policy,
		RegistryVersion: p.RegistryVersion, Checkpoints: p.Checkpoints, Tables: make([]ReviewedTable, 0, len(p.Tables)), Totals: p.Totals}
	if r.Checkpoints == nil {
		r.Checkpoints = []Checkpoint{}
	}
	for _, tp := range p.Tables {
		r.Tables = append(r.Tables, reviewedTable(tp))
	}
	r.Digest = r.digest()
	return r
}

func reviewedTable(tp TablePlan) ReviewedTable {
	rt := ReviewedTable{Table: tp.Table, Roots: reviewedRoots(tp), VersionsRemoved: []string{}, Remove: []string{},
		BytesToDelete: tp.Totals.BytesToDelete, Refused: tp.Refused, Notes: tp.Notes}
	for _, v := range tp.Versions {
		if !v.Keep {
			rt.VersionsRemoved = append(rt.VersionsRemoved, fmt.Sprintf("%s v%d", v.Branch, v.Version))
		}
	}
	rt.Remove = planKeys(tp.Lance)
	return rt
}

// reviewedRoots lists a table plan's roots: every reason a version is kept
// other than the operator's window, which the reviewed cut-off fixes.
func reviewedRoots(tp TablePlan) []string {
	roots := []string{}
	for _, v := range tp.Versions {
		if !v.Keep {
			continue
		}
		for _, r := range v.Reasons {
			if !strings.HasPrefix(r, "window: ") {
				roots = append(roots, fmt.Sprintf("%s v%d: %s", v.Branch, v.Version, r))
			}
		}
	}
	sort.Strings(roots)
	return roots
}

func planKeys(lp *lance.Plan) []string {
	keys := []string{}
	if lp == nil {
		return keys
	}
	for _, f := range lp.Files {
		keys = append(keys, f.Key)
	}
	sort.Strings(keys)
	return keys
}

// digest is over the plan's JSON without its digest: encoding/json writes
// a struct's fields in order, so the same plan always gives the same bytes
// however the file was formatted.
func (r *ReviewedPlan) digest() string {
	c := *r
	c.Digest = ""
	b, err := json.Marshal(&c)
	if err != nil {
		panic(err) // plain data: cannot fail
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// ParseReviewedPlan reads a saved plan (name is its file, for messages).
// It refuses a file of another format, with unknown fields, or whose
// digest is not its content's (edited since it was saved); with expect
// set, also a plan whose digest is not expect.
func ParseReviewedPlan(name string, b []byte, expect string) (*ReviewedPlan, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var r ReviewedPlan
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("%w: %s is not a cleanup plan (%v): write one with `retain cleanup preview STORE --out %s`", ErrPlanInvalid, name, err, name)
	}
	if r.Format != ReviewedFormat {
		return nil, fmt.Errorf("%w: %s is of format %q, not %q: make a new plan with this release's `retain cleanup preview --out`", ErrPlanInvalid, name, r.Format, ReviewedFormat)
	}
	if got := r.digest(); got != r.Digest {
		return nil, fmt.Errorf("%w: %s was changed after it was saved (its content's digest is %s, the file says %s): review and save a new plan with `retain cleanup preview --out`", ErrPlanInvalid, name, got, r.Digest)
	}
	if expect != "" && expect != r.Digest {
		return nil, fmt.Errorf("%w: %s has digest %s, not the expected %s: it is not the plan that was reviewed", ErrPlanInvalid, name, r.Digest, expect)
	}
	if r.Policy.OlderThan != "" && r.Policy.Cutoff == nil {
		return nil, fmt.Errorf("%w: %s has an older-than window but no cut-off: make a new plan with `retain cleanup preview --out`", ErrPlanInvalid, name)
	}
	return &r, nil
}

// policy is the window the plan was made with, its cut-off fixed: a run
// of the reviewed plan removes by the reviewed cut-off, not by one
// recomputed from the time it runs.
func (r *ReviewedPlan) policy() (Policy, error) {
	p := Policy{KeepLast: r.Policy.KeepLast, reviewed: true}
	if r.Policy.OlderThan != "" {
		d, err := duration.Parse(r.Policy.OlderThan)
		if err != nil {
			return p, fmt.Errorf("%w: its older-than %q: %v", ErrPlanInvalid, r.Policy.OlderThan, err)
		}
		p.OlderThan = d
		c := r.Policy.Cutoff.UTC()
		p.cutoffAt = &c
	}
	var err error
	if p.Tables, err = rulesFrom(r.Policy.Tables); err != nil {
		return p, err
	}
	if p.Branches, err = rulesFrom(r.Policy.Branches); err != nil {
		return p, err
	}
	return p, nil
}

// PlanStaleError names how the plan a run made differs from the reviewed
// one. It matches ErrPlanStale and ErrRunRefused: nothing was deleted.
type PlanStaleError struct {
	Digest string
	// Differences, one line each, in table order; at most a few per table.
	Differences []string
}

func (e *PlanStaleError) Error() string {
	return fmt.Sprintf("%s (%s): %s; nothing was deleted: make and review a new plan (`retain cleanup preview STORE --out plan.json`), then run it",
		ErrPlanStale, e.Digest, strings.Join(e.Differences, "; "))
}

func (e *PlanStaleError) Unwrap() []error { return []error{ErrPlanStale, ErrRunRefused} }

// maxDifferences bounds the differences named per table: the first few
// say what changed; the count says how much.
const maxDifferences = 3

// check compares the plan made under the claim with the reviewed one.
func (r *ReviewedPlan) check(fresh *StorePlan) error {
	reviewed := make(map[string]*ReviewedTable, len(r.Tables))
	for i := range r.Tables {
		reviewed[r.Tables[i].Table] = &r.Tables[i]
	}
	var diffs []string
	for _, tp := range fresh.Tables {
		now := reviewedTable(tp)
		rt := reviewed[tp.Table]
		if rt == nil {
			if len(now.Remove) > 0 {
				diffs = append(diffs, fmt.Sprintf("table %q is not in the reviewed plan and would have %d objects removed", tp.Table, len(now.Remove)))
			}
			continue
		}
		gone, added := setDiff(rt.Roots, now.Roots), setDiff(now.Roots, rt.Roots)
		extra := setDiff(now.Remove, rt.Remove)
		var d []string
		for _, x := range gone {
			d = append(d, "root gone: "+x)
		}
		for _, x := range added {
			d = append(d, "new root: "+x)
		}
		for _, x := range extra {
			d = append(d, "not in the reviewed plan: remove "+x)
		}
		if len(d) == 0 {
			continue
		}
		n := len(d)
		if len(d) > maxDifferences {
			d = append(d[:maxDifferences], fmt.Sprintf("and %d more", n-maxDifferences))
		}
		diffs = append(diffs, fmt.Sprintf("table %q: %s", tp.Table, strings.Join(d, ", ")))
	}
	if len(diffs) == 0 {
		return nil
	}
	return &PlanStaleError{Digest: r.Digest, Differences: diffs}
}

// setDiff is what sorted a holds that sorted b does not.
func setDiff(a, b []string) []string {
	var out []string
	j := 0
	for _, x := range a {
		for j < len(b) && b[j] < x {
			j++
		}
		if j == len(b) || b[j] != x {
			out = append(out, x)
		}
	}
	return out
}
