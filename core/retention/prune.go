package retention

import (
	"context"
	"fmt"
	"time"

	"github.com/retain-dev/retain/core/authz"
	"github.com/retain-dev/retain/core/checkpoint"
	"github.com/retain-dev/retain/core/checkpoint/registry"
	"github.com/retain-dev/retain/core/storage"
)

// Audit events of `retain checkpoint prune`: before the registry commit,
// the checkpoints it will remove and why each goes; after it, that they
// went.
const (
	AuditCheckpointsRemoving = "checkpoints_removing"
	AuditCheckpointsRemoved  = "checkpoints_removed"
)

// PruneCheckpoints is `retain checkpoint prune`: checkpoint.Prune framed by
// audit lines in the store's audit log (no line, no removal).
func PruneCheckpoints(ctx context.Context, s *storage.Store, o checkpoint.Options, req checkpoint.PruneRequest) (*checkpoint.Pruned, error) {
	if !req.DryRun {
		// The check here too (Prune repeats it) so the allow reaches the
		// audit records.
		var err error
		if ctx, err = authz.CheckNote(ctx, authz.Request{Action: authz.ActionCheckpointPrune, Store: authz.StoreName(s)}); err != nil {
			return nil, err
		}
	}
	policy := req.Policy.String()
	req.Audit = func(ctx context.Context, op, actor string, removing []checkpoint.PruneDecision, done bool) error {
		r := AuditRecord{Event: AuditCheckpointsRemoving, Table: registry.RegistryPath, Policy: policy}
		if done {
			r.Event = AuditCheckpointsRemoved
		}
		for _, d := range removing {
			r.Versions = append(r.Versions, fmt.Sprintf("checkpoint %s (%s) of %s created %s", d.Name, d.ID, d.SourceBranch, d.CreatedAt.UTC().Format(time.RFC3339)))
		}
		if done {
			r.VersionsRemoved = len(removing)
		}
		return (&auditor{s: s, op: op, actor: actor}).write(ctx, r)
	}
	return o.Prune(ctx, s, req)
}
