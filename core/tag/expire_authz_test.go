package tag

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/retain-dev/retain/core/authz"
	"github.com/retain-dev/retain/core/storage"
)

// A policy can tell the expiry reaper's removals from an operator's
// deletes: context.command is "tag expire" for the reaper. Forbidding it
// keeps the expired tag, and an operator's `tag delete` still removes it.
func TestExpiryReaperAuthorizedAsTagExpire(t *testing.T) {
	s, tags := expiryStore(t)
	t0 := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	if _, err := tags.Create(context.Background(), "session-a", CreateOptions{Version: 1, Expires: t0}); err != nil {
		t.Fatal(err)
	}
	p, err := authz.Parse("p.cedar", []byte(`permit(principal, action, resource);
forbid(principal, action == Retain::Action::"tag delete", resource) when { context.command == "tag expire" };`))
	if err != nil {
		t.Fatal(err)
	}
	ctx := authz.WithGate(context.Background(), authz.NewGate(p, "ops", nil))
	r, err := ReapExpired(ctx, s, ReapOptions{Now: func() time.Time { return t0.Add(time.Hour) }, Scope: storage.ScopeHost})
	if r == nil || r.Removed != 0 || len(r.Tags) != 1 || !strings.Contains(r.Tags[0].Why, "kept") {
		t.Fatalf("the reaper under a forbid of tag expire: %+v %v", r, err)
	}
	if _, err := tags.Delete(ctx, "session-a", ""); err != nil {
		t.Fatalf("an operator's delete under the same policy: %v", err)
	}
}
