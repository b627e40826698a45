package checkpoint

import (
	"errors"
	"testing"

	"github.com/retain-dev/retain/core/authz"
	"github.com/retain-dev/retain/core/storage"
)

// keysOf lists every object of s with its version, to show a denied call
// wrote nothing.
func keysOf(t *testing.T, s *storage.Store) map[string]string {
	t.Helper()
	infos, err := s.List(bg, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, in := range infos {
		m[in.Key] = in.Version
	}
	return m
}

func TestCreateDeniedByGateWritesNothing(t *testing.T) {
	s, _ := memStore(t, "v2-appends")
	p, err := authz.Parse("test.cedar", []byte(`permit(principal, action, resource);
@id("no-create") forbid(principal == Retain::Actor::"alice", action == Retain::Action::"checkpoint create", resource);`))
	if err != nil {
		t.Fatal(err)
	}
	var audited []authz.Request
	ctx := authz.WithGate(bg, authz.NewGate(p, "alice", func(d authz.Decision, r authz.Request) { audited = append(audited, r) }))
	before := keysOf(t, s)
	_, err = Create(ctx, s, "nightly", "")
	if !errors.Is(err, storage.ErrPermissionDenied) || !errors.Is(err, authz.ErrDenied) {
		t.Fatalf("Create under a forbid: %v, want a permission denial", err)
	}
	if len(audited) != 1 || audited[0].Store != "mem://test" || audited[0].Checkpoint != "nightly" {
		t.Fatalf("audited %+v", audited)
	}
	after := keysOf(t, s)
	if len(after) != len(before) {
		t.Fatalf("a denied create wrote: %d objects before, %d after", len(before), len(after))
	}
	for k, v := range before {
		if after[k] != v {
			t.Errorf("%s changed", k)
		}
	}
	// Another actor is permitted and creates it.
	ctx = authz.WithGate(bg, authz.NewGate(p, "bob", nil))
	if _, err := Create(ctx, s, "nightly", ""); err != nil {
		t.Fatalf("permitted create: %v", err)
	}
}
