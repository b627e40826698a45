package authz_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/retain-dev/retain/core/authz"
	"github.com/retain-dev/retain/core/storage"
)

// A policy that permits everything except checkpoint delete for bob, and a
// gate carried in the context.
func Example() {
	p, err := authz.Parse("/etc/retain/policy.cedar", []byte(`
@id("everyone")
permit (principal, action, resource);

@id("no-deletes")
forbid (
  principal == Retain::Actor::"bob",
  action == Retain::Action::"checkpoint delete",
  resource
);
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	audit := func(d authz.Decision, r authz.Request) { fmt.Printf("audit: %s: %s\n", r, d) }
	ctx := authz.WithGate(context.Background(), authz.NewGate(p, "bob", audit))

	err = authz.Check(ctx, authz.Request{Action: authz.ActionCheckpointCreate, Store: "file:///x", Checkpoint: "nightly"})
	fmt.Println("create:", err)

	err = authz.Check(ctx, authz.Request{Action: authz.ActionCheckpointDelete, Store: "file:///x", Checkpoint: "nightly"})
	fmt.Println("delete:", err)
	fmt.Println(errors.Is(err, authz.ErrDenied), errors.Is(err, storage.ErrPermissionDenied))
	// Output:
	// audit: checkpoint create on checkpoint "nightly" in store "file:///x": allow by policy "everyone"
	// create: <nil>
	// audit: checkpoint delete on checkpoint "nightly" in store "file:///x": deny by forbid "no-deletes"
	// delete: checkpoint delete on checkpoint "nightly" in store "file:///x": denied for actor "bob" by policy file /etc/retain/policy.cedar (forbid policy "no-deletes" at line 5): a forbid overrides every permit: narrow that forbid in the policy or act as another --actor
	// true true
}

// Without a gate in the context, Check allows: no policy, no authorization.
func ExampleCheck_noGate() {
	err := authz.Check(context.Background(), authz.Request{Action: authz.ActionCheckpointDelete, Store: "file:///x"})
	fmt.Println(err)
	// Output: <nil>
}
