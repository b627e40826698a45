package retention

import (
	"context"
	"fmt"

	"github.com/retain-dev/retain/core/authz"
	"github.com/retain-dev/retain/core/checkpoint"
	"github.com/retain-dev/retain/core/storage"
)

// Audit events of `retain checkpoint drop-lost`: before the registry
// commit, what will be given up; after it, what was.
const (
	AuditPinDropping = "pin_dropping"
	AuditPinDropped  = "pin_dropped"
)

// DropLostPin is `retain checkpoint drop-lost`: checkpoint.DropLost under the
// claim, framed by audit lines (no line, no change).
func DropLostPin(ctx context.Context, s *storage.Store, o checkpoint.Options, nameOrID, path, reason string) (*checkpoint.DroppedLost, error) {
	audit := func(ctx context.Context, event, op, actor string, d *checkpoint.DroppedLost) error {
		au := &auditor{s: s, op: op, actor: actor}
		r := AuditRecord{Event: AuditPinDropping, Table: d.Lost.Path,
			Versions: []string{fmt.Sprintf("%s v%d of checkpoint %s (%s): %s; reason: %s", d.Lost.Branch, d.Lost.Version, d.ID, d.Name, d.Lost.Why, d.Lost.Reason)}}
		if event == "dropped" {
			r.Event = AuditPinDropped
		}
		return au.write(ctx, r)
	}
	// The check here too (DropLost repeats it) so the allow reaches the
	// audit records.
	ctx, err := authz.CheckNote(ctx, authz.Request{Action: authz.ActionCheckpointDelete, Command: "checkpoint drop-lost", Store: authz.StoreName(s), Checkpoint: nameOrID})
	if err != nil {
		return nil, err
	}
	return o.DropLost(ctx, s, nameOrID, path, checkpoint.DropLostOptions{Reason: reason, Audit: audit})
}
