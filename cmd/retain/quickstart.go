package main

import (
	"errors"
	"io"

	"github.com/spf13/cobra"

	"github.com/retain-dev/retain/cmd/retain/internal/quickstart"
)

func (a *app) quickstartCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "quickstart [DIR]",
		Short: "Run the whole job on a small local LanceDB store: checkpoint, new commits, cleanup, verify",
		Long: `Copies a small LanceDB store (embedded in this binary) into DIR — a new or empty
directory, or a fresh temporary one when DIR is omitted — and runs retain's whole
job on it: the writer commits versions 1-3 of each table, "checkpoint create
quickstart-v3" pins them, the writer commits versions 4-6, "cleanup preview" and
"cleanup run --keep-last 1" remove the unpinned versions, and "checkpoint show
--deep" proves the pinned version intact. Go cannot write Lance data, so the
writer replays commits real LanceDB made (docs/quickstart.md). Every step is
checked: a failed check exits 1, so quickstart doubles as a smoke test.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var dir string
			if len(args) == 1 {
				dir = args[0]
				if dir == "" {
					return usageError{errors.New("quickstart: DIR is empty; omit it for a fresh temporary directory")}
				}
			}
			actor, err := a.actor(cmd)
			if err != nil {
				return err
			}
			dir, err = quickstart.PrepareDir(dir)
			if err != nil {
				if errors.Is(err, quickstart.ErrDirNotEmpty) {
					return usageError{err}
				}
				return capPathError(err)
			}
			ctx := cmd.Context()
			s, loc, err := a.openStore(ctx, dir)
			if err != nil {
				return err
			}
			defer s.Close()
			ro, _, err := a.openStoreReadOnly(ctx, dir)
			if err != nil {
				return err
			}
			defer ro.Close()
			var out io.Writer = a.stdout
			if a.jsonOut {
				out = nil
			}
			rep, err := quickstart.Run(ctx, quickstart.Options{Dir: dir, Store: s.At(loc), ReadOnly: ro, Out: out, Retain: "retain", Actor: actor})
			if a.jsonOut {
				if perr := a.printJSON(rep); perr != nil && err == nil {
					err = perr
				}
			}
			return err
		},
	}
}
