package main

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/retain-dev/retain/core/checkpoint"
	"github.com/retain-dev/retain/core/storage"
)

// refuseReservedTag is what every user command that creates, moves or
// deletes a tag must call first: "ogcp_" tags are checkpoint pins.
func refuseReservedTag(name string) error { return checkpoint.CheckUserTag(name) }

func (a *app) checkpointCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "checkpoint", Short: "Named, immutable checkpoints of every table of a store"}
	var branch string
	create := &cobra.Command{
		Use:   "create NAME STORE [--branch B]",
		Short: "Pin every table's head on a branch (main by default) under a new checkpoint name",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			actor, err := a.actor(cmd)
			if err != nil {
				return err
			}
			return onStore(a, cmd.Context(), args[1], true, func(s *storage.Store) (*checkpoint.Created, error) {
				return resultOnly(checkpoint.Options{Actor: actor}.Create(cmd.Context(), s, args[0], branch))
			}, func(c *checkpoint.Created) error {
				fmt.Fprintf(a.stdout, "created checkpoint %q (id %s, generation %d) from %s at registry version %d\n",
					c.Name, c.ID, c.Generation, c.SourceBranch, c.RegistryVersion)
				tw := tabwriter.NewWriter(a.stdout, 2, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "TABLE\tBRANCH\tVERSION\tINCARNATION\tTAG")
				for _, t := range c.Tables {
					fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\n", t.Path, t.Branch, t.Version, t.Incarnation, t.Tag)
				}
				tw.Flush()
				for _, w := range c.Warnings {
					fmt.Fprintln(a.stderr, "warning:", w)
				}
				return nil
			})
		},
	}
	create.Flags().StringVar(&branch, "branch", "main", "the branch whose heads are pinned")
	list := &cobra.Command{
		Use:   "list STORE",
		Short: "List live checkpoints with their pin health",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, _, err := a.openStoreReadOnly(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			defer s.Close()
			v, infos, err := checkpoint.List(cmd.Context(), s)
			if err != nil {
				return err
			}
			if a.jsonOut {
				return a.printJSON(map[string]any{"registry_version": v, "checkpoints": infos})
			}
			if len(infos) == 0 {
				// An empty listing of a store without tables is most
				// often a mistyped STORE: say that instead.
				if tables, err := checkpoint.DiscoverTables(cmd.Context(), s); err == nil && len(tables) == 0 {
					a.noTablesNote(args[0])
					return nil
				}
			}
			tw := tabwriter.NewWriter(a.stdout, 2, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tID\tBRANCH\tTABLES\tREGISTRY\tCREATED\tACTOR\tPINS")
			for _, in := range infos {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\n", in.Name, in.ID, in.SourceBranch, in.TableCount,
					in.RegistryVersion, in.CreatedAt.Format(time.RFC3339), in.Actor, in.Health)
			}
			return tw.Flush()
		},
	}
	var deep bool
	show := &cobra.Command{
		Use:   "show NAME-OR-ID STORE [--deep]",
		Short: "Show one checkpoint: its pinned versions and the health of every pin",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return onStore(a, cmd.Context(), args[1], false, func(s *storage.Store) (*checkpoint.Info, error) {
				in, err := checkpoint.Show(cmd.Context(), s, args[0], deep)
				if err != nil {
					return nil, err
				}
				// The checkpoint is printed, then its health fails the command.
				if in.Health == "invalid" {
					return in, fmt.Errorf("checkpoint %q is invalid: an object it pins is gone; reconcile cannot restore it: see each pin above for the command that resolves it", in.Name)
				}
				if in.Health == "degraded" || (in.Deep != nil && (len(in.Deep.Missing) > 0 || len(in.Deep.Errors) > 0)) {
					return in, fmt.Errorf("checkpoint %q is not intact: run `retain reconcile %s`", in.Name, args[1])
				}
				return in, nil
			}, func(in *checkpoint.Info) error {
				fmt.Fprintf(a.stdout, "checkpoint %q\n  id         %s (generation %d, %s)\n  branch     %s\n  registry   version %d\n  created    %s by %s\n  pins       %s\n",
					in.Name, in.ID, in.Generation, in.State, in.SourceBranch, in.RegistryVersion, in.CreatedAt.Format(time.RFC3339), in.Actor, in.Health)
				tw := tabwriter.NewWriter(a.stdout, 2, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "KIND\tPATH\tBRANCH\tVERSION\tPIN\tTAG")
				for _, p := range in.Pins {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", p.Kind, p.Path, p.Branch, p.Version, p.Status, p.Tag)
				}
				tw.Flush()
				for _, p := range in.Pins {
					if p.Status != checkpoint.PinOK && p.Detail != "" {
						fmt.Fprintf(a.stdout, "  %s %s: %s\n", p.Status, p.Path, p.Detail)
					}
				}
				for _, l := range in.Lost {
					fmt.Fprintf(a.stdout, "  lost %s\n", l)
				}
				if in.Deep != nil {
					fmt.Fprintf(a.stdout, "deep: %d files checked, %d missing\n", in.Deep.FilesChecked, len(in.Deep.Missing))
					for _, m := range in.Deep.Missing {
						fmt.Fprintln(a.stdout, "  missing", m)
					}
					for _, e := range in.Deep.Errors {
						fmt.Fprintln(a.stdout, "  error", e)
					}
				}
				return nil
			})
		},
	}
	show.Flags().BoolVar(&deep, "deep", false, "also check that every file the pinned versions reference exists")
	del := &cobra.Command{
		Use:   "delete NAME-OR-ID STORE",
		Short: "Delete a checkpoint: tombstone it, then reclaim its pins",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			actor, err := a.actor(cmd)
			if err != nil {
				return err
			}
			return onStore(a, cmd.Context(), args[1], true, func(s *storage.Store) (*checkpoint.Deleted, error) {
				return resultOnly(checkpoint.Options{Actor: actor}.Delete(cmd.Context(), s, args[0]))
			}, func(d *checkpoint.Deleted) error {
				if d.AlreadyTombstoned {
					fmt.Fprintf(a.stdout, "checkpoint %q (id %s) was already deleted by %s; %d pin tags reclaimed\n", d.Name, d.ID, d.OperationID, len(d.TagsDeleted))
				} else {
					fmt.Fprintf(a.stdout, "deleted checkpoint %q (id %s) at registry version %d (operation %s); %d pin tags reclaimed\n",
						d.Name, d.ID, d.RegistryVersion, d.OperationID, len(d.TagsDeleted))
				}
				for _, e := range d.TagErrors {
					fmt.Fprintln(a.stderr, "warning (over-retains until `retain reconcile`):", e)
				}
				return nil
			})
		},
	}
	cmd.AddCommand(create, list, show, del, a.checkpointDropLostCmd(), a.checkpointPruneCmd())
	return cmd
}

func (a *app) reconcileCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "reconcile STORE",
		Short: "Finish or roll back interrupted creates, repair missing pins, reclaim orphan pins",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			actor, err := a.actor(cmd)
			if err != nil {
				return err
			}
			return onStore(a, cmd.Context(), args[0], true, func(s *storage.Store) (*checkpoint.Report, error) {
				return checkpoint.Options{Actor: actor}.Reconcile(cmd.Context(), s)
			}, func(rep *checkpoint.Report) error {
				fmt.Fprintf(a.stdout, "reconciled %d tables at registry version %d: %d sidecars, %d repaired, %d reclaimed, %d conflicts\n",
					len(rep.Tables), rep.RegistryVersion, len(rep.Sidecars), len(rep.Repaired), len(rep.Reclaimed), len(rep.Conflicts))
				for _, sc := range rep.Sidecars {
					fmt.Fprintf(a.stdout, "  sidecar   %s %s (%q)\n", sc.OperationID, sc.Outcome, sc.Name)
				}
				for _, p := range rep.Repaired {
					fmt.Fprintf(a.stdout, "  repaired  %s %s (checkpoint %q, %s v%d)\n", p.Path, p.Tag, p.Name, p.Branch, p.Version)
				}
				for _, p := range rep.Reclaimed {
					fmt.Fprintf(a.stdout, "  reclaimed %s %s (%s)\n", p.Path, p.Tag, p.Why)
				}
				for _, c := range rep.Conflicts {
					fmt.Fprintf(a.stdout, "  conflict  %s %s %s: %s\n", c.Kind, c.Path, c.Tag, c.Detail)
				}
				return nil
			})
		},
	}
}
