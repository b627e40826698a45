package main

import (
	"errors"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/retain-dev/retain/core/branch"
)

// branchRefusedJSON is the JSON of a refused `retain branch delete`:
// nothing was deleted; the checkpoints and tables that refused.
type branchRefusedJSON struct {
	Branch      string                     `json:"branch"`
	Store       string                     `json:"store"`
	Refused     bool                       `json:"refused"`
	Error       string                     `json:"error"`
	Checkpoints []branch.PinningCheckpoint `json:"checkpoints"`
	Tables      []branch.TableRefusal      `json:"tables"`
	RolledBack  []string                   `json:"rolled_back,omitempty"`
}

// branchCmd is `retain branch`: Lance branches as safe, described
// references (docs/refs.md, "Branches"): list, show, create (adopt) and
// delete.
func (a *app) branchCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "branch",
		Short: "Lance branches with metadata and a safe lifecycle: list, show, create (adopt), delete",
		Long: `Lance branches as safe, described references. A branch's lifecycle
(creating → ready → deleting) and its metadata live in its own Lance branch
file (_refs/branches/<name>.json), under reserved metadata keys "retain.*",
every transition a compare-and-swap on that file. Only ready branches are
listed by default. Real Lance creates a branch's data; 'retain branch
create' adopts it. See docs/refs.md.`,
	}
	cmd.AddCommand(a.branchListCmd(), a.branchShowCmd(), a.branchCreateCmd(), a.branchDeleteCmd())
	return cmd
}

func (a *app) branchDeleteCmd() *cobra.Command {
	var table, attested string
	del := &cobra.Command{
		Use:   "delete BRANCH STORE [--table T]",
		Short: "Delete a Lance branch (branch file and folder) from every table that has it, unless a checkpoint, child branch or tag keeps it",
		Long: `Delete a Lance branch under the retention claim, from --table or from every
table of the store that has it. Refused, with nothing deleted in any table,
while a live checkpoint pins the branch, another branch was forked from it,
a tag names one of its versions, or its folder overlaps another branch's.
"main" is never deleted. The branch file is first marked deleting (a
compare-and-swap: the branch leaves the default listing), then deleted,
then its folder: a delete that stops half way leaves the branch deleting
(not listed, intact) or only unreferenced files, and running it again
finishes it. A branch left creating or deleting by a process that died is
taken over only with proof it is dead (on this host retain proves it; for
another host pass --owner-dead-attested); a resumed delete that is refused
now puts the branch back to ready.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			actor, err := a.actor(cmd)
			if err != nil {
				return err
			}
			s, _, err := a.openStore(cmd.Context(), args[1])
			if err != nil {
				return err
			}
			defer s.Close()
			res, err := branch.Delete(cmd.Context(), s, name, branch.Options{Table: table, OwnerDeadAttested: attested, Actor: actor})
			var refused *branch.RefusedError
			if errors.As(err, &refused) {
				if a.jsonOut {
					out := branchRefusedJSON{Branch: refused.Branch, Store: refused.Store, Refused: true, Error: err.Error(),
						Checkpoints: []branch.PinningCheckpoint{}, Tables: refused.Tables, RolledBack: refused.RolledBack}
					if refused.Pins != nil {
						out.Checkpoints = refused.Pins.Checkpoints
					}
					if perr := a.printJSON(out); perr != nil {
						return perr
					}
				}
				return err
			}
			if res == nil {
				return err
			}
			if a.jsonOut {
				if perr := a.printJSON(res); perr != nil {
					return perr
				}
				return err
			}
			a.printBranchDeleted(res)
			return err
		},
	}
	del.Flags().StringVar(&table, "table", "", "delete the branch only from this table (its folder name, e.g. sales.lance)")
	del.Flags().StringVar(&attested, "owner-dead-attested", "", "your statement that the process on another host that left the branch creating or deleting is dead")
	return del
}

func (a *app) printBranchDeleted(res *branch.Deleted) {
	fmt.Fprintf(a.stdout, "deleted branch %q from %d table(s) of %s (operation %s): %d files, %d bytes\n",
		res.Branch, len(res.Tables)-res.Failed, res.Store, res.OperationID, res.FilesDeleted, res.BytesDeleted)
	tw := tabwriter.NewWriter(a.stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TABLE\tFORKED FROM\tBRANCH FILE\tFILES\tBYTES\tNOTE")
	for _, t := range res.Tables {
		from, ref := "-", "deleted"
		if t.ParentBranch != "" {
			from = fmt.Sprintf("%s v%d", t.ParentBranch, t.ParentVersion)
		}
		note := ""
		switch {
		case t.Resumed:
			ref, note = "already gone", "finished an earlier delete"
		case !t.RefDeleted:
			ref = "kept"
		}
		if t.TookOver != nil {
			note = fmt.Sprintf("took over %s %s (%s)", t.TookOver.State, t.TookOver.PreviousOperation, t.TookOver.Proof)
		}
		if len(t.KeptNested) > 0 {
			note = fmt.Sprintf("kept nested branch folder(s) %v", t.KeptNested)
		}
		if t.Error != "" {
			note = "FAILED: " + t.Error
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\n", t.Table, from, ref, t.FilesDeleted, t.BytesDeleted, note)
	}
	tw.Flush()
}
