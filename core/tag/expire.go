package tag

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/retain-dev/retain/core/checkpoint"
	"github.com/retain-dev/retain/core/internal/fanout"
	"github.com/retain-dev/retain/core/lance"
	"github.com/retain-dev/retain/core/refs/refmeta"
	"github.com/retain-dev/retain/core/storage"
)

// DefaultExpiryMargin is how far past a tag's expiry the reaper's clock
// must be before it removes the tag: the clock skew expiries tolerate.
const DefaultExpiryMargin = refmeta.DefaultExpiryMargin

// ReapOptions configure ReapExpired.
type ReapOptions struct {
	Now    func() time.Time // nil: time.Now
	Margin time.Duration    // 0: DefaultExpiryMargin
	DryRun bool
	// Scope and Gates as Options: the delete is the normal conditional
	// tag delete.
	Scope storage.Scope
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
func ReapExpired(ctx context.Context, s *storage.Store, o ReapOptions) (*Reaped, error) {
	res := o.NewReaped()
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
		ds, err := lance.Open(s, tables[i])
		if err != nil {
			return one{errs: []string{tables[i] + ": " + err.Error()}}, nil
		}
		tags, err := ds.ListTags(ctx)
		if err != nil {
			return one{errs: []string{tables[i] + ": listing its tags: " + err.Error()}}, nil
		}
		ex, errs := ReapTable(ctx, ds, tags, o)
		return one{ex, errs}, nil
	})
	if err != nil {
		return nil, err
	}
	for _, p := range per {
		res.Add(p.tags, p.errs)
	}
	return res, res.Err()
}

func (o ReapOptions) clock() (time.Time, time.Duration) { return refmeta.ExpiryClock(o.Now, o.Margin) }

// NewReaped is an empty report of a reap with o.
func (o ReapOptions) NewReaped() *Reaped {
	now, margin := o.clock()
	return &Reaped{Now: now, Margin: margin.String(), DryRun: o.DryRun, Tags: []Expired{}}
}

// ReapTable judges, and unless DryRun removes, the expired user tags of
// ds among tags as already listed (a caller that lists them anyway — the
// daemon, for leases too — lists once). errs are removals that failed.
func ReapTable(ctx context.Context, ds *lance.Dataset, tags []lance.Tag, o ReapOptions) (out []Expired, errs []string) {
	now, margin := o.clock()
	t := New(ds, Options{Scope: o.Scope, Gates: o.Gates, Command: "tag expire"})
	for _, tg := range tags {
		r := tagRefOf(tg)
		if r.Reserved {
			continue
		}
		at, ok, perr := refmeta.Expiry(r.Metadata)
		if !ok {
			continue
		}
		e := Expired{Table: ds.Root, Tag: r.Name, Branch: r.Branch, Version: r.Version, Expires: at}
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
				errs = append(errs, ds.Root+" tag "+r.Name+": "+err.Error())
			}
		}
		out = append(out, e)
	}
	return out, errs
}

// Add counts one table's results into r.
func (r *Reaped) Add(tags []Expired, errs []string) {
	r.Tags = append(r.Tags, tags...)
	r.Errors = append(r.Errors, errs...)
	for _, e := range tags {
		if e.Removed {
			r.Removed++
		}
	}
}

// Err is why the reap was incomplete, nil when it was not.
func (r *Reaped) Err() error {
	if len(r.Errors) > 0 {
		return fmt.Errorf("%d expired tag(s) or table(s) could not be reaped (they only keep their versions until the next reap): %s", len(r.Errors), r.Errors[0])
	}
	return nil
}
