package daemon

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/retain-dev/retain/core/checkpoint"
	"github.com/retain-dev/retain/core/checkpoint/registry"
	"github.com/retain-dev/retain/core/retention"
	"github.com/retain-dev/retain/core/storage/claim"
)

// ScheduleReport is what one pass did for one schedule.
type ScheduleReport struct {
	// Schedule is the schedule's name template.
	Schedule string    `json:"schedule"`
	Slot     time.Time `json:"slot"`
	// Name is the slot's checkpoint name.
	Name string `json:"name"`
	// Created is the checkpoint this pass took.
	Created *checkpoint.Created `json:"created,omitempty"`
	// Taken says why the slot needed nothing: its name was already used
	// (by this daemon earlier, another replica, or a checkpoint deleted
	// since — a slot is taken once).
	Taken string `json:"taken,omitempty"`
	// Pruned is the series' rotation, when the pass ran one.
	Pruned *checkpoint.Pruned `json:"pruned,omitempty"`
	// Error is why the slot's checkpoint or the rotation failed; the next
	// pass in the slot tries again.
	Error string `json:"error,omitempty"`
	// Deferred names the holder of the retention claim when the create or
	// rotation found it held: a wait (the next pass in the slot tries
	// again), not a failure, as for retention.
	Deferred string `json:"deferred,omitempty"`
}

// scheduled takes the checkpoint of each schedule's current slot unless
// its name was used, then rotates the series when something would go.
// One registry head serves every schedule of a pass with nothing to do:
// the head the pass's reconcile read (head), else one read now. A head a
// little old is safe: the create takes the name only under the claim, on
// the head it reads there (FreshName), and a rotation decides again under
// its claim; a slot taken meanwhile is reported taken, and a checkpoint
// created meanwhile waits for the next pass's rotation.
func (d *Daemon) scheduled(ctx context.Context, r *PassReport, head *registry.Snapshot) {
	if len(d.Config.Checkpoints) == 0 {
		return
	}
	now := d.now()
	snap, headErr := head, error(nil)
	if snap == nil {
		_, snap, headErr = registry.Open(d.Store, registry.Options{}).Head(ctx)
	}
	opts := checkpoint.Options{Actor: d.actor(), Host: d.Identity, FreshName: true}
	for _, s := range d.Config.Checkpoints {
		sr := ScheduleReport{Schedule: s.Name, Slot: s.Slot(now)}
		r.Checkpoints = append(r.Checkpoints, sr)
		rep := &r.Checkpoints[len(r.Checkpoints)-1]
		var err error
		if rep.Name, err = s.NameAt(rep.Slot); err != nil {
			d.scheduleFailed(rep, err)
			continue
		}
		if headErr != nil {
			d.scheduleFailed(rep, fmt.Errorf("reading the registry: %w", headErr))
			continue
		}
		created := false
		if res, ok := snap.Reservation(rep.Name); ok {
			rep.Taken = takenBy(res)
		} else {
			c, err := opts.Create(ctx, d.Store, rep.Name, s.Branch)
			switch {
			case err == nil:
				rep.Created, created = c, true
				d.Metrics.Scheduled.WithLabelValues("created").Inc()
				d.Logger.Info("checkpoint_scheduled", "name", rep.Name, "slot", rep.Slot.Format(time.RFC3339), "id", c.ID,
					"operation", c.OperationID, "tables", len(c.Tables), "actor", d.actor())
			case errors.Is(err, registry.ErrNameTaken) || errors.Is(err, registry.ErrNameTombstoned):
				// Another replica took the slot between our read and our claim.
				rep.Taken = "taken meanwhile by another process: " + err.Error()
			default:
				d.scheduleFailed(rep, err)
				continue
			}
		}
		if rep.Taken != "" {
			d.Metrics.Scheduled.WithLabelValues("taken").Inc()
		}
		judged := now
		if created && rep.Created.CreatedAt.After(judged) {
			// The create stamps its checkpoint by the clock after it ran:
			// judged by the pass's start it would be "from the future" and
			// keep one more than the policy says.
			judged = rep.Created.CreatedAt
		}
		d.rotate(ctx, s, snap, created, judged, rep)
	}
}

// rotate runs the series' prune when a decision on the snapshot read (or,
// after a create, on the head under the claim) would remove something.
func (d *Daemon) rotate(ctx context.Context, s Schedule, snap *registry.Snapshot, created bool, now time.Time, rep *ScheduleReport) {
	pol := s.Keep.Policy()
	if pol.Empty() {
		return
	}
	match, err := s.Match()
	if err != nil {
		d.scheduleFailed(rep, err)
		return
	}
	req := checkpoint.PruneRequest{Match: []string{match}, Policy: pol, Now: now,
		Filter: func(cp registry.Checkpoint) bool { return s.InSeries(cp.Name, cp.CreatedAt) || cp.Actor == d.actor() }}
	if !created {
		ds, err := checkpoint.DecidePrune(snap, req)
		if err != nil {
			d.scheduleFailed(rep, err)
			return
		}
		gone := 0
		for _, dc := range ds {
			if !dc.Keep {
				gone++
			}
		}
		if gone == 0 {
			return
		}
	}
	p, err := retention.PruneCheckpoints(ctx, d.Store, checkpoint.Options{Actor: d.actor(), Host: d.Identity}, req)
	rep.Pruned = p
	if err != nil {
		d.scheduleFailed(rep, fmt.Errorf("rotating %s: %w", match, err))
		return
	}
	if p.Removed > 0 {
		d.Metrics.Rotated.Add(float64(p.Removed))
		var names []string
		for _, dc := range p.Decisions {
			if !dc.Keep {
				names = append(names, dc.Name)
			}
		}
		d.Logger.Info("checkpoints_rotated", "match", match, "policy", p.Policy, "removed", names, "kept", p.Kept, "operation", p.OperationID, "actor", d.actor())
	}
	for _, e := range p.TagErrors {
		d.Logger.Warn("rotation left a pin tag for reconcile", "match", match, "error", e)
	}
}

func (d *Daemon) scheduleFailed(rep *ScheduleReport, err error) {
	if errors.Is(err, claim.ErrHeld) {
		rep.Deferred = holder(err)
		d.Metrics.ClaimWaits.Inc()
		d.Logger.Warn("scheduled checkpoint deferred: the retention claim is held; the next pass in the slot tries again", "name", rep.Name, "holder", holder(err))
		return
	}
	rep.Error = err.Error()
	d.Metrics.Scheduled.WithLabelValues("failed").Inc()
	d.Metrics.PassFailures.WithLabelValues("checkpoints").Inc()
	d.Logger.Error("scheduled_checkpoint_failed", "name", rep.Name, "slot", rep.Slot.Format(time.RFC3339), "error", err)
}

// takenBy says who used a slot's name.
func takenBy(r registry.Reservation) string {
	if r.State == registry.Live {
		return fmt.Sprintf("checkpoint %s holds the name", r.CheckpointID)
	}
	return fmt.Sprintf("checkpoint %s had the name and was deleted; a slot is taken once", r.CheckpointID)
}
