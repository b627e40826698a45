// Package checkpoint is retain's checkpoints as a caller uses them:
// checkpoint.Create, Delete, List, Show (with pin health), Reconcile and
// DropLost, and table discovery with incarnations (DiscoverTables). The
// registry beneath them (the log of snapshots that is the authority on
// which checkpoints exist) is package checkpoint/registry. Order is what
// makes them safe: create writes a recovery sidecar and every pin tag
// before it publishes the checkpoint in one registry commit; delete
// tombstones the checkpoint in one commit before it reclaims the tags; so
// every crash window over-retains and none under-retains, and Reconcile
// finishes or rolls back what a crash left. A failpoint
// (internal/failpoint) follows every step. See docs/checkpoints.md,
// "Protocols".
package checkpoint
