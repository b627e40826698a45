package authz

import (
	"context"
	"sync"

	"github.com/retain-dev/retain/core/storage"
)

// StoreName is the Request.Store of every check on s: its location as a
// URI without query options (file:///data/db, s3://bucket/prefix).
// Options say how to reach a store, not which one it is, so a forbid on
// "s3://b/p" cannot be stepped around by adding ?region=... . A store with
// no location (built without storage.Store.At) gives "", which Check refuses:
// fail closed.
func StoreName(s *storage.Store) string {
	loc := s.Location()
	if loc.Scheme == "" {
		return ""
	}
	loc.Options = nil
	return loc.String()
}

// NewLazyGate is NewGate with the actor resolved at the first Check, so a
// command that never mutates never has to name one. An error from actor
// is returned by every Check (fail closed).
func NewLazyGate(p *Policy, actor func() (string, error), audit func(Decision, Request)) *Gate {
	return &Gate{policy: p, audit: audit, lazyActor: sync.OnceValues(actor)}
}

type noteKey struct{}

// CheckNote is Check that, on an allow by a gate, returns ctx carrying the
// decision for the store's own audit records (see Note).
func CheckNote(ctx context.Context, r Request) (context.Context, error) {
	g := GateFrom(ctx)
	if g == nil {
		return ctx, nil
	}
	d, err := g.check(r)
	if err != nil {
		return ctx, err
	}
	return context.WithValue(ctx, noteKey{}, d.String()+" ("+g.policy.file+")"), nil
}

// Note is the decision CheckNote recorded in ctx, e.g. `allow by policy
// "policy0" (/etc/retain/policy.cedar)`; "" without one.
func Note(ctx context.Context) string {
	n, _ := ctx.Value(noteKey{}).(string)
	return n
}
