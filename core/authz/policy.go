package authz

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	cedar "github.com/cedar-policy/cedar-go"
	xast "github.com/cedar-policy/cedar-go/x/exp/ast"
	"github.com/retain-dev/retain/core/storage"
)

// ErrPolicy marks a policy file that cannot be used: unreadable, malformed,
// empty or naming unknown actions or entity types. It matches
// storage.ErrInvalidArgument too.
var ErrPolicy = errors.New("invalid policy")

// PolicyError says which policy file is unusable and how to fix it.
type PolicyError struct {
	File string
	Msg  string
	Err  error // cause, may be nil
}

func (e *PolicyError) Error() string {
	s := "policy file " + e.File + ": " + e.Msg
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap matches ErrPolicy, storage.ErrInvalidArgument and the cause.
func (e *PolicyError) Unwrap() []error {
	errs := []error{ErrPolicy, storage.ErrInvalidArgument}
	if e.Err != nil {
		errs = append(errs, e.Err)
	}
	return errs
}

// Policy is a parsed policy file. It is immutable and safe for concurrent use.
type Policy struct {
	file string
	set  *cedar.PolicySet
	ids  []string // in file order
}

// LoadFile reads and parses the Cedar policy file at path.
func LoadFile(path string) (*Policy, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, &PolicyError{File: path, Msg: "cannot read it: check the --policy path", Err: err}
	}
	return Parse(path, src)
}

// Parse parses Cedar policy text; name is the file name used in messages
// and decisions. A policy's id is its @id("...") annotation, else
// "policy<N>" with N its 0-based index in the file (cedar-go's default).
func Parse(name string, src []byte) (*Policy, error) {
	list, err := cedar.NewPolicyListFromBytes(name, src)
	if err != nil {
		// cedar-go positions parse errors at "<input>"; name the file instead.
		msg := strings.TrimPrefix(err.Error(), "parser error: ")
		msg = strings.ReplaceAll(msg, "<input>", name)
		return nil, &PolicyError{File: name, Msg: "syntax error: " + msg + ": fix the Cedar at that line and column (syntax: https://docs.cedarpolicy.com/policies/syntax-policy.html)"}
	}
	if len(list) == 0 {
		return nil, &PolicyError{File: name, Msg: "holds no policies, and a policy file with no policies denies everything: add permit policies, or drop --policy to run without authorization"}
	}
	p := &Policy{file: name, set: cedar.NewPolicySet()}
	where := map[string]int{}
	for i, cp := range list {
		id := "policy" + strconv.Itoa(i)
		if a, ok := cp.Annotations()["id"]; ok {
			id = string(a)
		}
		line := cp.Position().Line
		if prev, dup := where[id]; dup {
			return nil, &PolicyError{File: name, Msg: fmt.Sprintf("policy id %q at line %d is already used at line %d: give each policy its own @id", id, line, prev)}
		}
		if err := checkScope(cp); err != nil {
			return nil, &PolicyError{File: name, Msg: fmt.Sprintf("policy %q at line %d: %v", id, line, err)}
		}
		where[id] = line
		p.ids = append(p.ids, id)
		p.set.Add(cedar.PolicyID(id), cp)
	}
	return p, nil
}

// checkScope refuses scope entities that can never match: a misspelt action
// or entity type in a forbid would silently allow what it meant to forbid.
// Conditions (when/unless) are not checked.
func checkScope(cp *cedar.Policy) error {
	a := (*xast.Policy)(cp.AST())
	var uids []cedar.EntityUID
	var typs []cedar.EntityType
	collect := func(n xast.IsScopeNode) {
		switch s := n.(type) {
		case xast.ScopeTypeEq:
			uids = append(uids, s.Entity)
		case xast.ScopeTypeIn:
			uids = append(uids, s.Entity)
		case xast.ScopeTypeInSet:
			uids = append(uids, s.Entities...)
		case xast.ScopeTypeIs:
			typs = append(typs, s.Type)
		case xast.ScopeTypeIsIn:
			typs = append(typs, s.Type)
			uids = append(uids, s.Entity)
		}
	}
	collect(a.Principal)
	collect(a.Action)
	collect(a.Resource)
	for _, u := range uids {
		typs = append(typs, u.Type)
		if u.Type == TypeAction && !Action(u.ID).Valid() {
			return fmt.Errorf("unknown action %s: retain's actions are %s", u, actionList())
		}
	}
	for _, t := range typs {
		if !slices.Contains(entityTypes, t) {
			return fmt.Errorf("unknown entity type %s: retain's types are %s", t, typeList())
		}
	}
	return nil
}

func actionList() string {
	s := make([]string, len(actions))
	for i, a := range actions {
		s[i] = strconv.Quote(string(a))
	}
	return strings.Join(s, ", ")
}

func typeList() string {
	s := make([]string, len(entityTypes))
	for i, t := range entityTypes {
		s[i] = string(t)
	}
	return strings.Join(s, ", ")
}

// File is the name the policy was loaded from.
func (p *Policy) File() string { return p.file }

// IDs lists the policy ids in file order.
func (p *Policy) IDs() []string { return slices.Clone(p.ids) }

// Reason is one policy that determined a decision.
type Reason struct {
	ID     string `json:"id"`
	Effect string `json:"effect"` // "permit" or "forbid"
	File   string `json:"file"`
	Line   int    `json:"line"`
}

func (r Reason) String() string {
	return fmt.Sprintf("%s %q at %s:%d", r.Effect, r.ID, r.File, r.Line)
}

// Decision is the outcome of one authorization, kept for audit lines.
// Reasons are the determining policies: the matching forbids on a deny by
// forbid, the matching permits on an allow, none on a default deny. Errors
// are evaluation errors and request errors; any error denies.
type Decision struct {
	Allowed bool     `json:"allowed"`
	Reasons []Reason `json:"reasons,omitempty"`
	Errors  []string `json:"errors,omitempty"`
}

// String is the compact form: `allow by policy "x"`, `deny (no permit)`,
// `deny by forbid "y"`, `deny (evaluation error)`.
func (d Decision) String() string {
	ids := make([]string, len(d.Reasons))
	for i, r := range d.Reasons {
		ids[i] = strconv.Quote(r.ID)
	}
	switch {
	case d.Allowed:
		return "allow by policy " + strings.Join(ids, ", ")
	case len(d.Errors) > 0:
		return "deny (error: " + strings.Join(d.Errors, "; ") + ")"
	case len(d.Reasons) > 0:
		return "deny by forbid " + strings.Join(ids, ", ")
	}
	return "deny (no permit)"
}

// Authorize decides whether actor may perform r. Anything not permitted is
// denied, a matching forbid overrides every permit, and an evaluation error
// in any policy denies (fail closed) even where Cedar alone would allow.
func (p *Policy) Authorize(actor string, r Request) Decision {
	if err := r.validate(actor); err != nil {
		return Decision{Errors: []string{err.Error()}}
	}
	res, em := r.entities(actor)
	dec, diag := cedar.Authorize(p.set, em, cedar.Request{
		Principal: cedar.NewEntityUID(TypeActor, cedar.String(actor)),
		Action:    r.Action.UID(),
		Resource:  res,
		Context:   r.context(),
	})
	var d Decision
	for _, e := range diag.Errors {
		d.Errors = append(d.Errors, fmt.Sprintf("policy %q at %s:%d failed to evaluate: %s", e.PolicyID, e.Position.Filename, e.Position.Line, e.Message))
	}
	effect := "permit"
	if !dec {
		effect = "forbid"
	}
	for _, rs := range diag.Reasons {
		d.Reasons = append(d.Reasons, Reason{ID: string(rs.PolicyID), Effect: effect, File: rs.Position.Filename, Line: rs.Position.Line})
	}
	// Cedar iterates policies in map order; sort so audit lines are stable.
	slices.SortFunc(d.Reasons, func(a, b Reason) int { return a.Line - b.Line })
	slices.Sort(d.Errors)
	d.Allowed = bool(dec) && len(d.Errors) == 0
	if d.Allowed != bool(dec) {
		d.Reasons = nil // the permits did not decide; the error did
	}
	return d
}
