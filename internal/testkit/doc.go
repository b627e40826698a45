// Package testkit holds the test doubles and helpers the test files of
// core, adapters and conformance share: a hook driver, a
// capability-override driver, a fail-operations driver, AWS-environment
// isolation, and MustPut/WantKind. Only tests import it; the drivers wrap
// a real core.Driver, so what is not injected is the real store.
package testkit
