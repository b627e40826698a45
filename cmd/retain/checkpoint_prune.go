package main

import (
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/retain-dev/retain/core/checkpoint"
	"github.com/retain-dev/retain/core/duration"
	"github.com/retain-dev/retain/core/retention"
	"github.com/retain-dev/retain/core/rotation"
	"github.com/retain-dev/retain/core/storage"
)

func (a *app) checkpointPruneCmd() *cobra.Command {
	var req checkpoint.PruneRequest
	c := &cobra.Command{
		Use:   "prune STORE --match PATTERN [--keep-last N] [--keep-hourly N] [--keep-daily N] [--keep-weekly N] [--keep-monthly N] [--keep-yearly N] [--keep-within D] [--dry-run]",
		Short: "Rotate checkpoints: keep what restic's --keep-* rules keep among the matched ones, delete the rest (tombstone first, tags last, audited)",
		Long: `Rotate checkpoints the way restic's forget rotates snapshots.

The checkpoints whose names match a --match pattern (* matches any run of
characters, '/' included) are grouped by source branch (--group-by none: one
group) and judged newest first by their creation time; a checkpoint any
--keep-* rule keeps is kept, listing every rule that kept it, and every
other matched checkpoint is deleted through the delete protocol in one
operation under the claim. Calendar buckets are UTC. --keep-N -1 (or
"unlimited") keeps one per bucket forever. A checkpoint created after this
host's clock is always kept. Nothing unmatched is ever judged.`,
		Example: `  retain checkpoint prune file:///data/lake --match 'hourly/*' --keep-hourly 24 --keep-daily 7 --dry-run
  retain checkpoint prune s3://bucket/lake --match 'nightly-*' --keep-daily 7 --keep-weekly 4 --keep-monthly 12`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			actor, err := a.actor(cmd)
			if err != nil {
				return err
			}
			return onStore(a, cmd.Context(), args[0], !req.DryRun, func(s *storage.Store) (*checkpoint.Pruned, error) {
				return resultOnly(retention.PruneCheckpoints(cmd.Context(), s, checkpoint.Options{Actor: actor}, req))
			}, func(p *checkpoint.Pruned) error { return a.printPruned(p) })
		},
	}
	f := c.Flags()
	f.StringArrayVar(&req.Match, "match", nil, "checkpoint names to rotate (repeatable; required)")
	f.StringVar(&req.GroupBy, "group-by", checkpoint.GroupByBranch, "judge each source branch apart (branch) or all matched checkpoints together (none)")
	f.BoolVar(&req.DryRun, "dry-run", false, "show every decision and delete nothing (no claim, no write)")
	addKeepFlags(f, &req.Policy)
	return c
}

// addKeepFlags binds restic's --keep-* flags to p.
func addKeepFlags(f *pflag.FlagSet, p *rotation.Policy) {
	for _, c := range []struct {
		name string
		n    *int
		what string
	}{
		{"last", &p.Last, "the N newest"},
		{"hourly", &p.Hourly, "the newest of each of the last N hours that have one"},
		{"daily", &p.Daily, "the newest of each of the last N days that have one"},
		{"weekly", &p.Weekly, "the newest of each of the last N ISO weeks that have one"},
		{"monthly", &p.Monthly, "the newest of each of the last N months that have one"},
		{"yearly", &p.Yearly, "the newest of each of the last N years that have one"},
	} {
		f.Var((*keepCount)(c.n), "keep-"+c.name, "keep "+c.what+" (-1 or unlimited: every one)")
	}
	for _, w := range []struct {
		name string
		d    *time.Duration
		what string
	}{
		{"within", &p.Within, "every checkpoint"},
		{"within-hourly", &p.WithinHourly, "the newest of each hour"},
		{"within-daily", &p.WithinDaily, "the newest of each day"},
		{"within-weekly", &p.WithinWeekly, "the newest of each week"},
		{"within-monthly", &p.WithinMonthly, "the newest of each month"},
		{"within-yearly", &p.WithinYearly, "the newest of each year"},
	} {
		f.Var((*duration.Value)(w.d), "keep-"+w.name, "keep "+w.what+" newer than the newest checkpoint of its group minus D (whole hours: 2d, 36h; a month is 30d)")
	}
}

// keepCount is a --keep-N value: a count, or -1 / "unlimited".
type keepCount int

func (k *keepCount) Set(s string) error {
	if strings.EqualFold(s, "unlimited") {
		*k = rotation.Unlimited
		return nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < rotation.Unlimited {
		return fmt.Errorf("%q is not a count: write a number of buckets, or -1 / unlimited for all", s)
	}
	*k = keepCount(n)
	return nil
}

func (k *keepCount) String() string { return strconv.Itoa(int(*k)) }
func (k *keepCount) Type() string   { return "count" }

func (a *app) printPruned(p *checkpoint.Pruned) error {
	verb := "removed"
	if p.DryRun {
		verb = "would remove"
	}
	fmt.Fprintf(a.stdout, "%s, matching %s, grouped by %s: %d kept, %s %d\n", p.Policy, strings.Join(p.Match, " "), p.GroupBy, p.Kept, verb, p.Removed)
	tw := tabwriter.NewWriter(a.stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "DECISION\tNAME\tID\tBRANCH\tCREATED\tREASONS")
	for _, d := range p.Decisions {
		what := "keep"
		if !d.Keep {
			what = "remove"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", what, d.Name, d.ID, d.SourceBranch, d.CreatedAt.UTC().Format(time.RFC3339), strings.Join(d.Reasons, ", "))
	}
	tw.Flush()
	if p.OperationID != "" {
		fmt.Fprintf(a.stdout, "registry version %d (operation %s); %d pin tags reclaimed\n", p.RegistryVersion, p.OperationID, len(p.TagsDeleted))
	}
	for _, e := range p.TagErrors {
		fmt.Fprintln(a.stderr, "warning (over-retains until `retain reconcile`):", e)
	}
	for _, w := range p.Warnings {
		fmt.Fprintln(a.stderr, "warning (the checkpoints above are removed):", w)
	}
	return nil
}
