package conformance

import (
	"context"
	"strconv"
	"sync"

	"github.com/retain-dev/retain/core/storage"
)

// caseGates: every declared gate excludes. A gate of host or global scope
// is held by P worker processes doing unprotected read-modify-write
// increments inside it; the count must come out exact. A process-scoped
// gate is checked with goroutines of this process.
func caseGates(t T, e *Env) {
	gates := e.Store.Capabilities().Gates
	if len(gates) == 0 {
		t.Skip("adapter declares no gates")
	}
	per := max(10, e.Config.Rounds/8)
	for _, g := range gates {
		key := "gate/" + g.Name
		mustPut(t, e.Store, key, []byte("0"), storage.PutOptions{})
		var n int
		if g.Scope >= storage.ScopeHost && e.Shared() {
			p := e.Pool(t)
			resps, err := p.all(e.Ctx, request{Op: "gate-incr", Prefix: e.Prefix, Key: key, Gate: g.Name, N: per})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range resps {
				if !r.OK {
					t.Fatalf("gate %q: worker %d: %s", g.Name, r.Worker, r.Err)
				}
			}
			n = len(p.workers) * per
		} else {
			n = 4 * per
			var wg sync.WaitGroup
			errs := make(chan error, 4)
			for range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range per {
						err := e.Store.WithGates(e.Ctx, storage.ScopeProcess, []string{g.Name}, func(ctx context.Context) error {
							b, _, err := e.Store.ReadAll(ctx, key)
							if err != nil {
								return err
							}
							v, _ := strconv.Atoi(string(b))
							_, err = e.Store.PutBytes(ctx, key, []byte(strconv.Itoa(v+1)), storage.PutOptions{})
							return err
						})
						if err != nil {
							errs <- err
							return
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
		}
		body, _ := mustRead(t, e.Store, key)
		if got, _ := strconv.Atoi(string(body)); got != n {
			t.Fatalf("gate %q (%s scope) did not exclude: %d increments ended at %s", g.Name, g.Scope, n, body)
		}
	}
}
