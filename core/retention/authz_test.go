package retention

import (
	"errors"
	"testing"
	"time"

	"github.com/retain-dev/retain/core/authz"
	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/memstore"
)

func gatedMem(t *testing.T) *storage.Store {
	t.Helper()
	s, err := storage.NewStore(bg, "memory", memstore.New())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s.At(storage.Location{Scheme: "mem", Bucket: "b"})
}

func TestRunDeniedByGateWritesNothing(t *testing.T) {
	s := gatedMem(t)
	p, err := authz.Parse("p.cedar", []byte(`permit(principal, action, resource);
forbid(principal, action == Retain::Action::"cleanup run", resource) when { context.command == "cleanup run" };`))
	if err != nil {
		t.Fatal(err)
	}
	ctx := authz.WithGate(bg, authz.NewGate(p, "alice", nil))
	_, err = Run(ctx, s, Policy{KeepLast: 1}, RunOptions{Actor: "alice", ConfirmWriteOutage: true})
	if !errors.Is(err, storage.ErrPermissionDenied) {
		t.Fatalf("Run under a forbid: %v", err)
	}
	if objs, err := s.List(bg, "", 0); err != nil || len(objs) != 0 {
		t.Fatalf("a denied run wrote %v (%v)", objs, err)
	}
}

func TestAuditRecordCarriesDecision(t *testing.T) {
	s := gatedMem(t)
	p, err := authz.Parse("p.cedar", []byte(`permit(principal, action, resource);`))
	if err != nil {
		t.Fatal(err)
	}
	ctx, err := authz.CheckNote(authz.WithGate(bg, authz.NewGate(p, "alice", nil)), authz.Request{Action: authz.ActionCleanupRun, Store: authz.StoreName(s)})
	if err != nil {
		t.Fatal(err)
	}
	au := &auditor{s: s, op: "op1", actor: "alice"}
	if err := au.write(ctx, AuditRecord{Event: AuditRemoving, Table: "t.lance"}); err != nil {
		t.Fatal(err)
	}
	if err := au.write(bg, AuditRecord{Event: AuditRemoved, Table: "t.lance"}); err != nil {
		t.Fatal(err)
	}
	recs, err := ReadAudit(bg, s, time.Time{})
	if err != nil || len(recs) != 2 {
		t.Fatalf("%v %v", recs, err)
	}
	for _, r := range recs {
		want := ""
		if r.Event == AuditRemoving {
			want = `allow by policy "policy0" (p.cedar)`
		}
		if r.Authz != want {
			t.Errorf("%s: authz %q, want %q", r.Event, r.Authz, want)
		}
	}
}
