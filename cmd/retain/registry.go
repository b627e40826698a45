package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/retain-dev/retain/core/checkpoint"
	"github.com/retain-dev/retain/core/retention"
	"github.com/retain-dev/retain/core/storage"
)

func (a *app) registryCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "registry",
		Short: "Check the checkpoint registry against the store's pins, and rebuild what it lost",
	}
	c.AddCommand(a.registryVerifyCmd(), a.registryRecoverCmd())
	return c
}

func (a *app) registryVerifyCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "verify STORE",
		Short: "Read-only: does every registry version read, and does the registry account for every pin?",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return onStore(a, cmd.Context(), args[0], true, func(s *storage.Store) (*checkpoint.VerifyReport, error) {
				return checkpoint.Verify(cmd.Context(), s)
			}, func(rep *checkpoint.VerifyReport) error {
				state := "ok"
				if !rep.OK() {
					state = "damaged"
				}
				fmt.Fprintf(a.stdout, "registry %s: head version %d, %d version(s) read, %d unreadable, %d problem(s)\n",
					state, rep.Head, rep.Versions, len(rep.Unreadable), len(rep.Problems))
				if rep.HeadError != "" {
					fmt.Fprintf(a.stdout, "  head      %s\n", rep.HeadError)
				}
				for _, v := range rep.Unreadable {
					fmt.Fprintf(a.stdout, "  unreadable version %d\n", v)
				}
				for _, c := range rep.Problems {
					fmt.Fprintf(a.stdout, "  %-9s %s %s: %s\n", c.Kind, c.Path, c.Tag, c.Detail)
				}
				if rep.Next != "" {
					fmt.Fprintf(a.stdout, "next: %s\n", rep.Next)
				}
				return nil
			})
		},
	}
}

func (a *app) registryRecoverCmd() *cobra.Command {
	var ro checkpoint.RecoverOptions
	c := &cobra.Command{
		Use:   "recover STORE",
		Short: "Under the claim, put back live every checkpoint the registry lost, from its surviving pins (audited)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			actor, err := a.actor(cmd)
			if err != nil {
				return err
			}
			s, _, err := a.openStore(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			defer s.Close()
			rep, err := retention.RecoverRegistry(cmd.Context(), s, checkpoint.Options{Actor: actor}, ro)
			if rep == nil {
				return err
			}
			if a.jsonOut {
				if perr := a.printJSON(rep); perr != nil {
					return perr
				}
				return err
			}
			switch {
			case rep.DryRun:
				fmt.Fprintf(a.stdout, "dry run: would restore %d checkpoint(s) over registry version %d\n", len(rep.Checkpoints), rep.From)
			case rep.RegistryVersion == 0:
				fmt.Fprintf(a.stdout, "nothing to recover: the registry accounts for every pin (head version %d)\n", rep.From)
			default:
				fmt.Fprintf(a.stdout, "restored %d checkpoint(s) at registry version %d (built on version %d); %d pin(s) replaced\n",
					len(rep.Checkpoints), rep.RegistryVersion, rep.From, len(rep.Replaced))
			}
			for _, v := range rep.Corrupt {
				fmt.Fprintf(a.stdout, "  unreadable version %d left in the history\n", v)
			}
			for _, c := range rep.Checkpoints {
				was := ""
				if c.OriginalName != "" {
					was = fmt.Sprintf(" (was %q: that name is taken)", c.OriginalName)
				}
				fmt.Fprintf(a.stdout, "  checkpoint %s %q%s from %s\n", c.ID, c.Name, was, c.Source)
				for _, p := range c.Tables {
					fmt.Fprintf(a.stdout, "    %s %s v%d %s (%s)\n", p.Path, p.Branch, p.Version, p.Tag, p.Source)
				}
			}
			for _, n := range rep.Revived {
				fmt.Fprintf(a.stdout, "  revived   %s: live in the version recover built on, deleted by the head it did not trust; delete it again if that was meant\n", n)
			}
			for _, d := range rep.Dropped {
				fmt.Fprintf(a.stdout, "  dropped   %s %s (%s)\n", d.Path, d.Tag, d.Why)
			}
			for _, c := range rep.Unrecoverable {
				fmt.Fprintf(a.stdout, "  kept      %s %s: %s\n", c.Path, c.Tag, c.Detail)
			}
			if err == nil && len(rep.Unrecoverable) > 0 {
				return fmt.Errorf("%d pin(s) could not be placed and are kept: see above", len(rep.Unrecoverable))
			}
			return err
		},
	}
	c.Flags().BoolVar(&ro.DryRun, "dry-run", false, "report what would be restored; write nothing")
	c.Flags().StringArrayVar(&ro.DropPins, "drop-pin", nil, "ROOT:TAG of a pin recover cannot place (as it reports it) that nothing needs: deleted, audited (repeatable; needs --reason)")
	c.Flags().StringVar(&ro.Reason, "reason", "", "why the dropped pins are not needed (recorded in the audit log)")
	return c
}
