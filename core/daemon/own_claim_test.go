package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/claim"
)

// deadClaim leaves a reconcile claim in s as a process that has exited
// would: this host's boot id, a pid no longer running, host and actor as
// given.
func deadClaim(t *testing.T, s *storage.Store, host, actor string) {
	t.Helper()
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		t.Skip("needs Linux's boot id")
	}
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	p := claim.Payload{Format: claim.Format, OperationID: "reconcile-dead", Action: "reconcile", Actor: actor,
		CreatedAt: time.Now().UTC().Add(-time.Minute), OwnerToken: "tok-dead", Host: host, PID: gone.Process.Pid,
		BootID: strings.TrimSpace(string(boot)), ProcessStart: "1"}
	b, _ := json.Marshal(p)
	if _, err := s.PutBytes(context.Background(), claim.Key, b, storage.PutOptions{Mode: storage.PutCreateIfAbsent}); err != nil {
		t.Fatal(err)
	}
}

// A fleet daemon frees a claim its own identity's earlier process left
// (same host field, same actor, provably gone) and does its pass; a claim
// of the same host field but another actor — a CLI command in a container
// sharing the pod's host name, whose pid this process cannot see — it
// leaves alone, however dead it looks from here.
func TestOwnDeadClaimOnlyTheDaemonsOwn(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name, actor string
		freed       bool
	}{{"own", "r1", true}, {"a CLI command under the same host name", "alice@r1", false}} {
		t.Run(c.name, func(t *testing.T) {
			_, s, _ := store(t, "deletes")
			deadClaim(t, s, "r1", c.actor)
			d := &Daemon{Store: s, Identity: "r1", Shared: true}
			r := d.Pass(ctx)
			_, _, err := claim.Read(ctx, s)
			switch {
			case c.freed && (r.TookOver == "" || r.ReconcileError != "" || !errors.Is(err, storage.ErrNotFound)):
				t.Fatalf("own dead claim not freed: took over %q, reconcile error %q, claim read %v", r.TookOver, r.ReconcileError, err)
			case !c.freed && (r.TookOver != "" || r.ClaimHolder == "" || err != nil):
				t.Fatalf("another actor's claim touched: took over %q, holder %q, claim read %v", r.TookOver, r.ClaimHolder, err)
			}
		})
	}
}
