package authz

import (
	"fmt"
	"strings"

	cedar "github.com/cedar-policy/cedar-go"
	"github.com/retain-dev/retain/core/storage"
)

// Action is one of retain's mutating commands, as policies name it.
type Action string

// The actions, one per mutating command. The string is the Cedar action id:
// ActionCheckpointCreate is Retain::Action::"checkpoint create".
const (
	ActionCheckpointCreate Action = "checkpoint create"
	ActionCheckpointDelete Action = "checkpoint delete"
	ActionCheckpointPrune  Action = "checkpoint prune"
	ActionCleanupRun       Action = "cleanup run" // also cleanup resume and abandon; Request.Command tells them apart
	ActionReconcile        Action = "reconcile"
	ActionBranchCreate     Action = "branch create"
	ActionBranchDelete     Action = "branch delete"
	ActionTagCreate        Action = "tag create"
	ActionTagUpdate        Action = "tag update"
	ActionTagDelete        Action = "tag delete"
	ActionClaimTakeover    Action = "claim takeover"
	ActionLeaseAcquire     Action = "lease acquire"
	ActionLeaseRenew       Action = "lease renew"
	ActionLeaseRelease     Action = "lease release"
)

var actions = []Action{
	ActionCheckpointCreate, ActionCheckpointDelete, ActionCheckpointPrune,
	ActionCleanupRun, ActionReconcile,
	ActionBranchCreate, ActionBranchDelete,
	ActionTagCreate, ActionTagUpdate, ActionTagDelete,
	ActionClaimTakeover,
	ActionLeaseAcquire, ActionLeaseRenew, ActionLeaseRelease,
}

// Actions lists every action, in a stable order.
func Actions() []Action { return append([]Action(nil), actions...) }

// Valid reports whether a is one of the actions above.
func (a Action) Valid() bool {
	for _, k := range actions {
		if a == k {
			return true
		}
	}
	return false
}

// Cedar entity types. They are namespaced so a policy file shared with other
// applications cannot match retain's entities by accident.
const (
	TypeActor      cedar.EntityType = "Retain::Actor"
	TypeAction     cedar.EntityType = "Retain::Action"
	TypeStore      cedar.EntityType = "Retain::Store"
	TypeTable      cedar.EntityType = "Retain::Table"
	TypeCheckpoint cedar.EntityType = "Retain::Checkpoint"
	TypeBranch     cedar.EntityType = "Retain::Branch"
	TypeTag        cedar.EntityType = "Retain::Tag"
)

var entityTypes = []cedar.EntityType{TypeActor, TypeAction, TypeStore, TypeTable, TypeCheckpoint, TypeBranch, TypeTag}

// UID is the Cedar entity uid of the action.
func (a Action) UID() cedar.EntityUID { return cedar.NewEntityUID(TypeAction, cedar.String(a)) }

// Request is one mutating action on a resource. Store is required; the
// other names are optional and the most specific one named is the resource
// (Tag, then Branch, then Checkpoint, then Table, then Store).
type Request struct {
	Action     Action // required
	Command    string // the command as typed, e.g. "cleanup resume"; defaults to Action
	Store      string // the store URI, required
	Table      string
	Checkpoint string
	Branch     string
	Tag        string
}

func (r Request) command() string {
	if r.Command != "" {
		return r.Command
	}
	return string(r.Action)
}

// validate refuses requests that are programming errors, so they deny
// instead of being evaluated with a half-built resource.
func (r Request) validate(actor string) error {
	switch {
	case r.Action == "":
		return storage.Errorf("authorize", "", storage.ErrInvalidArgument, "the request names no action: set Request.Action to one of authz.Actions()")
	case !r.Action.Valid():
		return storage.Errorf("authorize", string(r.Action), storage.ErrInvalidArgument, "unknown action: use one of the authz.Action constants")
	case r.Store == "":
		return storage.Errorf("authorize", string(r.Action), storage.ErrInvalidArgument, "the request names no store: set Request.Store to the store URI")
	case actor == "":
		return storage.Errorf("authorize", string(r.Action), storage.ErrInvalidArgument, "no actor: pass --actor (or give NewGate an actor) when a policy is in force")
	}
	return nil
}

// idSep joins the parts of a compound entity id. Checkpoint names cannot
// hold it, but table names (folder names) and store URIs can, so escape
// rewrites '%' and '|' inside each part: ids stay unique, and policies that
// must match exactly should prefer the attributes over spelling ids.
const idSep = "|"

var idEscaper = strings.NewReplacer("%", "%25", "|", "%7C")

func compoundID(parts ...string) cedar.String {
	for i, p := range parts {
		parts[i] = idEscaper.Replace(p)
	}
	return cedar.String(strings.Join(parts, idSep))
}

// StoreUID, TableUID, CheckpointUID, BranchUID and TagUID give the entity
// uid of each resource kind, for callers and tests that write policies.
func StoreUID(store string) cedar.EntityUID {
	return cedar.NewEntityUID(TypeStore, cedar.String(store))
}

// TableUID is the uid of a table in a store.
func TableUID(store, table string) cedar.EntityUID {
	return cedar.NewEntityUID(TypeTable, compoundID(store, table))
}

// CheckpointUID is the uid of a checkpoint in a store.
func CheckpointUID(store, name string) cedar.EntityUID {
	return cedar.NewEntityUID(TypeCheckpoint, compoundID(store, name))
}

// BranchUID is the uid of a branch; table may be "" for a store-wide branch.
func BranchUID(store, table, branch string) cedar.EntityUID {
	return cedar.NewEntityUID(TypeBranch, compoundID(store, table, branch))
}

// TagUID is the uid of a tag; table may be "" for a store-wide tag.
func TagUID(store, table, tag string) cedar.EntityUID {
	return cedar.NewEntityUID(TypeTag, compoundID(store, table, tag))
}

// entities builds the request's resource, its ancestors and the principal.
// Every resource entity carries all of the attributes, "" when the request
// does not name it, because an evaluation error denies: a policy reading
// resource.table must not break store-level actions.
func (r Request) entities(actor string) (cedar.EntityUID, cedar.EntityMap) {
	attrs := func(name string) cedar.Record {
		return cedar.NewRecord(cedar.RecordMap{
			"store":      cedar.String(r.Store),
			"table":      cedar.String(r.Table),
			"checkpoint": cedar.String(r.Checkpoint),
			"branch":     cedar.String(r.Branch),
			"tag":        cedar.String(r.Tag),
			"name":       cedar.String(name),
		})
	}
	em := cedar.EntityMap{}
	add := func(uid cedar.EntityUID, name string, parent *cedar.EntityUID) {
		e := cedar.Entity{UID: uid, Attributes: attrs(name)}
		if parent != nil {
			e.Parents = cedar.NewEntityUIDSet(*parent)
		}
		em[uid] = e
	}
	store := StoreUID(r.Store)
	add(store, r.Store, nil)
	parent := store
	if r.Table != "" {
		t := TableUID(r.Store, r.Table)
		add(t, r.Table, &store)
		parent = t
	}
	res := parent
	switch {
	case r.Tag != "":
		res = TagUID(r.Store, r.Table, r.Tag)
		add(res, r.Tag, &parent)
	case r.Branch != "":
		res = BranchUID(r.Store, r.Table, r.Branch)
		add(res, r.Branch, &parent)
	case r.Checkpoint != "":
		// A checkpoint belongs to the store even when a table is named.
		res = CheckpointUID(r.Store, r.Checkpoint)
		add(res, r.Checkpoint, &store)
	}
	p := cedar.NewEntityUID(TypeActor, cedar.String(actor))
	em[p] = cedar.Entity{UID: p, Attributes: cedar.NewRecord(cedar.RecordMap{"name": cedar.String(actor)})}
	return res, em
}

// context is the Cedar context record.
func (r Request) context() cedar.Record {
	return cedar.NewRecord(cedar.RecordMap{
		"command": cedar.String(r.command()),
		"action":  cedar.String(r.Action),
	})
}

// Resource renders the resource for messages: `checkpoint "nightly" in
// store "file:///x"`.
func (r Request) Resource() string {
	in := "store " + storage.Quote(r.Store)
	if r.Table != "" {
		in = "table " + storage.Quote(r.Table) + " in " + in
	}
	switch {
	case r.Tag != "":
		return "tag " + storage.Quote(r.Tag) + " of " + in
	case r.Branch != "":
		return "branch " + storage.Quote(r.Branch) + " of " + in
	case r.Checkpoint != "":
		return "checkpoint " + storage.Quote(r.Checkpoint) + " in store " + storage.Quote(r.Store)
	}
	return in
}

func (r Request) String() string { return fmt.Sprintf("%s on %s", r.Action, r.Resource()) }
