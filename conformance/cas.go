package conformance

import (
	"strconv"
	"time"

	"github.com/retain-dev/retain/core/storage"
)

// caseCompareAndSwap: the lost-update counter across processes ends exact;
// a replace with a stale version is refused and leaves the body as it was;
// a replace of a missing key answers not found.
func caseCompareAndSwap(t T, e *Env) {
	if c := e.Store.Capabilities().ReplaceIfVersion; c.Level == storage.LevelNone {
		t.Skipf("replace-if-version declared none: %s", c.Reason)
	}
	s := e.Store
	v1 := mustPut(t, s, "cas/stale", []byte("one"), storage.PutOptions{})
	mustPut(t, s, "cas/stale", []byte("two"), storage.PutOptions{Mode: storage.PutReplaceIfVersion, IfVersion: v1.Version})
	_, err := s.PutBytes(e.Ctx, "cas/stale", []byte("three"), storage.PutOptions{Mode: storage.PutReplaceIfVersion, IfVersion: v1.Version})
	wantKind(t, err, storage.ErrPreconditionFailed, "replace with a stale version")
	wantBody(t, s, "cas/stale", []byte("two"))
	_, err = s.PutBytes(e.Ctx, "cas/missing", []byte("x"), storage.PutOptions{Mode: storage.PutReplaceIfVersion, IfVersion: v1.Version})
	wantKind(t, err, storage.ErrNotFound, "replace of a missing key")
	wantAbsent(t, s, "cas/missing")

	p := e.Pool(t)
	// Each process increments Rounds/2 times: with P processes contending
	// most attempts are refused at least once, and a refused attempt is
	// what a broken replace would let through (the log counts them).
	per := max(10, e.Config.Rounds/2)
	start := mustPut(t, s, "cas/counter", []byte("0"), storage.PutOptions{})
	resps, err := p.all(e.Ctx, request{Op: "incr", Prefix: e.Prefix, Key: "cas/counter", N: per, At: time.Now().Add(5 * time.Millisecond).UnixNano()})
	var hist []histOp
	retries, transient := 0, 0
	for _, r := range resps {
		hist = append(hist, r.History...)
		retries += r.Retries
		transient += r.TransientReads
		for _, h := range r.History {
			if h.Kind == "cas" {
				e.Latency.Add(time.Duration(h.Ret - h.Call))
			}
		}
	}
	e.s.histories = append(e.s.histories, history{name: "compare-and-swap", model: "cas", ops: hist,
		initial: histOp{Value: "0", Version: start.Version}})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range resps {
		if !r.OK {
			t.Fatalf("worker %d: %s (%s)", r.Worker, r.ErrKind, r.Err)
		}
	}
	body, _ := mustRead(t, s, "cas/counter")
	want := len(p.workers) * per
	if got, _ := strconv.Atoi(string(body)); got != want {
		t.Fatalf("lost updates: %d processes x %d increments ended at %s, want %d", len(p.workers), per, body, want)
	}
	t.Logf("%d increments, %d precondition-failed retries, %d reads answered transient and read again", want, retries, transient)
}
