// Package registry is the foundation of retain's checkpoints: the v1 name
// rules, the deterministic names of pin tags, and the registry — the
// logical authority saying which checkpoints exist and exactly which table
// versions each retains. The protocols (create, delete, list/show,
// reconcile) are built on this API in package checkpoint.
//
// # Registry
//
// The registry lives under _retain/registry/ in the store: a log of whole
// snapshots, one object per version, each written with create-if-absent,
// which is the registry's compare-and-swap (two writers of version N+1:
// exactly one wins, the other gets ErrConflict and re-reads). Version
// objects are named like Lance's V2 manifests (VersionKey: 20 digits of
// u64::MAX - N), so an ordered listing returns the newest first and Head
// costs one listing request of page size 2 plus one get, at any depth. Old
// versions are never rewritten; they stay for the pins that keep them.
//
//	reg := registry.Open(store, registry.Options{Scope: claim.ScopeFor(loc)})
//	v, snap, err := reg.Head(ctx)          // version 0 and Empty() on a new store
//	draft := snap.Next()                   // version v+1, a deep copy
//	_, err = draft.Reserve(registry.NewCheckpoint{...})
//	ref, err := reg.Commit(ctx, v, draft)  // ErrConflict: re-read, re-apply, retry
//
// A snapshot (JSON, format 2; over 32 KiB written as format 3 segments, so
// a commit's bytes do not grow with the live checkpoints: segments.go) holds
// name reservations (live | tombstoned,
// with a generation per name), checkpoint headers, one row per pinned
// table, tombstones with their delete_operation_id, the table catalog and
// the gc_boundary list (empty until the cleanup protocol defines it). The
// pure functions over a draft — Reserve, Revive, Tombstone, Purge,
// AddTable, NewIncarnation — check every invariant and leave the draft
// unchanged on error; Validate checks them all again before a commit and
// after every read, and a stored version that fails is ErrCorruptRegistry.
//
// # How create will use it
//
//  1. Capture: Head gives version v and its snapshot. Look the name up:
//     no reservation → Reserve; tombstoned at generation g → Revive(g);
//     live → ErrNameTaken. Capture each table's branch head and
//     lance.PhysRef token; a table not in the catalog gets AddTable (a
//     recreated one NewIncarnation) in the same draft. Choose the id with
//     NewID now: every tag name contains it.
//  2. Under the claim, Head again: a head other than v means someone
//     committed in between; re-validate (or restart) before any tag
//     exists.
//  3. Build the draft of v+1 (Next, catalog changes, Reserve or Revive)
//     and Encode it: the bytes are deterministic, so the Ref of version
//     v+1 — and the registry pin's name, RegistryPinTag(id,
//     RegistryTarget(ref)) — are known before anything is written. Each
//     table pin's name is TablePinTag(id, pin).
//  4. Write the recovery sidecar naming those tags and the Ref, then create
//     every tag (table pins in each table's _refs/tags/, the registry pin
//     under TagsPrefix; the registry pin may name version v+1 before it
//     exists: reconcile treats a registry pin whose version is missing or
//     whose VerifyRef fails as reclaimable unless its checkpoint is live).
//  5. Commit(ctx, v, draft) publishes reservation, header and rows in one
//     CAS. ErrConflict: another writer won version v+1 — the tags just
//     written are reclaimable leftovers; restart from 1. An error of
//     unknown outcome: VerifyRef(ref) says whether version v+1 is ours.
//  6. Delete the sidecar, release the claim. The header's RegistryVersion
//     is v+1: the snapshot that describes the checkpoint, kept by its
//     registry pin.
//
// # How delete will use it
//
// Under the claim: Head, Lookup(name-or-id), Next, Tombstone(id,
// Deletion{OperationID: fresh, ...}), Commit — one CAS tombstones the
// reservation, header and rows. Release the claim, then delete the tags
// (names recomputed from the rows with TablePinTag and from the
// RegistryVersion's Ref with RegistryPinTag), idempotently; a failed tag
// delete only over-retains. A retried delete finding ErrAlreadyTombstoned
// compares the tombstone's DeleteOperationID with its own. Once every tag
// of a tombstoned checkpoint is gone, Purge drops its header, rows and
// tombstone in a later commit; its name keeps a tombstoned reservation so
// generations stay monotonic and the old id never revives.
//
// # Names and tags
//
// ValidateName is the v1 name rule set; refusals are *NameError naming the
// rule. Pin tags are ogcp_v1_<id>_m_<sha256 hex> (registry) and
// ogcp_v1_<id>_t_<sha256 hex> (tables), the digest over PinDigest's
// domain-separated, length-prefixed encoding of the exact target; user
// commands refuse names for which IsReservedTag is true, and reconcile maps
// a tag back to its checkpoint with ParsePinTag. See docs/checkpoints.md.
package registry
