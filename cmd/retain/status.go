package main

import (
	"context"
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/retain-dev/retain/core/checkpoint"
	"github.com/retain-dev/retain/core/daemon"
	"github.com/retain-dev/retain/core/retention"
	"github.com/retain-dev/retain/core/retention/runs"
	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/claim"
)

// statusJSON is the JSON of `retain status`.
type statusJSON struct {
	Store string `json:"store"`
	// Parallelism is the most requests this command let be in flight to
	// the store: its adapter's default, or --parallelism.
	Parallelism int            `json:"parallelism"`
	Daemon      *daemon.State  `json:"daemon"`
	Claim       *claim.Payload `json:"claim_holder"`
	// ClaimUnreadable is set when the claim object exists but cannot be
	// read: the store is claimed by nothing that names an owner.
	ClaimUnreadable *claim.Unreadable `json:"claim_unreadable,omitempty"`
	OpenRuns        []string          `json:"unfinished_cleanup_runs"`
	Pins            checkpoint.Health `json:"pin_health"`
	// LanceCleanup: pinned tables whose own Lance cleanup (LanceDB's
	// optimize(), a lance.auto_cleanup config) trips over the pins.
	LanceCleanup []retention.LanceCleanupHazard `json:"lance_cleanup"`
	ReportedAt   time.Time                      `json:"reported_at"`
}

func (a *app) statusCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "status STORE",
		Short: "Show the retention window, the last completed retention pass, the next one due, the claim holder and pin health",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return onStore(a, cmd.Context(), args[0], false, func(s *storage.Store) (*statusJSON, error) {
				return readStatus(cmd.Context(), s, args[0])
			}, func(st *statusJSON) error {
				a.printStatus(st)
				return nil
			})
		},
	}
}

// readStatus gathers what `retain status` shows of the store.
func readStatus(ctx context.Context, s *storage.Store, store string) (*statusJSON, error) {
	st := statusJSON{Store: store, Parallelism: s.Parallelism(), ReportedAt: time.Now().UTC(), OpenRuns: []string{}}
	var err error
	if st.Daemon, err = daemon.ReadState(ctx, s); err != nil {
		return nil, err
	}
	p, _, err := claim.Read(ctx, s)
	var ue *claim.UnreadableError
	switch {
	case errors.Is(err, storage.ErrNotFound):
	case errors.As(err, &ue):
		st.ClaimUnreadable = &ue.Unreadable
	case err != nil:
		return nil, err
	default:
		st.Claim = p
	}
	if runs, err := runs.Open(ctx, s); err != nil {
		return nil, err
	} else if runs != nil {
		st.OpenRuns = runs
	}
	_, infos, err := checkpoint.List(ctx, s)
	if err != nil {
		return nil, err
	}
	st.Pins = checkpoint.Summarize(infos)
	st.LanceCleanup = retention.LanceCleanupHazards(ctx, s, infos)
	return &st, nil
}

func (a *app) printStatus(st *statusJSON) {
	tw := tabwriter.NewWriter(a.stdout, 2, 4, 2, ' ', 0)
	when := func(t *time.Time) string {
		if t == nil {
			return "never"
		}
		return t.UTC().Format(time.RFC3339) + " (" + time.Since(*t).Round(time.Second).String() + " ago)"
	}
	fmt.Fprintf(tw, "store\t%s\n", st.Store)
	fmt.Fprintf(tw, "parallelism\tat most %d requests in flight (--parallelism)\n", st.Parallelism)
	if d := st.Daemon; d == nil {
		fmt.Fprintf(tw, "daemon\tnever ran on this store: no retention window is enforced\n")
	} else {
		win := d.Window
		if win == "" {
			win = "none configured: retention is not enforced"
		}
		if !d.Enabled {
			win += " (maintenance DISABLED: not enforced)"
		}
		fmt.Fprintf(tw, "window\t%s\n", win)
		fmt.Fprintf(tw, "interval\t%s (retention at most every %s)\n", d.Interval, d.Every)
		fmt.Fprintf(tw, "last pass\t%s by %s\n", when(d.LastPass), d.Daemon)
		fmt.Fprintf(tw, "last retention\t%s %s\n", when(d.LastRetention), d.LastRetentionOperation)
		if d.NextRetentionDue != nil {
			fmt.Fprintf(tw, "next due\t%s\n", d.NextRetentionDue.UTC().Format(time.RFC3339))
		}
		if d.RetentionFailures > 0 {
			fmt.Fprintf(tw, "failures\t%d retention pass(es) failed since the last completed one: %s\n", d.RetentionFailures, d.LastError)
		}
	}
	if u := st.ClaimUnreadable; u != nil {
		fmt.Fprintf(tw, "claim\theld by an UNREADABLE claim object (version %s): it %s; clear it with `%s`\n", u.Version, u.Why, u.TakeoverCommand(st.Store))
	} else if st.Claim == nil {
		fmt.Fprintf(tw, "claim\tfree\n")
	} else {
		fmt.Fprintf(tw, "claim\theld by %s (%s, operation %s) on %s pid %d since %s\n", st.Claim.Actor, st.Claim.Action, st.Claim.OperationID,
			st.Claim.Host, st.Claim.PID, st.Claim.CreatedAt.Format(time.RFC3339))
	}
	for _, op := range st.OpenRuns {
		fmt.Fprintf(tw, "unfinished\tcleanup run %s: `retain cleanup run --resume` finishes it\n", op)
	}
	p := st.Pins
	fmt.Fprintf(tw, "pins\t%d live checkpoints, %d pins: %d ok, %d missing, %d other; %d degraded, %d invalid checkpoints\n",
		p.LiveCheckpoints, p.Pins, p.OK, p.Missing, p.Other, p.Degraded, p.Invalid)
	// One line per table reads well for a few tables; a store of hundreds
	// gets the optimize() warning once, for the table it hits first
	// (--json has every table), and a line only for what is particular.
	const perTable = 3
	if n := len(st.LanceCleanup); n > perTable {
		first := st.LanceCleanup[0]
		for _, h := range st.LanceCleanup {
			if h.OptimizeThrowsFrom != nil && (first.OptimizeThrowsFrom == nil || h.OptimizeThrowsFrom.Before(*first.OptimizeThrowsFrom)) {
				first = h
			}
		}
		if len(first.Warnings) > 0 {
			fmt.Fprintf(tw, "lance cleanup\t%d pinned tables; first %s: %s\n", n, first.Table, first.Warnings[0])
		}
	}
	for _, h := range st.LanceCleanup {
		for i, w := range h.Warnings {
			if i == 0 && len(st.LanceCleanup) > perTable {
				continue // the optimize() warning, said once above
			}
			fmt.Fprintf(tw, "lance cleanup\t%s: %s\n", h.Table, w)
		}
		if h.Error != "" {
			fmt.Fprintf(tw, "lance cleanup\t%s: could not read all of it (%s)\n", h.Table, h.Error)
		}
	}
	tw.Flush()
}
