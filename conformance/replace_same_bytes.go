package conformance

import (
	"github.com/retain-dev/retain/core/storage"
)

// testReplaceSameBytes: a replace-if-version that writes the bytes already
// stored still makes a new version where the adapter declares unique
// versions, so two replaces expecting the same version cannot both
// succeed. An adapter that skips a write of identical bytes and answers
// with the old version lets both through: a compare-and-swap whose
// writers happen to agree on the bytes is then no longer exclusive
// (the claim's takeover and the registry's commit are such swaps).
func testReplaceSameBytes(t T, s *storage.Store) {
	skipIfNone(t, s, storage.FeatureReplaceIfVersion)
	if !s.Capabilities().UniqueVersions {
		t.Skip("adapter does not declare unique versions: a replace with the same bytes may keep the version (retention then never compares tokens of equal bytes)")
	}
	ctx := ctxT(t)
	body := []byte("the same bytes")
	v1 := mustPut(t, s, "rsb/k", body, storage.PutOptions{})
	v2 := mustPut(t, s, "rsb/k", body, storage.PutOptions{Mode: storage.PutReplaceIfVersion, IfVersion: v1.Version})
	if v2.Version == v1.Version {
		t.Fatalf("a replace of %q with the same bytes kept version %q, but the adapter declares unique versions", "rsb/k", v1.Version)
	}
	_, err := s.PutBytes(ctx, "rsb/k", body, storage.PutOptions{Mode: storage.PutReplaceIfVersion, IfVersion: v1.Version})
	wantKind(t, err, storage.ErrPreconditionFailed, "a second replace expecting the version the first replaced")
	st, err := s.Stat(ctx, "rsb/k")
	if err != nil {
		t.Fatal(err)
	}
	if st.Version != v2.Version {
		t.Fatalf("after the refused replace the version is %q, want the first replace's %q", st.Version, v2.Version)
	}
}
