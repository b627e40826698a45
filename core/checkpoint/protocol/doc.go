// Package protocol runs retain's checkpoint protocols on the registry of
// package checkpoint: table discovery and incarnations (DiscoverTables),
// Create, Delete, List/Show with pin health, and Reconcile. Order is what
// makes them safe: create writes a recovery sidecar and every pin tag
// before it publishes the checkpoint in one registry commit; delete
// tombstones the checkpoint in one commit before it reclaims the tags; so
// every crash window over-retains and none under-retains, and Reconcile
// finishes or rolls back what a crash left. A failpoint
// (internal/failpoint) follows every step. See docs/checkpoints.md,
// "Protocols".
package protocol
