package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/retain-dev/retain/core/authz"
	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/claim"
)

// claimStatus is the JSON of `retain claim status`.
type claimStatus struct {
	Store   string         `json:"store"`
	Held    bool           `json:"held"`
	Holder  *claim.Payload `json:"holder,omitempty"`
	Version string         `json:"version,omitempty"`
	Age     string         `json:"age,omitempty"`
	// Unreadable is set, with Held, when the claim object exists but
	// cannot be read: nothing names its owner.
	Unreadable *unreadableClaim `json:"unreadable,omitempty"`
	// Dead is the proof that the holder, on this host, no longer runs;
	// Next the commands that continue, in order.
	Dead string   `json:"dead,omitempty"`
	Next []string `json:"next,omitempty"`
}

type unreadableClaim struct {
	claim.Unreadable
	// Next is the one command that clears it.
	Next string `json:"next"`
}

func (a *app) claimCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "claim", Short: "The retention claim: at most one retention operation owns a store"}
	status := &cobra.Command{
		Use:   "status STORE",
		Short: "Show who holds the store's retention claim, or that it is free",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return onStore(a, cmd.Context(), args[0], false, func(s *storage.Store) (*claimStatus, error) {
				st := claimStatus{Store: args[0]}
				p, info, err := claim.Read(cmd.Context(), s)
				var ue *claim.UnreadableError
				switch {
				case errors.Is(err, storage.ErrNotFound):
				case errors.As(err, &ue):
					// Reported, not failed on: status is how the operator
					// learns the version the way out needs.
					st.Held, st.Version = true, ue.Version
					st.Unreadable = &unreadableClaim{Unreadable: ue.Unreadable, Next: ue.TakeoverCommand(args[0])}
				case err != nil:
					return nil, err
				default:
					st.Held, st.Holder, st.Version = true, p, info.Version
					st.Age = time.Since(p.CreatedAt).Round(time.Second).String()
					if d := claim.DeadHere("", p); d != "" {
						st.Dead, st.Next = d, claim.NextCommands(args[0], p)
					}
				}
				return &st, nil
			}, func(st *claimStatus) error {
				if !st.Held {
					fmt.Fprintf(a.stdout, "%s: free (no %s)\n", args[0], claim.Key)
					return nil
				}
				if u := st.Unreadable; u != nil {
					fmt.Fprintf(a.stdout, "%s: held by an UNREADABLE claim object\n  object     %s, version %s, %d bytes, sha256 %s\n  problem    it %s; nothing in it names an owner\n  way out    once you have made sure no retention operation is running on this store:\n             %s\n",
						args[0], claim.Key, u.Version, u.Size, u.SHA256, u.Why, u.Next)
					return nil
				}
				p := st.Holder
				fmt.Fprintf(a.stdout, "%s: held\n  operation  %s (%s)\n  actor      %s\n  since      %s (%s ago)\n  host       %s pid %d\n  token      %s\n",
					args[0], p.OperationID, p.Action, p.Actor, p.CreatedAt.Format(time.RFC3339), st.Age, p.Host, p.PID, p.OwnerToken)
				if p.Takeover != nil {
					fmt.Fprintf(a.stdout, "  took over  %s: %s (%s)\n", p.Takeover.PreviousOperationID, p.Takeover.Reason, p.Takeover.Proof)
				}
				if st.Dead != "" {
					fmt.Fprintf(a.stdout, "  NOT RUNNING the holder is gone (%s)\n", st.Dead)
					for _, n := range st.Next {
						fmt.Fprintf(a.stdout, "  next       %s\n", n)
					}
				}
				return nil
			})
		},
	}
	var token, reason, attested, unreadable string
	takeover := &cobra.Command{
		Use:   "takeover STORE (--token T | --unreadable VERSION) --reason R [--owner-dead-attested WHY]",
		Short: "Replace a stale claim whose owner provably cannot resume, or clear an unreadable one",
		Long: `Takes over the retention claim of a dead owner. It needs the claim's exact
owner token (see 'retain claim status') and proof that the owner cannot
resume. On the owner's own host the tool proves it (the host rebooted, or the
pid is gone or belongs to another process); for an owner on another host you
attest it with --owner-dead-attested and a reason, which is recorded in the
new claim and the log. A claim is never taken over for its age.

A claim object that cannot be read at all (torn, empty, not a claim, another
format) names no owner and no token: 'retain claim status' reports it with
its version token, and --unreadable VERSION clears exactly that object. Then
nothing can prove the owner dead, so --owner-dead-attested is required: your
statement that no retention operation is running on this store. The cleared
object's version, size and SHA-256 and your attestation are recorded in the
new claim, the log and the output.

The takeover is conditional: it deletes exactly the stale claim object (by
version) and then creates its own; the new claim is released at once, so the
store is free for the next operation.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch {
			case (token == "") == (unreadable == ""):
				return usageError{errors.New("give --token T (the claim's owner token) or, for a claim object that cannot be read, --unreadable VERSION (its version token); `retain claim status STORE` shows which, and the value")}
			case reason == "":
				return usageError{errors.New("--reason is required")}
			case unreadable != "" && attested == "":
				return usageError{errors.New("--unreadable needs --owner-dead-attested WHY: your statement that no retention operation is running on this store (nothing in an unreadable claim names an owner retain could check)")}
			}
			actor, err := a.actor(cmd)
			if err != nil {
				return err
			}
			s, loc, err := a.openStore(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			defer s.Close()
			// core/storage/claim knows nothing of policies: the takeover is
			// authorized here, before it writes.
			if err := authz.Check(cmd.Context(), authz.Request{Action: authz.ActionClaimTakeover, Store: authz.StoreName(s)}); err != nil {
				return err
			}
			req := claim.Request{Action: "takeover", Actor: actor, Scope: claim.ScopeFor(loc), Logger: a.logger()}
			var h *claim.Handle
			if unreadable != "" {
				h, err = claim.TakeoverUnreadable(cmd.Context(), s, claim.UnreadableTakeoverRequest{
					Request: req, Version: unreadable, Reason: reason, Attested: attested,
				})
			} else {
				h, err = claim.Takeover(cmd.Context(), s, claim.TakeoverRequest{
					Request: req, Token: token, Reason: reason, OwnerDeadAttested: attested,
				})
			}
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
			if u := rec.Unreadable; u != nil {
				fmt.Fprintf(a.stdout, "cleared the unreadable claim object (version %s, %d bytes, sha256 %s): %s\nproof: %s\nthe store is free\n",
					u.Version, u.Size, u.SHA256, rec.Reason, rec.Proof)
				return nil
			}
			fmt.Fprintf(a.stdout, "took over %s from %s pid %d: %s\nproof: %s\nthe store is free\n",
				rec.PreviousOperationID, rec.PreviousHost, rec.PreviousPID, rec.Reason, rec.Proof)
			return nil
		},
	}
	takeover.Flags().StringVar(&token, "token", "", "the stale claim's exact owner token")
	takeover.Flags().StringVar(&reason, "reason", "", "why, recorded in the claim and the log")
	takeover.Flags().StringVar(&attested, "owner-dead-attested", "", "your statement that the owner on another host cannot resume (with --unreadable: that no retention operation is running on this store)")
	takeover.Flags().StringVar(&unreadable, "unreadable", "", "clear the claim object that cannot be read, of exactly this version token (as `retain claim status` prints it), instead of --token")
	cmd.AddCommand(status, takeover)
	return cmd
}
