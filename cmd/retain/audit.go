package main

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/retain-dev/retain/core/duration"
	"github.com/retain-dev/retain/core/retention"
	"github.com/retain-dev/retain/core/storage"
)

func (a *app) auditCmd() *cobra.Command {
	var since time.Duration
	cmd := &cobra.Command{
		Use:   "audit STORE [--since D]",
		Short: "Print the store's audit log: every removal retention made, one line each",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return onStore(a, cmd.Context(), args[0], false, func(s *storage.Store) (*[]retention.AuditRecord, error) {
				var from time.Time
				if since > 0 {
					from = time.Now().Add(-since)
				}
				lines, err := retention.ReadAudit(cmd.Context(), s, from)
				if err != nil {
					return nil, err
				}
				if lines == nil {
					lines = []retention.AuditRecord{} // [] in JSON, not null
				}
				return &lines, nil
			}, func(lines *[]retention.AuditRecord) error {
				tw := tabwriter.NewWriter(a.stdout, 2, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "AT\tEVENT\tTABLE\tVERSIONS\tFILES\tBYTES\tOPERATION\tACTOR")
				for _, l := range *lines {
					files, bytes, versions := l.FilesRemoved, l.BytesRemoved, l.VersionsRemoved
					if l.Event == retention.AuditRemoving {
						files, bytes, versions = l.FilesPlanned, l.BytesPlanned, len(l.Versions)
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%s\t%s\n", l.At.Format(time.RFC3339), l.Event, l.Table, versions, files, bytes, l.OperationID, l.Actor)
				}
				return tw.Flush()
			})
		},
	}
	cmd.Flags().Var((*duration.Value)(&since), "since", "only lines of the last D (e.g. 24h or 7d)")
	return cmd
}
