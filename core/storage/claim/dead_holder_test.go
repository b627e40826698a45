package claim_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/retain-dev/retain/core/storage/claim"
)

// TestHeldByDeadProcessSaysSo: a claim whose holder ran on this host and
// has exited (a real process, reaped) is reported as held by a pid that is
// no longer running, with the command that continues: the resume for a
// cleanup run, the takeover with the real token for anything else. A live
// holder keeps the plain message.
func TestHeldByDeadProcessSaysSo(t *testing.T) {
	ctx := context.Background()
	for _, action := range []string{"cleanup", "checkpoint-create"} {
		s := newStore(t)
		h, err := claim.Acquire(ctx, s, claim.Request{Action: action, Actor: "alice"})
		if err != nil {
			t.Fatal(err)
		}
		_, err = claim.Acquire(ctx, s, claim.Request{Action: "reconcile"})
		var held *claim.HeldError
		if !errors.As(err, &held) || held.Dead != "" || strings.Contains(err.Error(), "no longer running") ||
			!strings.Contains(err.Error(), "("+action+", operation ") {
			t.Fatalf("live holder: %v", err)
		}
		forgeDeadOwner(t, s)
		p, _, _ := claim.Read(ctx, s)
		_, err = claim.Acquire(ctx, s, claim.Request{Action: "reconcile"})
		if !errors.As(err, &held) || !errors.Is(err, claim.ErrHeld) || held.Dead == "" {
			t.Fatalf("dead holder: %v", err)
		}
		msg := err.Error()
		takeover := fmt.Sprintf("`retain claim takeover STORE --token %s --reason 'pid %d on %s is no longer running'`", h.Token(), p.PID, p.Host)
		if !strings.Contains(msg, fmt.Sprintf("held by pid %d on %s, which is no longer running (pid %d is not running", p.PID, p.Host, p.PID)) ||
			!strings.Contains(msg, takeover) {
			t.Fatalf("dead %s holder: %s", action, msg)
		}
		resume := strings.Contains(msg, "`retain cleanup run STORE --resume --confirm-write-outage`")
		if resume != (action == "cleanup") {
			t.Fatalf("dead %s holder, resume named %v: %s", action, resume, msg)
		}
		if next := claim.NextCommands("file:///srv/my store", p); !strings.Contains(next[len(next)-1], "takeover 'file:///srv/my store' --token") {
			t.Fatalf("store not quoted: %v", next)
		}
		if _, err := claim.Takeover(ctx, s, claim.TakeoverRequest{Token: h.Token(), Reason: "the hint's takeover"}); err != nil {
			t.Fatalf("the named takeover is refused: %v", err)
		}
	}
}

// A holder on another host is never called dead: this host cannot check.
func TestHeldOnOtherHostIsNotCalledDead(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	if _, err := claim.Acquire(ctx, s, claim.Request{Action: "cleanup", Host: "far-away-host"}); err != nil {
		t.Fatal(err)
	}
	forgeDeadOwner(t, s)
	_, err := claim.Acquire(ctx, s, claim.Request{Action: "cleanup"})
	var held *claim.HeldError
	if !errors.As(err, &held) || held.Dead != "" || strings.Contains(err.Error(), "no longer running") {
		t.Fatalf("remote holder: %v", err)
	}
}
