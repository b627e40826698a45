package lease

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/retain-dev/retain/core/authz"
	"github.com/retain-dev/retain/core/checkpoint"
	"github.com/retain-dev/retain/core/checkpoint/registry"
	"github.com/retain-dev/retain/core/internal/fanout"
	"github.com/retain-dev/retain/core/lance"
	"github.com/retain-dev/retain/core/refs/refmeta"
	"github.com/retain-dev/retain/core/storage"
)

// ReapOptions configure Reap.
type ReapOptions struct {
	// Now is the reaper's clock; nil is time.Now.
	Now func() time.Time
	// Margin: a lease is reaped once Now is past its expiry by more than
	// this; 0 is DefaultMargin.
	Margin time.Duration
	// DryRun decides and removes nothing.
	DryRun bool
}

// Judged is a lease and what Reap decided for it.
type Judged struct {
	Lease
	Reaped bool   `json:"reaped"`
	Why    string `json:"why"`
}

// Reaped is what Reap did.
type Reaped struct {
	Now    time.Time `json:"now"`
	Margin string    `json:"margin"`
	DryRun bool      `json:"dry_run"`
	Tables int       `json:"tables"`
	// Leases: every lease found, by table, reaped or kept with why.
	Leases  []Judged `json:"leases"`
	Removed int      `json:"removed"`
	// Errors only over-retain: the lease stays until the next reap.
	Errors []string `json:"errors,omitempty"`
}

// Reap removes the leases of every table of the store whose expiry the
// reaper's clock is past by more than the margin. A lease whose metadata
// does not parse is kept (fail closed), and so is one renewed between the
// read and the delete (the delete is conditional on the tag read). The
// tables are read side by side under the store's limiter: one listing of
// each table's tags, and one delete per reaped lease.
func Reap(ctx context.Context, s *storage.Store, o ReapOptions) (*Reaped, error) {
	res := o.NewReaped()
	tables, err := checkpoint.DiscoverTables(ctx, s)
	if err != nil {
		return nil, err
	}
	res.Tables = len(tables)
	per, err := fanout.Map(ctx, s.Parallelism(), len(tables), func(ctx context.Context, i int) ([]Judged, error) {
		ds, err := lance.Open(s, tables[i])
		if err != nil {
			return ListFailed(tables[i], err), nil
		}
		tags, err := ds.ListTags(ctx)
		if err != nil {
			return ListFailed(tables[i], err), nil
		}
		return ReapTable(ctx, s, tables[i], tags, o), nil
	})
	if err != nil {
		return nil, err
	}
	for _, js := range per {
		res.Add(js)
	}
	return res, res.Err()
}

func (o ReapOptions) clock() (time.Time, time.Duration) { return refmeta.ExpiryClock(o.Now, o.Margin) }

// NewReaped is an empty report of a reap with o.
func (o ReapOptions) NewReaped() *Reaped {
	now, margin := o.clock()
	return &Reaped{Now: now, Margin: margin.String(), DryRun: o.DryRun, Leases: []Judged{}}
}

// ListFailed is the judgement of a table whose tags could not be listed:
// its leases stay, and the reap reports the table (Add).
func ListFailed(table string, err error) []Judged {
	return []Judged{{Lease: Lease{Table: table}, Why: "listing the table's leases failed: " + err.Error()}}
}

// ReapTable judges, and unless DryRun reaps, the leases among the tags of
// table as already listed: a caller that lists them anyway (the daemon,
// for tag expiries too) lists once.
func ReapTable(ctx context.Context, s *storage.Store, table string, tags []lance.Tag, o ReapOptions) []Judged {
	now, margin := o.clock()
	var out []Judged
	for _, tg := range tags {
		if !registry.IsLeaseTag(tg.Name) {
			continue
		}
		l := fromTag(table, tg)
		j := Judged{Lease: l}
		switch {
		case l.Problem != "":
			j.Why = "kept: " + l.Problem + " (release it by its tag name with `retain lease release`)"
		case !now.After(l.Expires.Add(margin)):
			if now.After(l.Expires) {
				j.Why = fmt.Sprintf("kept: expired at %s, within the %s margin", l.Expires.Format(time.RFC3339), margin)
			} else {
				j.Why = "kept: expires " + l.Expires.Format(time.RFC3339)
			}
		case o.DryRun:
			j.Reaped, j.Why = true, fmt.Sprintf("would reap: expired at %s", l.Expires.Format(time.RFC3339))
		default:
			j.Reaped, j.Why = reapOne(ctx, s, l)
		}
		out = append(out, j)
	}
	return out
}

// Add counts one table's judgements into r.
func (r *Reaped) Add(js []Judged) {
	for _, j := range js {
		if j.Tag == "" { // a table that could not be listed
			r.Errors = append(r.Errors, j.Table+": "+j.Why)
			continue
		}
		if strings.HasPrefix(j.Why, "kept: removing failed") {
			r.Errors = append(r.Errors, j.Table+" "+j.Tag+": "+j.Why)
		}
		if j.Reaped {
			r.Removed++
		}
		r.Leases = append(r.Leases, j)
	}
}

// Err is why the reap was incomplete, nil when it was not.
func (r *Reaped) Err() error {
	if len(r.Errors) > 0 {
		return fmt.Errorf("%d lease(s) or table(s) could not be reaped (they only keep their versions until the next reap): %s", len(r.Errors), r.Errors[0])
	}
	return nil
}

func reapOne(ctx context.Context, s *storage.Store, l Lease) (bool, string) {
	if err := authz.Check(ctx, authz.Request{Action: authz.ActionLeaseRelease, Command: "lease reap", Store: authz.StoreName(s), Table: l.Table, Tag: l.Tag}); err != nil {
		return false, "kept: removing failed: " + err.Error()
	}
	ds, err := lance.Open(s, l.Table)
	if err != nil {
		return false, "kept: removing failed: " + err.Error()
	}
	if l.Token == "" {
		return false, "kept: removing failed: " + errNoToken(l.Tag).Error()
	}
	err = ds.DeleteTag(ctx, l.Tag, l.Token)
	switch {
	case err == nil:
		return true, fmt.Sprintf("reaped: expired at %s", l.Expires.Format(time.RFC3339))
	case errors.Is(err, lance.ErrTagChanged):
		return false, "kept: renewed since it was read"
	case errors.Is(err, lance.ErrTagNotFound):
		return false, "gone: released since it was read"
	}
	return false, "kept: removing failed: " + err.Error()
}
