package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/cobra"

	"github.com/retain-dev/retain/adapters/bundled"
	"github.com/retain-dev/retain/core"
	"github.com/retain-dev/retain/core/claim"
)

// openStore opens the store at uri writable (through its bundled adapter,
// out of process) and returns its parsed location too.
func (a *app) openStore(ctx context.Context, uri string) (*core.Store, core.Location, error) {
	return a.open(ctx, uri, bundled.Open)
}

// openStoreReadOnly opens the store for a command that only looks: the
// adapter writes nothing, not even at open, and every write is refused.
func (a *app) openStoreReadOnly(ctx context.Context, uri string) (*core.Store, core.Location, error) {
	return a.open(ctx, uri, bundled.OpenReadOnly)
}

func (a *app) open(ctx context.Context, uri string, open func(context.Context, string, hclog.Logger) (*core.Store, error)) (*core.Store, core.Location, error) {
	loc, err := core.ParseLocation(uri)
	if err != nil {
		return nil, loc, err
	}
	s, err := open(ctx, uri, a.logger())
	return s, loc, err
}

// claimStatus is the JSON of `retain claim status`.
type claimStatus struct {
	Store   string         `json:"store"`
	Held    bool           `json:"held"`
	Holder  *claim.Payload `json:"holder,omitempty"`
	Version string         `json:"version,omitempty"`
	Age     string         `json:"age,omitempty"`
}

func (a *app) claimCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "claim", Short: "The retention claim: at most one retention operation owns a store"}
	status := &cobra.Command{
		Use:   "status STORE",
		Short: "Show who holds the store's retention claim, or that it is free",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, _, err := a.openStoreReadOnly(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			defer s.Close()
			st := claimStatus{Store: args[0]}
			p, info, err := claim.Read(cmd.Context(), s)
			switch {
			case errors.Is(err, core.ErrNotFound):
			case err != nil:
				return err
			default:
				st.Held, st.Holder, st.Version = true, p, info.Version
				st.Age = time.Since(p.CreatedAt).Round(time.Second).String()
			}
			if a.jsonOut {
				return a.printJSON(st)
			}
			if !st.Held {
				fmt.Fprintf(a.stdout, "%s: free (no %s)\n", args[0], claim.Key)
				return nil
			}
			fmt.Fprintf(a.stdout, "%s: held\n  operation  %s (%s)\n  actor      %s\n  since      %s (%s ago)\n  host       %s pid %d\n  token      %s\n",
				args[0], p.OperationID, p.Action, p.Actor, p.CreatedAt.Format(time.RFC3339), st.Age, p.Host, p.PID, p.OwnerToken)
			if p.Takeover != nil {
				fmt.Fprintf(a.stdout, "  took over  %s: %s (%s)\n", p.Takeover.PreviousOperationID, p.Takeover.Reason, p.Takeover.Proof)
			}
			return nil
		},
	}
	var token, reason, attested string
	takeover := &cobra.Command{
		Use:   "takeover STORE --token T --reason R [--owner-dead-attested WHY]",
		Short: "Replace a stale claim whose owner provably cannot resume",
		Long: `Takes over the retention claim of a dead owner. It needs the claim's exact
owner token (see 'retain claim status') and proof that the owner cannot
resume. On the owner's own host the tool proves it (the host rebooted, or the
pid is gone or belongs to another process); for an owner on another host you
attest it with --owner-dead-attested and a reason, which is recorded in the
new claim and the log. A claim is never taken over for its age.

The takeover is conditional: it deletes exactly the stale claim object (by
version) and then creates its own; the new claim is released at once, so the
store is free for the next operation.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if token == "" || reason == "" {
				return usageError{errors.New("--token and --reason are required")}
			}
			s, loc, err := a.openStore(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			defer s.Close()
			h, err := claim.Takeover(cmd.Context(), s, claim.TakeoverRequest{
				Request: claim.Request{Action: "takeover", Scope: claim.ScopeFor(loc), Logger: a.logger()},
				Token:   token, Reason: reason, OwnerDeadAttested: attested,
			})
			if err != nil {
				return err
			}
			rec := h.Payload().Takeover
			if err := h.Release(cmd.Context()); err != nil {
				return fmt.Errorf("took over, but releasing the new claim failed: %w", err)
			}
			if a.jsonOut {
				return a.printJSON(map[string]any{"store": args[0], "taken_over": rec, "released": true})
			}
			fmt.Fprintf(a.stdout, "took over %s from %s pid %d: %s\nproof: %s\nthe store is free\n",
				rec.PreviousOperationID, rec.PreviousHost, rec.PreviousPID, rec.Reason, rec.Proof)
			return nil
		},
	}
	takeover.Flags().StringVar(&token, "token", "", "the stale claim's exact owner token")
	takeover.Flags().StringVar(&reason, "reason", "", "why, recorded in the claim and the log")
	takeover.Flags().StringVar(&attested, "owner-dead-attested", "", "your statement that the owner on another host cannot resume")
	cmd.AddCommand(status, takeover)
	return cmd
}
