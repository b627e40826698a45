package conformance

import "github.com/retain-dev/retain/core/storage"

// caseConditionalDelete: a delete with a stale version is refused and the
// object stays; with the current version it goes; on a missing key it
// answers not found.
func caseConditionalDelete(t T, e *Env) {
	if c := e.Store.Capabilities().DeleteIfVersion; c.Level == storage.LevelNone {
		t.Skipf("delete-if-version declared none: %s", c.Reason)
	}
	s := e.Store
	v1 := mustPut(t, s, "cd/k", []byte("one"), storage.PutOptions{})
	v2 := mustPut(t, s, "cd/k", []byte("two"), storage.PutOptions{})
	wantKind(t, s.Delete(e.Ctx, "cd/k", storage.DeleteOptions{IfVersion: v1.Version}), storage.ErrPreconditionFailed, "delete with a stale version")
	wantBody(t, s, "cd/k", []byte("two"))
	if err := s.Delete(e.Ctx, "cd/k", storage.DeleteOptions{IfVersion: v2.Version}); err != nil {
		t.Fatalf("delete with the current version: %v", err)
	}
	wantAbsent(t, s, "cd/k")
	wantKind(t, s.Delete(e.Ctx, "cd/k", storage.DeleteOptions{IfVersion: v2.Version}), storage.ErrNotFound, "delete-if-version of a missing key")
	// A recreated key has a new version: the old token must not delete it.
	// With tokens that are content hashes only new bytes make a new token.
	again := []byte("two")
	if !s.Capabilities().UniqueVersions {
		again = []byte("two, rewritten")
	}
	mustPut(t, s, "cd/k", again, storage.PutOptions{})
	wantKind(t, s.Delete(e.Ctx, "cd/k", storage.DeleteOptions{IfVersion: v2.Version}), storage.ErrPreconditionFailed, "delete of a recreated key with the old version")
	wantBody(t, s, "cd/k", again)
}
