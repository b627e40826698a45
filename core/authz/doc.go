// Package authz authorizes retain's mutating actions with Cedar policies
// (https://www.cedarpolicy.com). Without a policy nothing changes: Check
// allows when the context carries no Gate. With a policy, anything not
// permitted is denied, a matching forbid overrides every permit, and a
// policy that fails to evaluate denies (fail closed).
//
// # Entity model
//
// All entity types live in the Retain namespace.
//
//	principal  Retain::Actor::"<actor>"                      attrs: name
//	action     Retain::Action::"checkpoint create"           see Actions
//	resource   Retain::Store::"<store URI>"
//	           Retain::Table::"<store>|<table>"              parent: the store
//	           Retain::Checkpoint::"<store>|<name>"          parent: the store
//	           Retain::Branch::"<store>|<table>|<branch>"    parent: the table
//	           Retain::Tag::"<store>|<table>|<tag>"          parent: the table
//
// The store URI is StoreName(s): the store's storage.Location as a URI
// without query options (file:///data/db, s3://bucket/prefix, never
// ?endpoint=...), the same string in every check of every package, so a
// forbid cannot be stepped around by adding an option. A tag's table is the
// dataset's root in its store ("" when the store URI is the table itself).
//
// A branch or tag named without a table has the id "<store>||<name>" and the
// store as its parent. The resource is the most specific name a request
// gives (tag, branch, checkpoint, table, store), so `resource in
// Retain::Store::"s3://b/p"` matches every resource of that store and
// `resource in Retain::Table::"s3://b/p|t.lance"` everything in that table.
//
// Inside compound ids '%' and '|' in a part are written %25 and %7C, since
// table names and store URIs may contain '|' (checkpoint names cannot).
// Prefer the attributes to spelling compound ids: every resource entity
// carries the string attributes store, table, checkpoint, branch and tag
// ("" when the request names none, so reading one never fails to evaluate)
// and name, the resource's own name (the URI for a store).
//
// The context record holds command, the command as typed (for example
// "cleanup resume", which authorizes as action "cleanup run"), and action.
//
// # Policy files
//
// A policy's id is its @id("...") annotation, else "policy<N>" with N its
// 0-based position in the file. Decisions and refusals name the determining
// policies by id, file and line. Loading refuses an empty file, duplicate
// ids, and scopes naming an unknown Retain::Action or entity type (a
// misspelt forbid would otherwise never match). Conditions are not checked.
//
// A sample policy file:
//
//	// Operators may do anything.
//	@id("operators")
//	permit (principal == Retain::Actor::"ops", action, resource);
//
//	// The scheduler creates and prunes hourly checkpoints in one store.
//	@id("scheduler-hourly")
//	permit (
//	  principal == Retain::Actor::"scheduler",
//	  action in [Retain::Action::"checkpoint create", Retain::Action::"checkpoint prune"],
//	  resource in Retain::Store::"s3://bucket/prod"
//	) when { resource.name like "hourly/*" };
//
//	// Nobody deletes release tags.
//	@id("keep-release-tags")
//	forbid (principal, action == Retain::Action::"tag delete", resource is Retain::Tag)
//	when { resource.name like "release-*" };
//
// # Library use
//
// Load the file with LoadFile, build a Gate with NewGate and carry it with
// WithGate; each mutating code path calls Check with a Request before it
// acts. A refusal is a *DeniedError matching ErrDenied and
// storage.ErrPermissionDenied; a malformed Request (unknown action, no store,
// no actor) is a storage.ErrInvalidArgument error. Both stop the action.
//
// Gated: checkpoint Create, Delete and DropLost (as "checkpoint delete"),
// Reconcile and Recover (as "reconcile", command "registry recover"),
// retention Run, Resume and Abandon ("cleanup run", command "cleanup
// run|resume|abandon"), branch Create and Delete, tag Create, UpdateMeta
// and Delete, and `retain claim takeover` (core/storage/claim is not gated itself).
// NewLazyGate resolves the actor at the first Check, and CheckNote keeps
// an allow in the context for the store's audit records (Note).
package authz
