package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/retain-dev/retain/core/branch"
	"github.com/retain-dev/retain/core/refs/refmeta"
)

func (a *app) branchCreateCmd() *cobra.Command {
	var from, attested string
	var meta []string
	var expires expiryValue
	cmd := &cobra.Command{
		Use:   "create BRANCH TABLE-URI --from SOURCE[@VERSION] [--meta k=v ...] [--expires D|TIME]",
		Short: "Adopt a branch real Lance created: record its source and metadata with a safe lifecycle",
		Long: `Make a branch real Lance created a safe, described retain reference. Real
Lance's branches.create writes the branch's data (its first manifest, whose
base paths point into the parent), which retain does not do itself; retain
then adopts it: under the retention claim it checks that the branch was
forked from --from (BRANCH@VERSION, or BRANCH for whatever version the
branch file records), that its head and fork point can be read, and records
the source and --meta in the branch file's metadata, moving its lifecycle
creating → ready, each step a compare-and-swap on the file.

Running it again with the same source finishes an interrupted adoption, or
reports the branch "already ready"; a different source (or --meta the ready
branch does not carry) is a conflict (exit 1). A branch left creating by a
process that died is taken over only with proof it is dead: on this host
retain proves it (pid gone, or host rebooted); for a process on another host
pass --owner-dead-attested with your reason. A crash leaves the claim held:
take it over with 'retain claim takeover' first.

--expires D records an expiry (now + D, metadata retain.expires; or a moment,
RFC 3339, which a retry after a lost reply repeats exactly): the daemon then
deletes the branch through the branch delete protocol (refused, and the
branch kept, while a checkpoint pins it or it has tags or children).

` + branchTableURI + `

--json prints {branch, store, table, operation_id, outcome (adopted,
resumed, already-ready), source, parent_branch, parent_version, head,
metadata, lifecycle, took_over}.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := refmeta.Parse(meta)
			if err != nil {
				return err
			}
			if from == "" {
				return usageError{errors.New("--from is required: the branch (and version) the branch was forked from, e.g. --from main@3")}
			}
			actor, err := a.actor(cmd)
			if err != nil {
				return err
			}
			name, uri := a.branchArgs(cmd, args)
			ctx := cmd.Context()
			bt, s, _, _, err := a.openBranchTable(ctx, uri, true)
			if err != nil {
				return err
			}
			defer s.Close()
			co := branch.CreateOptions{Table: bt.table, From: from, Meta: m, OwnerDeadAttested: attested, Actor: actor}
			if cmd.Flags().Changed("expires") {
				at, err := expires.resolve(time.Now())
				if err != nil {
					return err
				}
				co.Expires = at
			}
			res, err := branch.Create(ctx, s, name, co)
			if err != nil {
				return err
			}
			if a.jsonOut {
				return a.printJSON(res)
			}
			a.printBranchCreated(uri, res)
			return nil
		},
	}
	cmd.Flags().StringVar(&from, "from", "", "the source: BRANCH@VERSION, or BRANCH to accept the version the branch file records")
	cmd.Flags().StringArrayVar(&meta, "meta", nil, "metadata key=value to record; repeatable")
	cmd.Flags().Var(&expires, "expires", "the branch expires this long from now (7d) or at this moment (RFC 3339: a retry then asks for the same expiry); the daemon then deletes it through the delete protocol")
	cmd.Flags().StringVar(&attested, "owner-dead-attested", "", "your statement that the process on another host that left the branch creating is dead")
	return cmd
}

func (a *app) printBranchCreated(uri string, res *branch.Created) {
	switch res.Outcome {
	case branch.OutcomeAlreadyReady:
		fmt.Fprintf(a.stdout, "branch %q of %s is already ready, forked from %s: nothing to do\n", res.Branch, uri, res.Source)
	case branch.OutcomeResumed:
		fmt.Fprintf(a.stdout, "resumed: branch %q of %s is ready, forked from %s (operation %s)\n", res.Branch, uri, res.Source, res.OperationID)
	default:
		fmt.Fprintf(a.stdout, "adopted branch %q of %s: ready, forked from %s (operation %s)\n", res.Branch, uri, res.Source, res.OperationID)
	}
	if t := res.TookOver; t != nil {
		fmt.Fprintf(a.stdout, "took over %s (%s, %s pid %d): %s\n", t.PreviousOperation, t.State, t.PreviousOwner.Host, t.PreviousOwner.PID, t.Proof)
	}
	fmt.Fprintf(a.stdout, "head v%d; metadata %s\n", res.Head, branchMetaString(res.Metadata))
}

func branchMetaString(m map[string]string) string {
	if len(m) == 0 {
		return "-"
	}
	return refmeta.Filter(m).String()
}
