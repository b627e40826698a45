package retention

import (
	"context"
	"errors"
	"testing"

	"github.com/retain-dev/retain/core/storage/claim"
)

// Once one table's claim check fails, the tables already deleting are
// cancelled too: their context ends with the reason, so no table deletes
// past the moment the run knows it no longer holds the store (a resume
// finishes their journaled plans).
func TestStopCancelsTablesInFlight(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	x := &executor{rep: &RunReport{}, runs: make([]TableRun, 2), cancel: cancel}
	lost := &claim.LostError{}
	x.stop(lost)
	if !errors.Is(context.Cause(ctx), lost) {
		t.Fatalf("after a failed claim check the tables' context is %v, want it ended by the loss", context.Cause(ctx))
	}
	x.stop(errors.New("a later failure"))
	if x.stopped() != lost {
		t.Fatalf("the first reason to stop was replaced: %v", x.stopped())
	}
}
