package conformance

import (
	"fmt"
	"time"

	"github.com/retain-dev/retain/core/storage"
)

// caseCreateRace: P processes, each with its own plugin instance, race to
// create one key per round. Exactly one wins each round, every other gets
// already-exists, and a read-back shows the winner's body.
func caseCreateRace(t T, e *Env) {
	if c := e.Store.Capabilities().CreateIfAbsent; c.Level == storage.LevelNone {
		t.Skipf("create-if-absent declared none: %s", c.Reason)
	}
	p := e.Pool(t)
	var hist []histOp
	for round := range e.Config.Rounds {
		key := fmt.Sprintf("race/%04d", round)
		at := time.Now().Add(5 * time.Millisecond).UnixNano()
		reqs := make([]request, len(p.workers))
		for i := range reqs {
			reqs[i] = request{Op: "create", Prefix: e.Prefix, Key: key, Body: fmt.Sprintf("worker-%d-round-%d", i, round), At: at}
		}
		resps, err := p.each(e.Ctx, reqs)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		winner := -1
		for i, r := range resps {
			hist = append(hist, r.History...)
			for _, h := range r.History {
				e.Latency.Add(time.Duration(h.Ret - h.Call))
			}
			switch {
			case r.OK && winner >= 0:
				t.Fatalf("round %d: workers %d and %d both created %s", round, winner, i, key)
			case r.OK:
				winner = i
			case r.ErrKind != storage.ErrAlreadyExists.String():
				t.Fatalf("round %d: worker %d lost with %q (%s), want already exists", round, i, r.ErrKind, r.Err)
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: no worker created %s", round, key)
		}
		call := time.Now().UnixNano()
		body, info := mustRead(t, e.Store, key)
		hist = append(hist, histOp{Client: len(p.workers), Kind: "read", Key: key, Call: call, Ret: time.Now().UnixNano(), OK: true, Value: string(body), Version: info.Version})
		if want := reqs[winner].Body; string(body) != want {
			t.Fatalf("round %d: stored body %q, but the winner was worker %d (%q)", round, body, winner, want)
		}
	}
	e.s.histories = append(e.s.histories, history{name: "create-if-absent-race", model: "create", ops: hist})
}
