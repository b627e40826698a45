package claim_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/claim"
	"github.com/retain-dev/retain/core/storage/memstore"
)

// tornClaims are claim objects a torn write, a bad restore or an operator
// can leave: each must read as unreadable, never as free or as a holder.
func tornClaims(t *testing.T) map[string][]byte {
	full, err := json.Marshal(claim.Payload{Format: claim.Format, OperationID: "op-1", Action: "cleanup", OwnerToken: strings.Repeat("ab", 16), Host: "h", PID: 1})
	if err != nil {
		t.Fatal(err)
	}
	return map[string][]byte{
		"truncated JSON": full[:len(full)/2],
		"random bytes":   {0x9f, 0x00, 0xff, 0x13, 0x37, 0xc3, 0x28, 0x7b, 0x0a},
		"empty object":   {},
		"no owner token": []byte(`{"format":1,"operation_id":"op-1"}`),
		"another format": []byte(`{"format":2,"owner_token":"abc"}`),
	}
}

// An unreadable claim keeps the store claimed, and every refusal names the
// one way out; that way out needs a reason, an attestation and the exact
// version, records them, and leaves a store the next operation acquires.
func TestUnreadableClaimClearedOnlyByAttestedTakeover(t *testing.T) {
	ctx := context.Background()
	for name, body := range tornClaims(t) {
		t.Run(name, func(t *testing.T) {
			for _, st := range map[string]*storage.Store{"delete-if-version": newStore(t), "no conditional delete": noCondDeleteStore(t)} {
				info, err := st.PutBytes(ctx, claim.Key, body, storage.PutOptions{})
				if err != nil {
					t.Fatal(err)
				}
				untouched := func(what string) {
					t.Helper()
					if now, err := st.Stat(ctx, claim.Key); err != nil || now.Version != info.Version {
						t.Fatalf("%s touched the unreadable claim: %+v %v", what, now, err)
					}
				}
				way := "retain claim takeover STORE --unreadable=" + info.Version + " --reason R --owner-dead-attested WHY"

				_, _, err = claim.Read(ctx, st)
				var ue *claim.UnreadableError
				if !errors.As(err, &ue) || !errors.Is(err, claim.ErrUnreadable) || ue.Version != info.Version || ue.Size != len(body) || !strings.Contains(err.Error(), way) {
					t.Fatalf("read: %v", err)
				}
				_, err = claim.Acquire(ctx, st, claim.Request{Action: "cleanup"})
				if !errors.Is(err, claim.ErrHeld) || !strings.Contains(err.Error(), way) {
					t.Fatalf("acquire: %v", err)
				}
				_, err = claim.Takeover(ctx, st, claim.TakeoverRequest{Request: claim.Request{Action: "takeover"}, Token: "x", Reason: "r", OwnerDeadAttested: "sure"})
				if !errors.Is(err, claim.ErrUnreadable) || !strings.Contains(err.Error(), way) {
					t.Fatalf("token takeover: %v", err)
				}
				untouched("acquire and token takeover")

				req := claim.UnreadableTakeoverRequest{Request: claim.Request{Action: "takeover"}, Version: info.Version, Reason: "torn write after a crash", Attested: "no retention job runs on this store"}
				for what, r := range map[string]claim.UnreadableTakeoverRequest{
					"no attestation": {Request: req.Request, Version: req.Version, Reason: req.Reason},
					"no reason":      {Request: req.Request, Version: req.Version, Attested: req.Attested},
					"no version":     {Request: req.Request, Reason: req.Reason, Attested: req.Attested},
				} {
					if _, err := claim.TakeoverUnreadable(ctx, st, r); !errors.Is(err, storage.ErrInvalidArgument) {
						t.Fatalf("%s: %v", what, err)
					}
				}
				wrong := req
				wrong.Version = info.Version + "x"
				if _, err := claim.TakeoverUnreadable(ctx, st, wrong); !errors.Is(err, storage.ErrPreconditionFailed) {
					t.Fatalf("wrong version: %v", err)
				}
				untouched("refused takeovers")

				var log bytes.Buffer
				req.Logger = slog.New(slog.NewTextHandler(&log, nil))
				h, err := claim.TakeoverUnreadable(ctx, st, req)
				if err != nil {
					t.Fatal(err)
				}
				sum := sha256.Sum256(body)
				rec := h.Payload().Takeover
				if rec == nil || rec.Unreadable == nil || rec.Unreadable.Version != info.Version || rec.Unreadable.SHA256 != hex.EncodeToString(sum[:]) ||
					rec.Attested != req.Attested || rec.Reason != req.Reason || !strings.Contains(rec.Proof, req.Attested) {
					t.Fatalf("record: %+v", rec)
				}
				if err := h.Verify(ctx); err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(log.String(), "retention claim taken over") || !strings.Contains(log.String(), req.Attested) || !strings.Contains(log.String(), info.Version) {
					t.Fatalf("log: %s", log.String())
				}
				if err := h.Release(ctx); err != nil {
					t.Fatal(err)
				}
				next, err := claim.Acquire(ctx, st, claim.Request{Action: "cleanup"})
				if err != nil {
					t.Fatalf("acquire after clearing: %v", err)
				}
				next.Release(ctx)
			}
		})
	}
}

// --unreadable never replaces a claim that can be read, nor a free store.
func TestUnreadableTakeoverRefusesReadableClaim(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	req := claim.UnreadableTakeoverRequest{Request: claim.Request{Action: "takeover"}, Reason: "r", Attested: "a", Version: "v"}
	if _, err := claim.TakeoverUnreadable(ctx, s, req); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("free store: %v", err)
	}
	h, err := claim.Acquire(ctx, s, claim.Request{Action: "cleanup"})
	if err != nil {
		t.Fatal(err)
	}
	req.Version = h.Version()
	if _, err := claim.TakeoverUnreadable(ctx, s, req); !errors.Is(err, storage.ErrPreconditionFailed) || !strings.Contains(err.Error(), "readable") {
		t.Fatalf("readable claim: %v", err)
	}
	if err := h.Verify(ctx); err != nil {
		t.Fatalf("refused takeover touched the claim: %v", err)
	}
}

func noCondDeleteStore(t *testing.T) *storage.Store {
	s, err := storage.NewStore(context.Background(), "nocond", noCondDelete(memstore.New()))
	if err != nil {
		t.Fatal(err)
	}
	return s
}
