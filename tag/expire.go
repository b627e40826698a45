package tag

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/retain-dev/retain/checkpoint"
	"github.com/retain-dev/retain/internal/fanout"
	"github.com/retain-dev/retain/lance"
	"github.com/retain-dev/retain/refmeta"
	"github.com/retain-dev/retain/sdk/core"
)

// DefaultExpiryMargin is how far past a tag's expiry the reaper's clock
// must be before it removes the tag: the clock skew expiries tolerate.
const DefaultExpiryMargin = 5 * time.Minute

// ReapOptions configure ReapExpired.
type ReapOptions struct {
	Now    func() time.Time // nil: time.Now
	Margin time.Duration    // 0: DefaultExpiryMargin
	DryRun bool
	// Scope and Gates as Options: the delete is the normal conditional
	// tag delete.
	Scope core.Scope
	Gates []string
}

// Expired is a tag with an expiry and what ReapExpired did with it.
type Expired struct {
	Table   string    `json:"table"`
	Tag     string    `json:"tag"`
	Branch  string    `json:"branch"`
	Version uint64    `json:"version"`
	Expires time.Time `json:"expires"`
	Removed bool      `json:"removed"`
	Why     string    `json:"why"`
}

// Reaped is what ReapExpired did.
type Reaped struct {
	Now     time.Time `json:"now"`
	Margin  string    `json:"margin"`
	DryRun  bool      `json:"dry_run"`
	Tables  int       `json:"tables"`
	Tags    []Expired `json:"tags"`
	Removed int       `json:"removed"`
	// Errors only over-retain: the tag stays until the next reap.
	Errors []string `json:"errors,omitempty"`
}

// ReapExpired removes, in every table of the store, the user tags whose
// expiry (CreateOptions.Expires, refmeta.MetaExpires) the reaper's clock
// is past by more than the margin, each with the normal delete (delete-
// if-version of the state read: a tag updated since, its expiry moved,
// stays). A tag whose expiry does not parse is kept and reported. Reserved
// tags (pins, leases) are never judged here.
func ReapExpired(ctx context.Context, s *core.Store, o ReapOptions) (*Reaped, error) {
	margin := o.Margin
	if margin <= 0 {
		margin = DefaultExpiryMargin
	}
	now := time.Now().UTC()
	if o.Now != nil {
		now = o.Now().UTC()
	}
	res := &Reaped{Now: now, Margin: margin.String(), DryRun: o.DryRun, Tags: []Expired{}}
	tables, err := checkpoint.DiscoverTables(ctx, s)
	if err != nil {
		return nil, err
	}
	res.Tables = len(tables)
	type one struct {
		tags []Expired
		errs []string
	}
	per, err := fanout.Map(ctx, s.Parallelism(), len(tables), func(ctx context.Context, i int) (one, error) {
		var out one
		ds, err := lance.Open(s, tables[i])
		if err != nil {
			out.errs = append(out.errs, tables[i]+": "+err.Error())
			return out, nil
		}
		t := New(ds, Options{Scope: o.Scope, Gates: o.Gates})
		refs, err := t.List(ctx, nil)
		if err != nil {
			out.errs = append(out.errs, tables[i]+": listing its tags: "+err.Error())
			return out, nil
		}
		for _, r := range refs {
			if r.Reserved {
				continue
			}
			at, ok, perr := refmeta.Expiry(r.Metadata)
			if !ok {
				continue
			}
			e := Expired{Table: tables[i], Tag: r.Name, Branch: r.Branch, Version: r.Version, Expires: at}
			switch {
			case perr != nil:
				e.Why = "kept: " + perr.Error() + " (fix it with `retain tag update --expires` or `--no-expiry`)"
			case !now.After(at.Add(margin)):
				e.Why = "kept: expires " + at.Format(time.RFC3339)
				if now.After(at) {
					e.Why = fmt.Sprintf("kept: expired at %s, within the %s margin", at.Format(time.RFC3339), margin)
				}
			case o.DryRun:
				e.Removed, e.Why = true, "would remove: expired at "+at.Format(time.RFC3339)
			default:
				_, err := t.Delete(ctx, r.Name, r.Token)
				switch {
				case err == nil:
					e.Removed, e.Why = true, "removed: expired at "+at.Format(time.RFC3339)
				case errors.Is(err, lance.ErrTagChanged):
					e.Why = "kept: updated since it was read"
				case errors.Is(err, lance.ErrTagNotFound):
					e.Why = "gone: deleted since it was read"
				default:
					e.Why = "kept: removing failed: " + err.Error()
					out.errs = append(out.errs, tables[i]+" tag "+r.Name+": "+err.Error())
				}
			}
			out.tags = append(out.tags, e)
		}
		return out, nil
	})
	if err != nil {
		return nil, err
	}
	for _, p := range per {
		res.Tags = append(res.Tags, p.tags...)
		res.Errors = append(res.Errors, p.errs...)
		for _, e := range p.tags {
			if e.Removed {
				res.Removed++
			}
		}
	}
	if len(res.Errors) > 0 {
		return res, fmt.Errorf("%d expired tag(s) or table(s) could not be reaped (they only keep their versions until the next reap): %s", len(res.Errors), res.Errors[0])
	}
	return res, nil
}
