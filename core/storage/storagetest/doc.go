// Package testkit holds the test doubles and helpers that tests of code on
// the storage contract share: a hook driver, a capability-override driver,
// a fail-operations driver, a request-counting driver (for the benchmarks'
// req/op), a child-process harness, and MustPut/WantKind. Only tests and
// benchmarks import it, never the contract packages; the drivers wrap a
// real storage.Driver, so what is not injected is the real store. It lives in
// the SDK because the SDK's own tests use it and Go's internal rule would
// keep the main module out of an internal copy.
package storagetest
