package conformance

import (
	"fmt"
	"time"

	"github.com/retain-dev/retain/core/storage"
)

// caseConditionalDeleteRace: P processes, each with its own plugin
// instance; each round one of them overwrites a key while the others
// delete it expecting the version it had before, all at the same instant.
// Whatever the order, the newest write survives: a delete that lands first
// is undone by the write after it, and a delete after the write holds a
// stale version and must be refused. An adapter that does stat, compare,
// then a plain delete deletes the newer write whenever the write falls
// between its stat and its delete. The histories go to the
// linearizability case (a versioned register that can be deleted).
func caseConditionalDeleteRace(t T, e *Env) {
	if c := e.Store.Capabilities().DeleteIfVersion; c.Level == storage.LevelNone {
		t.Skipf("delete-if-version declared none: %s", c.Reason)
	}
	p := e.Pool(t)
	if len(p.workers) < 2 {
		t.Skip("needs 2 worker processes or more (--processes)")
	}
	s := e.Store
	parent := len(p.workers) // the parent's client id in the history
	var hist []histOp
	keep := func() {
		e.s.histories = append(e.s.histories, history{name: "conditional-delete-race", model: "register", ops: hist})
	}
	// Each of the P−1 deleters deletes twice in a row, racing the write.
	// The first delete of a round to land may succeed (the write undoes
	// it); any other must not remove the written object. Enough rounds
	// that those number what Rounds gives the create race, R·(P−1).
	const perDeleter = 2
	mustRefuse := perDeleter*(len(p.workers)-1) - 1
	rounds := max(1, (e.Config.Rounds*(len(p.workers)-1)+mustRefuse-1)/mustRefuse)
	deletes, retried := 0, 0
	for round := range rounds {
		key := fmt.Sprintf("cdr/%04d", round)
		writer := round % len(p.workers)
		call := time.Now().UnixNano()
		v0 := mustPut(t, s, key, []byte("before"), storage.PutOptions{})
		ops := []histOp{{Client: parent, Kind: "put", Key: key, Value: "before", Version: v0.Version, Call: call, Ret: time.Now().UnixNano(), OK: true}}
		at := time.Now().Add(3 * time.Millisecond).UnixNano()
		reqs := make([]request, len(p.workers))
		body := fmt.Sprintf("written-by-%d-in-round-%d", writer, round)
		for i := range reqs {
			reqs[i] = request{Op: "cdelete", Prefix: e.Prefix, Key: key, Version: v0.Version, N: perDeleter, At: at}
		}
		// The write is tried up to 3 times: a write that fails has an
		// unknown outcome, so such a round is left out of the history and
		// only what survived it is checked.
		reqs[writer] = request{Op: "put", Prefix: e.Prefix, Key: key, Body: body, N: 3, At: at}
		resps, err := p.each(e.Ctx, reqs)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		w := resps[writer]
		if !w.OK {
			keep()
			t.Fatalf("round %d: worker %d's write failed %d times: %s (%s)", round, writer, w.Retries+1, w.ErrKind, w.Err)
		}
		unknown := w.Retries > 0
		if unknown {
			t.Logf("round %d: worker %d's write failed and was tried again (%s): the round is left out of the history", round, writer, w.Err)
		}
		for i, r := range resps {
			ops = append(ops, r.History...)
			for _, h := range r.History {
				if h.Kind == "cdelete" {
					e.Latency.Add(time.Duration(h.Ret - h.Call))
				}
			}
			if i == writer {
				continue
			}
			for _, h := range r.History {
				switch {
				case h.OK:
					deletes++
				case h.ErrKind == storage.ErrPreconditionFailed.String() || h.ErrKind == storage.ErrNotFound.String():
				case h.ErrKind == storage.ErrTransient.String() || h.ErrKind == storage.ErrUnavailable.String():
					// Its outcome is unknown: the round leaves the history,
					// what survived it is still checked.
					unknown = true
				default:
					keep()
					t.Fatalf("round %d: worker %d's stale delete answered %q (%s), want ok, precondition failed or not found", round, i, h.ErrKind, r.Err)
				}
			}
		}
		call = time.Now().UnixNano()
		got, info, err := s.ReadAll(e.Ctx, key)
		ops = append(ops, histOp{Client: parent, Kind: "read", Key: key, Call: call, Ret: time.Now().UnixNano(), OK: err == nil, ErrKind: kindName(err), Value: string(got), Version: info.Version})
		if unknown {
			retried++
		} else {
			hist = append(hist, ops...)
		}
		if err != nil || string(got) != body {
			keep()
			t.Fatalf("round %d: worker %d wrote %s while the others deleted it expecting its earlier version; the key then read %q (%v): a delete with a stale version removed the newer write",
				round, writer, key, got, err)
		}
	}
	keep()
	t.Logf("%d rounds, %d stale deletes landed before the write (and were undone by it), the rest refused or found nothing; %d rounds with an operation of unknown outcome (a write tried again, a delete answered transient) left out of the history", rounds, deletes, retried)
}
