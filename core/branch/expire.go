package branch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/retain-dev/retain/core/checkpoint"
	"github.com/retain-dev/retain/core/internal/fanout"
	"github.com/retain-dev/retain/core/lance"
	"github.com/retain-dev/retain/core/refs/lifecycle"
	"github.com/retain-dev/retain/core/refs/refmeta"
	"github.com/retain-dev/retain/core/storage"
)

// DefaultExpiryMargin is how far past a branch's expiry the reaper's
// clock must be before it deletes the branch.
const DefaultExpiryMargin = refmeta.DefaultExpiryMargin

// ReapOptions configure ReapExpired.
type ReapOptions struct {
	Now    func() time.Time // nil: time.Now
	Margin time.Duration    // 0: DefaultExpiryMargin
	DryRun bool
	// Actor, Scope and Gates of each delete, as Options.
	Actor string
	Scope storage.Scope
	Gates []string
	// Tables and Refs, when set, are the store's tables and each one's
	// refs as the caller read them already (the daemon's reconcile of the
	// same pass; Refs may return nil for a table): the branch files are
	// then read without listing the store and each _refs/ again. Staleness
	// only delays a reap: each delete re-reads the branch under the claim.
	Tables []string
	Refs   func(table string) *lance.Refs
}

func (o ReapOptions) refs(table string) *lance.Refs {
	if o.Refs == nil {
		return nil
	}
	return o.Refs(table)
}

// ExpiredBranch is a branch with an expiry and what ReapExpired did.
type ExpiredBranch struct {
	Table   string    `json:"table"`
	Branch  string    `json:"branch"`
	Expires time.Time `json:"expires"`
	Deleted bool      `json:"deleted"`
	Why     string    `json:"why"`
	// DeleteError is why the delete failed other than a refusal (a held
	// claim, a denied policy): reported as an error of the reap.
	DeleteError string `json:"delete_error,omitempty"`
}

// Reaped is what ReapExpired did.
type Reaped struct {
	Now      time.Time       `json:"now"`
	Margin   string          `json:"margin"`
	DryRun   bool            `json:"dry_run"`
	Branches []ExpiredBranch `json:"branches"`
	Deleted  int             `json:"deleted"`
	// Errors only over-retain: the branch stays until the next reap.
	Errors []string `json:"errors,omitempty"`
}

// ReapExpired deletes the ready branches whose expiry (CreateOptions.
// Expires) the reaper's clock is past by more than the margin, each
// through the branch delete protocol (Options.Delete) in its own table: a
// branch a checkpoint pins, that has tags (a lease, say) or children, is
// refused by it and kept, with the reason. A branch whose expiry does not
// parse, or that is still being created, is kept. One an interrupted delete
// left deleting is deleted again, which finishes that delete: the protocol
// takes it over only with proof that its owner is dead, and refuses (the
// branch kept) otherwise.
func ReapExpired(ctx context.Context, s *storage.Store, o ReapOptions) (*Reaped, error) {
	now, margin := refmeta.ExpiryClock(o.Now, o.Margin)
	res := &Reaped{Now: now, Margin: margin.String(), DryRun: o.DryRun, Branches: []ExpiredBranch{}}
	tables := o.Tables
	if tables == nil {
		var err error
		if tables, err = checkpoint.DiscoverTables(ctx, s); err != nil {
			return nil, err
		}
	}
	type found struct {
		due  []ExpiredBranch
		errs []string
	}
	per, err := fanout.Map(ctx, s.Parallelism(), len(tables), func(ctx context.Context, i int) (found, error) {
		var f found
		ds, err := lance.Open(s, tables[i])
		if err != nil {
			f.errs = append(f.errs, tables[i]+": "+err.Error())
			return f, nil
		}
		var all []lance.Branch
		if refs := o.refs(tables[i]); refs != nil && refs.Dataset == ds.Root {
			all, err = refs.Branches(ctx, ds)
		} else {
			all, err = ds.ListBranches(ctx)
		}
		var malformed *lance.MalformedRefsError
		if err != nil && !errors.As(err, &malformed) {
			f.errs = append(f.errs, tables[i]+": listing its branches: "+err.Error())
			return f, nil
		}
		for _, b := range all {
			at, ok, perr := refmeta.Expiry(b.Metadata)
			if !ok {
				continue
			}
			e := ExpiredBranch{Table: tables[i], Branch: b.Name, Expires: at}
			l, lerr := lifecycle.Parse(b.Metadata)
			switch {
			case perr != nil:
				e.Why = "kept: " + perr.Error()
			case lerr != nil:
				e.Why = "kept: " + lerr.Error()
			case l.State == lifecycle.Creating:
				e.Why = fmt.Sprintf("kept: %s, not ready (`retain branch create` finishes it, `retain branch delete` rolls it back)", l.State)
			case !now.After(at.Add(margin)):
				e.Why = "kept: expires " + at.Format(time.RFC3339)
			default:
				e.Why = "due"
			}
			f.due = append(f.due, e)
		}
		return f, nil
	})
	if err != nil {
		return nil, err
	}
	for _, f := range per {
		res.Errors = append(res.Errors, f.errs...)
		for _, e := range f.due {
			if e.Why == "due" {
				switch {
				case o.DryRun:
					e.Deleted, e.Why = true, "would delete: expired at "+e.Expires.Format(time.RFC3339)
				default:
					deleteExpired(ctx, s, o, &e, now, margin)
					if e.DeleteError != "" {
						res.Errors = append(res.Errors, e.Table+" branch "+e.Branch+": "+e.DeleteError)
					}
				}
			}
			if e.Deleted {
				res.Deleted++
			}
			res.Branches = append(res.Branches, e)
		}
	}
	if len(res.Errors) > 0 {
		return res, fmt.Errorf("%d table(s) could not be read for expired branches (they stay until the next reap): %s", len(res.Errors), res.Errors[0])
	}
	return res, nil
}

// deleteExpired runs the delete protocol on one expired branch, judging
// it again under the claim (Options.StillDue: its expiry still past by
// the margin); a refusal keeps it.
func deleteExpired(ctx context.Context, s *storage.Store, o ReapOptions, e *ExpiredBranch, now time.Time, margin time.Duration) {
	due := func(meta map[string]string) bool {
		at, ok, err := refmeta.Expiry(meta)
		return ok && err == nil && now.After(at.Add(margin))
	}
	_, err := Options{Actor: o.Actor, Scope: o.Scope, Gates: o.Gates, Table: e.Table, StillDue: due, Command: "branch expire"}.Delete(ctx, s, e.Branch)
	switch {
	case err == nil:
		e.Deleted, e.Why = true, "deleted: expired at "+e.Expires.Format(time.RFC3339)
	case errors.Is(err, ErrRefused):
		e.Why = "kept: expired at " + e.Expires.Format(time.RFC3339) + ", but the delete protocol refused: " + err.Error()
	default:
		e.Why = "kept: expired at " + e.Expires.Format(time.RFC3339) + ", but the delete failed: " + err.Error()
		e.DeleteError = err.Error()
	}
}
