package authz

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/retain-dev/retain/core/storage"
)

// ErrDenied matches every refusal by a policy (see DeniedError).
var ErrDenied = errors.New("denied by policy")

// DeniedError is a refusal by the policy: which action on which resource,
// for which actor, by which policy file and why. It matches ErrDenied and
// storage.ErrPermissionDenied.
type DeniedError struct {
	Action   Action
	Actor    string
	Resource string   // Request.Resource()
	Policy   string   // the policy file
	Reasons  []string // ids of the determining forbids; empty on a default deny
	Decision Decision // the full decision, with positions and errors
}

func (e *DeniedError) Error() string {
	d := e.Decision
	var why, next string
	switch {
	case len(d.Errors) > 0:
		why = strings.Join(d.Errors, "; ") + "; an evaluation error denies (fail closed)"
		next = "fix the policy so it evaluates for this request (for example test an attribute with `has` first)"
	case len(d.Reasons) > 0:
		rs := make([]string, len(d.Reasons))
		for i, r := range d.Reasons {
			rs[i] = fmt.Sprintf("forbid policy %q at line %d", r.ID, r.Line)
		}
		why = strings.Join(rs, ", ")
		next = "a forbid overrides every permit: narrow that forbid in the policy or act as another --actor"
	default:
		why = "no permit policy matches"
		next = "ask for a permit in the policy or act as another --actor"
	}
	return fmt.Sprintf("%s on %s: denied for actor %s by policy file %s (%s): %s",
		e.Action, e.Resource, storage.Quote(e.Actor), e.Policy, why, next)
}

// Is matches ErrDenied and storage.ErrPermissionDenied, so callers that only
// know core's kinds still see a permission failure.
func (e *DeniedError) Is(target error) bool {
	return target == ErrDenied || target == storage.ErrPermissionDenied
}

// Gate authorizes one actor's requests against one policy. Library callers
// carry it in a context so every mutating code path can Check without new
// parameters.
type Gate struct {
	policy *Policy
	actor  string
	audit  func(Decision, Request)
	// lazyActor, when set (NewLazyGate), resolves actor at the first Check.
	lazyActor func() (string, error)
}

// NewGate builds a gate for actor under p. audit, when not nil, is called
// with every decision the gate makes, allowed or denied.
func NewGate(p *Policy, actor string, audit func(Decision, Request)) *Gate {
	return &Gate{policy: p, actor: actor, audit: audit}
}

// Actor is the gate's actor ("" when a lazy actor cannot be resolved).
func (g *Gate) Actor() string {
	a, _ := g.resolveActor()
	return a
}

func (g *Gate) resolveActor() (string, error) {
	if g.lazyActor != nil {
		return g.lazyActor()
	}
	return g.actor, nil
}

// Policy is the gate's policy.
func (g *Gate) Policy() *Policy { return g.policy }

type gateKey struct{}

// WithGate returns ctx carrying g; a nil g leaves ctx ungated.
func WithGate(ctx context.Context, g *Gate) context.Context {
	if g == nil {
		return ctx
	}
	return context.WithValue(ctx, gateKey{}, g)
}

// GateFrom returns the gate ctx carries, or nil.
func GateFrom(ctx context.Context) *Gate {
	g, _ := ctx.Value(gateKey{}).(*Gate)
	return g
}

// Check authorizes r with the gate in ctx. Without a gate it returns nil,
// so behaviour is unchanged when no policy is configured.
func Check(ctx context.Context, r Request) error {
	g := GateFrom(ctx)
	if g == nil {
		return nil
	}
	return g.Check(r)
}

// Check authorizes r. A malformed request (no or unknown action, no store,
// no actor) is an ErrInvalidArgument error; a refusal is a *DeniedError.
// Either way the action must not run.
func (g *Gate) Check(r Request) error {
	_, err := g.check(r)
	return err
}

func (g *Gate) check(r Request) (Decision, error) {
	if g.policy == nil {
		// A gate without a policy is a wiring mistake; fail closed.
		return Decision{}, storage.Errorf("authorize", string(r.Action), storage.ErrInvalidArgument, "the gate has no policy: build it with NewGate(policy, ...)")
	}
	actor, err := g.resolveActor()
	if err == nil {
		err = r.validate(actor)
	}
	if err != nil {
		d := Decision{Errors: []string{err.Error()}}
		if g.audit != nil {
			g.audit(d, r)
		}
		return d, err
	}
	d := g.policy.Authorize(actor, r)
	if g.audit != nil {
		g.audit(d, r)
	}
	if d.Allowed {
		return d, nil
	}
	ids := make([]string, len(d.Reasons))
	for i, rs := range d.Reasons {
		ids[i] = rs.ID
	}
	return d, &DeniedError{Action: r.Action, Actor: actor, Resource: r.Resource(), Policy: g.policy.file, Reasons: ids, Decision: d}
}

// As gives storage.KindOf (which uses errors.As) the kind
// storage.ErrPermissionDenied, so --json errors report it.
func (e *DeniedError) As(target any) bool {
	if k, ok := target.(*storage.Kind); ok {
		*k = storage.ErrPermissionDenied
		return true
	}
	return false
}
