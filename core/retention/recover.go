package retention

import (
	"context"
	"fmt"

	"github.com/retain-dev/retain/core/authz"
	"github.com/retain-dev/retain/core/checkpoint"
	"github.com/retain-dev/retain/core/checkpoint/registry"
	"github.com/retain-dev/retain/core/storage"
)

// Audit events of `retain registry recover`: before its first write, the
// checkpoints it will restore and the pins it will replace; after its
// last, what it did.
const (
	AuditRegistryRecovering = "registry_recovering"
	AuditRegistryRecovered  = "registry_recovered"
)

// RecoverRegistry is `retain registry recover`: checkpoint.Recover under the
// claim, its changes framed by audit lines like every removal (no line,
// no change). ro.DryRun reports what it would do and writes nothing.
func RecoverRegistry(ctx context.Context, s *storage.Store, o checkpoint.Options, ro checkpoint.RecoverOptions) (*checkpoint.RecoverReport, error) {
	audit := func(ctx context.Context, event, op, actor string, rep *checkpoint.RecoverReport) error {
		au := &auditor{s: s, op: op, actor: actor}
		r := AuditRecord{Event: AuditRegistryRecovering, Table: registry.RegistryPath}
		for _, c := range rep.Checkpoints {
			r.Versions = append(r.Versions, fmt.Sprintf("checkpoint %s (%s) from %s, %d table(s)", c.ID, c.Name, c.Source, len(c.Tables)))
		}
		for _, d := range rep.Dropped {
			r.Versions = append(r.Versions, fmt.Sprintf("pin %s:%s dropped (%s)", d.Path, d.Tag, d.Why))
		}
		if event == "recovered" {
			r.Event, r.FilesRemoved = AuditRegistryRecovered, len(rep.Replaced)+len(rep.Dropped)
			r.Cutoff = fmt.Sprintf("registry version %d", rep.RegistryVersion)
		}
		return au.write(ctx, r)
	}
	ro.Audit = audit
	// As in checkpoint.Recover, checked here too so the allow reaches the
	// audit records.
	ctx, err := authz.CheckNote(ctx, authz.Request{Action: authz.ActionReconcile, Command: "registry recover", Store: authz.StoreName(s)})
	if err != nil {
		return nil, err
	}
	return o.Recover(ctx, s, ro)
}
