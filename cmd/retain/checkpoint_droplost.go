package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/retain-dev/retain/core/checkpoint"
	"github.com/retain-dev/retain/core/retention"
	"github.com/retain-dev/retain/core/storage"
)

func (a *app) checkpointDropLostCmd() *cobra.Command {
	var reason string
	c := &cobra.Command{
		Use:   "drop-lost NAME-OR-ID TABLE STORE --reason R",
		Short: "Give up a checkpoint's pin of TABLE whose pinned version is provably gone (table recreated or manifest missing); the rest of the checkpoint stays (audited)",
		Args:  cobra.ExactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			actor, err := a.actor(cmd)
			if err != nil {
				return err
			}
			return onStore(a, cmd.Context(), args[2], true, func(s *storage.Store) (*checkpoint.DroppedLost, error) {
				return resultOnly(retention.DropLostPin(cmd.Context(), s, checkpoint.Options{Actor: actor}, args[0], args[1], reason))
			}, func(d *checkpoint.DroppedLost) error {
				fmt.Fprintf(a.stdout, "checkpoint %q (id %s) no longer pins %s %s v%d: %s (registry version %d, operation %s)\n",
					d.Name, d.ID, d.Lost.Path, d.Lost.Branch, d.Lost.Version, d.Lost.Why, d.RegistryVersion, d.OperationID)
				if d.TagError != "" {
					fmt.Fprintln(a.stderr, "warning (over-retains until `retain reconcile`): deleting the old pin tag:", d.TagError)
				}
				return nil
			})
		},
	}
	c.Flags().StringVar(&reason, "reason", "", "why the pin is given up (recorded in the checkpoint and the audit log; required)")
	return c
}
