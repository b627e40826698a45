package conformance

import (
	"encoding/json"
	"errors"
	"time"

	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/claim"
)

// caseClaim proves the retention claim on this adapter:
//   - across P processes exactly one acquires per round;
//   - a claim with created_at far in the past is never taken for its age,
//     and a takeover without proof is refused, leaving the claim untouched;
//   - a stale owner that resumes after a takeover fails its next Verify,
//     and its Release leaves the new owner's claim intact.
func caseClaim(t T, e *Env) {
	if c := e.Store.Capabilities().CreateIfAbsent; c.Level == storage.LevelNone {
		t.Skipf("create-if-absent declared none (%s): the claim cannot be held on this adapter", c.Reason)
	}
	s := e.Store
	scope := claim.ScopeFor(e.Loc)
	if err := s.Require(storage.FeatureCreateIfAbsent, scope); err != nil {
		t.Skipf("the claim refuses this store: %v", err)
	}

	// Ancient claim of an owner on another host: held forever, no takeover
	// without an attestation.
	ancient := claim.Payload{Format: claim.Format, OperationID: "ancient", Action: "cleanup", Actor: "conformance",
		CreatedAt: time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC), OwnerToken: "0123456789abcdef0123456789abcdef",
		Host: "conformance-other-host", PID: 1}
	b, _ := json.Marshal(ancient)
	mustPut(t, s, claim.Key, b, storage.PutOptions{Mode: storage.PutCreateIfAbsent})
	_, err := claim.Acquire(e.Ctx, s, claim.Request{Action: "conformance", Scope: scope})
	if !errors.Is(err, claim.ErrHeld) {
		t.Fatalf("acquire over a claim from 2001: want held, got %v", err)
	}
	_, err = claim.Takeover(e.Ctx, s, claim.TakeoverRequest{Request: claim.Request{Action: "conformance", Scope: scope}, Token: ancient.OwnerToken, Reason: "it is old"})
	if !errors.Is(err, claim.ErrNoProof) {
		t.Fatalf("takeover without proof: want refused for lack of proof, got %v", err)
	}
	wantBody(t, s, claim.Key, b)
	if err := s.Delete(e.Ctx, claim.Key, storage.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	p := e.Pool(t)
	rounds := max(10, e.Config.Rounds/4)
	for round := range rounds {
		resps, err := p.all(e.Ctx, request{Op: "claim-acquire", Prefix: e.Prefix, At: time.Now().Add(5 * time.Millisecond).UnixNano()})
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		owner := -1
		for i, r := range resps {
			switch {
			case r.OK && owner >= 0:
				t.Fatalf("round %d: workers %d and %d both hold the claim", round, owner, i)
			case r.OK:
				owner = i
			case r.ErrKind != "held":
				t.Fatalf("round %d: worker %d: %s (%s), want held", round, i, r.ErrKind, r.Err)
			}
		}
		if owner < 0 {
			t.Fatalf("round %d: nobody acquired the claim", round)
		}
		start := time.Now()
		r, err := p.call(owner, request{Op: "claim-release", Prefix: e.Prefix, Token: resps[owner].Token})
		if err != nil || !r.OK {
			t.Fatalf("round %d: owner %d release: %v %s %s", round, owner, err, r.ErrKind, r.Err)
		}
		e.Latency.Add(time.Since(start))
	}

	// A live owner on this host cannot be taken over: the tool sees it run.
	r, err := p.call(0, request{Op: "claim-acquire", Prefix: e.Prefix})
	if err != nil || !r.OK {
		t.Fatalf("worker 0 acquire: %v %s", err, r.Err)
	}
	_, err = claim.Takeover(e.Ctx, s, claim.TakeoverRequest{Request: claim.Request{Action: "conformance", Scope: scope}, Token: r.Token, Reason: "test", OwnerDeadAttested: "wrongly attested"})
	if !errors.Is(err, claim.ErrNoProof) {
		t.Fatalf("takeover of a live owner on this host: want refused, got %v", err)
	}
	if r2, _ := p.call(0, request{Op: "claim-verify", Prefix: e.Prefix, Token: r.Token}); !r2.OK {
		t.Fatalf("a refused takeover disturbed the owner: %s", r2.Err)
	}
	if r2, _ := p.call(0, request{Op: "claim-release", Prefix: e.Prefix, Token: r.Token}); !r2.OK {
		t.Fatalf("release: %s", r2.Err)
	}

	// Stale owner: worker 1 claims as if from another host; the operator
	// attests it dead (wrongly: it is only paused) and takes over.
	r, err = p.call(1, request{Op: "claim-acquire", Prefix: e.Prefix, Host: "conformance-paused-host"})
	if err != nil || !r.OK {
		t.Fatalf("worker 1 acquire: %v %s", err, r.Err)
	}
	h, err := claim.Takeover(e.Ctx, s, claim.TakeoverRequest{Request: claim.Request{Action: "conformance", Scope: scope}, Token: r.Token, Reason: "owner unreachable", OwnerDeadAttested: "conformance: host declared dead"})
	if err != nil {
		t.Fatalf("attested takeover: %v", err)
	}
	if r2, _ := p.call(1, request{Op: "claim-verify", Prefix: e.Prefix, Token: r.Token}); r2.OK || r2.ErrKind != "lost" {
		t.Fatalf("the stale owner's Verify after a takeover: want lost, got ok=%v %s %s", r2.OK, r2.ErrKind, r2.Err)
	}
	if r2, _ := p.call(1, request{Op: "claim-release", Prefix: e.Prefix, Token: r.Token}); r2.OK || r2.ErrKind != "lost" {
		t.Fatalf("the stale owner's Release (mismatched token and version): want refused as lost, got ok=%v %s %s", r2.OK, r2.ErrKind, r2.Err)
	}
	if err := h.Verify(e.Ctx); err != nil {
		t.Fatalf("the stale owner's release damaged the new owner's claim: %v", err)
	}
	if err := h.Release(e.Ctx); err != nil {
		t.Fatal(err)
	}
}
