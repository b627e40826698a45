package conformance

import (
	"fmt"
	"strings"
)

// caseListAfterWrite: where the adapter declares ListAfterWrite, a write
// one process has finished is in the next listing of another process (its
// own plugin instance), with the version the write returned. Retention
// lists to decide what exists (tables, versions, tags); a listing that
// lags a finished write lets a cleanup miss a version committed just
// before it listed.
func caseListAfterWrite(t T, e *Env) {
	if !e.Store.Capabilities().ListAfterWrite {
		t.Skip("adapter does not declare list-after-write")
	}
	p := e.Pool(t)
	rounds := max(20, e.Config.Rounds/4)
	for round := range rounds {
		writer := round % len(p.workers)
		lister := (writer + 1) % len(p.workers)
		key := fmt.Sprintf("law/%04d", round)
		w, err := p.call(writer, request{Op: "put", Prefix: e.Prefix, Key: key, Body: key, N: 1})
		if err != nil {
			t.Fatal(err)
		}
		if !w.OK {
			t.Fatalf("round %d: worker %d's write of %s: %s (%s)", round, writer, key, w.ErrKind, w.Err)
		}
		l, err := p.call(lister, request{Op: "list", Prefix: e.Prefix, Key: "law/"})
		if err != nil {
			t.Fatal(err)
		}
		if !l.OK {
			t.Fatalf("round %d: worker %d's listing: %s (%s)", round, lister, l.ErrKind, l.Err)
		}
		want := key + "@" + w.Version
		if !strings.Contains(","+l.Body+",", ","+want+",") {
			t.Fatalf("round %d: worker %d finished writing %s (version %s); worker %d listed law/ right after and got %d objects without it (%.200s)",
				round, writer, key, w.Version, lister, strings.Count(l.Body, ",")+1, l.Body)
		}
	}
	t.Logf("%d writes, each in the next listing of another process", rounds)
}
