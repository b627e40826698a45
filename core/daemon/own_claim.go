package daemon

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/retain-dev/retain/core/retention/runs"
	"github.com/retain-dev/retain/core/storage/claim"
)

// ownDeadClaim handles a pass that found the claim held by a process of
// this replica's own identity (the claim's host) and actor — a daemon of
// this identity, never a CLI command in a container that shares the host
// name — that provably stopped:
// the same proof `retain claim takeover` accepts without an attestation
// (claim.DeadHere: boot id changed, pid gone or reused). A cleanup run
// with a journal is left to the retention part, whose resume takes the
// claim over itself (cleanup=true); any other operation (a reconcile, a
// checkpoint create, a run that died before journaling) changed nothing
// the next reconcile does not repair, so its claim is taken over and
// released here (took=true) and the caller tries again. A claim of
// another identity is never touched: only an operator's attestation
// (`retain claim takeover --owner-dead-attested`) frees it.
func (d *Daemon) ownDeadClaim(ctx context.Context, err error, r *PassReport) (took bool, resume string) {
	var held *claim.HeldError
	if d.Identity == "" || !errors.As(err, &held) || held.Holder == nil || held.Dead == "" {
		return false, ""
	}
	p := held.Holder
	if p.Host != d.Identity || p.Actor != d.actor() {
		return false, ""
	}
	if p.Action == "cleanup" || p.Action == "cleanup-resume" {
		open, oerr := runs.Open(ctx, d.Store)
		if oerr != nil {
			return false, ""
		}
		if slices.Contains(open, p.OperationID) {
			return false, p.OperationID
		}
	}
	req := claim.TakeoverRequest{
		Request: claim.Request{Action: "takeover", Actor: d.actor(), Host: d.Identity, Scope: claim.ScopeFor(d.Store.Location()), Logger: d.Logger},
		Token:   p.OwnerToken,
		Reason:  "the daemon's own earlier process left " + p.Action + " " + p.OperationID,
	}
	h, terr := claim.Takeover(ctx, d.Store, req)
	if terr != nil {
		d.Logger.Warn("cannot take over the claim this identity left", "operation", p.OperationID, "error", terr)
		return false, ""
	}
	if rerr := h.Release(ctx); rerr != nil {
		d.Logger.Warn("took over the claim this identity left but cannot release it", "operation", p.OperationID, "error", rerr)
		return false, ""
	}
	r.TookOver = held.Dead
	d.Logger.Info("took over the claim this identity left", "operation", p.OperationID, "action", p.Action, "proof", held.Dead)
	return true, ""
}

// claimHeld sets how long another process had held the claim.
func (d *Daemon) claimHeld(err error) {
	var held *claim.HeldError
	if errors.As(err, &held) && held.Holder != nil && !held.Holder.CreatedAt.IsZero() {
		d.Metrics.ClaimHeld.Set(max(0, d.now().Sub(held.Holder.CreatedAt).Seconds()))
	}
}

// sharedSkip reads a shared store's record and says why this pass has
// nothing to do ("" when it has): another replica finished a pass within
// the interval and retention is not due by the record's stamp. The
// record's times are another machine's clock: skew only shifts when a
// pass runs, never who may run one (that is the claim's job).
func (d *Daemon) sharedSkip(ctx context.Context) string {
	st, err := ReadState(ctx, d.Store)
	if err != nil || st == nil {
		return ""
	}
	if st.LastRetention != nil && st.LastRetention.After(d.lastRetention) {
		d.lastRetention = *st.LastRetention
		d.state.LastRetentionOperation = st.LastRetentionOperation
		d.Metrics.LastRetention.Set(float64(d.lastRetention.Unix()))
	}
	if d.retryPending || st.LastPass == nil || st.Identity == d.Identity {
		// This replica's own record: its interval governs, as for one daemon.
		return ""
	}
	now := d.now()
	// A tenth of the interval of slack, so a replica on the same tick as
	// the one that just finished does not run a second pass.
	fresh := now.Sub(*st.LastPass) < d.Config.interval()-d.Config.interval()/10
	due := d.Config.RetentionOn() && !now.Before(d.lastRetention.Add(d.Config.every()))
	if fresh && !due {
		return "another replica (" + st.Daemon + ") finished a pass at " + st.LastPass.UTC().Format(time.RFC3339)
	}
	return ""
}
