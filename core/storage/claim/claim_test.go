package claim_test

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
	"github.com/retain-dev/retain/core/storage/memstore"
	"github.com/retain-dev/retain/core/storage/storagetest"
)

func newStore(t *testing.T) *storage.Store {
	s, err := storage.NewStore(context.Background(), "memory", memstore.New())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestAcquireHeldVerifyRelease(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	h, err := claim.Acquire(ctx, s, claim.Request{Action: "cleanup", Actor: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Token()) != 32 {
		t.Fatalf("token %q is not 128 bits of hex", h.Token())
	}
	_, err = claim.Acquire(ctx, s, claim.Request{Action: "cleanup", Actor: "bob"})
	var held *claim.HeldError
	if !errors.As(err, &held) || !errors.Is(err, claim.ErrHeld) || held.Holder.Actor != "alice" {
		t.Fatalf("second acquire: %v", err)
	}
	if held.Holder.PID != os.Getpid() || held.Holder.Host == "" {
		t.Fatalf("holder payload incomplete: %+v", held.Holder)
	}
	if err := h.Verify(ctx); err != nil {
		t.Fatal(err)
	}
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := h.Verify(ctx); !errors.Is(err, claim.ErrLost) {
		t.Fatalf("verify after release: %v", err)
	}
	if err := h.Release(ctx); !errors.Is(err, claim.ErrLost) {
		t.Fatalf("second release: %v", err)
	}
}

// A handle whose claim was replaced (same key, other token) can neither
// verify nor release, and the replacement stays.
func TestStaleHandleCannotRelease(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	old, err := claim.Acquire(ctx, s, claim.Request{Action: "cleanup"})
	if err != nil {
		t.Fatal(err)
	}
	// The old owner is declared dead by attestation... but it is us, on
	// this host, alive: the tool must refuse without proof.
	_, err = claim.Takeover(ctx, s, claim.TakeoverRequest{Token: old.Token(), Reason: "test"})
	if !errors.Is(err, claim.ErrNoProof) {
		t.Fatalf("takeover of a live same-host owner: %v", err)
	}
	if err := old.Verify(ctx); err != nil {
		t.Fatalf("refused takeover touched the claim: %v", err)
	}
	// Forge the holder as a dead process so the takeover is proven.
	forgeDeadOwner(t, s)
	p, _, _ := claim.Read(ctx, s)
	newer, err := claim.Takeover(ctx, s, claim.TakeoverRequest{Token: p.OwnerToken, Reason: "owner crashed"})
	if err != nil {
		t.Fatal(err)
	}
	if rec := newer.Payload().Takeover; rec == nil || !strings.Contains(rec.Proof, "not running") || rec.Reason != "owner crashed" {
		t.Fatalf("takeover record: %+v", rec)
	}
	if err := old.Verify(ctx); !errors.Is(err, claim.ErrLost) {
		t.Fatalf("stale verify: %v", err)
	}
	if err := old.Release(ctx); !errors.Is(err, claim.ErrLost) {
		t.Fatalf("stale release: %v", err)
	}
	if err := newer.Verify(ctx); err != nil {
		t.Fatalf("the stale release hurt the new owner: %v", err)
	}
}

// forgeDeadOwner rewrites the claim as if made by a process that has exited.
func forgeDeadOwner(t *testing.T, s *storage.Store) {
	t.Helper()
	ctx := context.Background()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	p, info, err := claim.Read(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	p.PID = cmd.Process.Pid
	b, _ := json.Marshal(p)
	if _, err := s.PutBytes(ctx, claim.Key, b, storage.PutOptions{Mode: storage.PutReplaceIfVersion, IfVersion: info.Version}); err != nil {
		t.Fatal(err)
	}
}

func putPayload(t *testing.T, s *storage.Store, p claim.Payload) {
	t.Helper()
	b, _ := json.Marshal(p)
	if _, err := s.PutBytes(context.Background(), claim.Key, b, storage.PutOptions{Mode: storage.PutCreateIfAbsent}); err != nil {
		t.Fatal(err)
	}
}

func TestOldClaimIsNeverStolenForItsAge(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	putPayload(t, s, claim.Payload{Format: 1, OperationID: "ancient", Action: "cleanup", Actor: "x",
		CreatedAt: time.Date(1990, 1, 1, 0, 0, 0, 0, time.UTC), OwnerToken: "00112233445566778899aabbccddeeff",
		Host: "far-away-host", PID: 1})
	if _, err := claim.Acquire(ctx, s, claim.Request{Action: "cleanup"}); !errors.Is(err, claim.ErrHeld) {
		t.Fatalf("a 36-year-old claim must stay held: %v", err)
	}
	_, err := claim.Takeover(ctx, s, claim.TakeoverRequest{Token: "00112233445566778899aabbccddeeff", Reason: "old"})
	if !errors.Is(err, claim.ErrNoProof) || !strings.Contains(err.Error(), "far-away-host") {
		t.Fatalf("takeover of a remote owner without attestation: %v", err)
	}
	_, err = claim.Takeover(ctx, s, claim.TakeoverRequest{Token: "wrong", Reason: "old", OwnerDeadAttested: "host decommissioned"})
	if !errors.Is(err, storage.ErrPreconditionFailed) {
		t.Fatalf("takeover with a wrong token: %v", err)
	}
	if p, _, _ := claim.Read(ctx, s); p.OperationID != "ancient" {
		t.Fatal("refused takeovers changed the claim")
	}
	h, err := claim.Takeover(ctx, s, claim.TakeoverRequest{Token: "00112233445566778899aabbccddeeff", Reason: "old", OwnerDeadAttested: "host decommissioned"})
	if err != nil {
		t.Fatal(err)
	}
	if rec := h.Payload().Takeover; rec.Attested != "host decommissioned" || rec.PreviousOperationID != "ancient" {
		t.Fatalf("record: %+v", rec)
	}
}

func TestCorruptClaimStaysHeld(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	s.PutBytes(ctx, claim.Key, []byte("{not json"), storage.PutOptions{})
	_, err := claim.Acquire(ctx, s, claim.Request{Action: "cleanup"})
	var held *claim.HeldError
	if !errors.As(err, &held) || held.Holder != nil || !strings.Contains(err.Error(), "unreadable") {
		t.Fatalf("corrupt claim: %v", err)
	}
}

func TestAcquireRefusesNarrowCreate(t *testing.T) {
	ctx := context.Background()
	s, _ := storage.NewStore(ctx, "narrow", &storagetest.Caps{Driver: memstore.New(), Edit: func(c *storage.Capabilities) {
		c.CreateIfAbsent = storage.Capability{Level: storage.LevelGated, Gate: "g", Scope: storage.ScopeHost}
	}})
	_, err := claim.Acquire(ctx, s, claim.Request{Action: "cleanup", Scope: storage.ScopeGlobal})
	if !errors.Is(err, storage.ErrUnsupported) || !strings.Contains(err.Error(), "create-if-absent") {
		t.Fatalf("global store on host-gated create: %v", err)
	}
	if _, err := claim.Acquire(ctx, s, claim.Request{Action: "cleanup", Scope: storage.ScopeHost}); err != nil {
		t.Fatalf("host scope is enough for a file store: %v", err)
	}
}

// One request to acquire, one to release, on an adapter with conditional
// delete: counted, not timed.
func TestClaimCycleRequests(t *testing.T) {
	ctx := context.Background()
	c := storagetest.NewCounting(memstore.New())
	s, _ := storage.NewStore(ctx, "memory", c)
	h, err := claim.Acquire(ctx, s, claim.Request{Action: "cleanup"})
	if err != nil {
		t.Fatal(err)
	}
	if n := c.Counts().Total(); n != 1 {
		t.Fatalf("acquire took %d requests, want 1: %+v", n, c.Counts())
	}
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if n := c.Counts().Total(); n != 2 {
		t.Fatalf("acquire+release took %d requests, want 2: %+v", n, c.Counts())
	}
}

// noCondDelete declares d without conditional delete.
func noCondDelete(d storage.Driver) storage.Driver {
	return &storagetest.Caps{Driver: d, Edit: func(c *storage.Capabilities) { c.DeleteIfVersion = storage.Capability{Reason: "test"} }}
}

// Without conditional delete, release re-reads and checks before deleting:
// a stale handle is still refused.
func TestReleaseWithoutConditionalDelete(t *testing.T) {
	ctx := context.Background()
	c := storagetest.NewCounting(noCondDelete(memstore.New()))
	s, _ := storage.NewStore(ctx, "nocond", c)
	h, err := claim.Acquire(ctx, s, claim.Request{Action: "cleanup"})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if n := c.Counts(); n.Get != 1 || n.Delete != 1 || n.Total() != 3 {
		t.Fatalf("fallback release: %+v, want 1 get + 1 delete after the create", n)
	}
	h2, _ := claim.Acquire(ctx, s, claim.Request{Action: "cleanup"})
	if err := h.Release(ctx); !errors.Is(err, claim.ErrLost) {
		t.Fatalf("stale handle released through the fallback: %v", err)
	}
	if err := h2.Verify(ctx); err != nil {
		t.Fatal(err)
	}
}

// lostPut applies puts of the claim, then loses the response.
func lostPut(c storagetest.Call, err error) error {
	if c.Op == storagetest.OpPut && err == nil {
		return storage.Errorf("put", c.Key, storage.ErrTransient, "timed out waiting for the response")
	}
	return err
}

// TestAcquireLostResponse: a create whose response was lost is recognised
// by its token (read back), so the claim is not orphaned; a foreign claim
// found on read-back is not mistaken for ours.
func TestAcquireLostResponse(t *testing.T) {
	ctx := context.Background()
	mem := memstore.New()
	s, err := storage.NewStore(ctx, "mem", storagetest.NewHook(mem).After(lostPut))
	if err != nil {
		t.Fatal(err)
	}
	h, err := claim.Acquire(ctx, s, claim.Request{Action: "test"})
	if err != nil {
		t.Fatalf("acquire with a lost response: %v", err)
	}
	if err := h.Verify(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := claim.Acquire(ctx, s, claim.Request{Action: "other"}); !errors.Is(err, claim.ErrHeld) {
		t.Fatalf("second acquire: %v", err)
	}
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, _, err := claim.Read(ctx, s); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("after release: %v", err)
	}
}
