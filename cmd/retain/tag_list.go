package main

import (
	"errors"
	"fmt"
	"sort"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/retain-dev/retain/core/lance"
	"github.com/retain-dev/retain/core/refs/refmeta"
	"github.com/retain-dev/retain/core/tag"
)

// tagListJSON is `retain tag list --json`.
type tagListJSON struct {
	Table  string         `json:"table"`
	Filter refmeta.Filter `json:"filter"`
	Tags   []tag.Ref      `json:"tags"`
	// Hidden counts checkpoint pin tags left out (without --all).
	Hidden   int                  `json:"hidden_pins"`
	Problems []lance.InspectIssue `json:"problems"`
}

func (a *app) tagListCmd(f *tagFlags) *cobra.Command {
	var filter []string
	var all bool
	cmd := &cobra.Command{
		Use:   "list TABLE-URI [--filter k=v ...] [--all]",
		Short: "List a table's tags with metadata and times; --filter k=v selects by metadata",
		Long: `List the tags of a table (of main and of every branch), sorted by name,
with branch, version, createdAt, updatedAt and metadata. --filter k=v
(repeatable) keeps the tags whose metadata has every pair. Checkpoint pins
("ogcp_") are left out unless --all. Read-only: nothing is written.

Malformed tag files are listed under problems and make the exit status 1;
the good tags are still shown.

--json prints {table, filter, tags[], hidden_pins, problems[]}; each tag as
in "retain tag show --json".`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			fl, err := refmeta.ParseFilter(filter)
			if err != nil {
				return err
			}
			t, done, err := a.openTags(cmd.Context(), args[0], false, f)
			if err != nil {
				return err
			}
			defer done()
			tags, lerr := t.List(cmd.Context(), fl)
			var mal *lance.MalformedRefsError
			if lerr != nil && !errors.As(lerr, &mal) {
				return lerr
			}
			out := tagListJSON{Table: args[0], Filter: fl, Tags: []tag.Ref{}, Problems: []lance.InspectIssue{}}
			for _, tg := range tags {
				if tg.Reserved && !all {
					out.Hidden++
					continue
				}
				out.Tags = append(out.Tags, tg)
			}
			if mal != nil {
				for _, m := range mal.Files {
					out.Problems = append(out.Problems, lance.InspectIssue{What: "tag", Key: m.Key, Reason: m.Reason})
				}
			}
			if a.jsonOut {
				if err := a.printJSON(out); err != nil {
					return err
				}
			} else {
				a.printTagList(out)
			}
			return lerr
		},
	}
	cmd.Flags().StringArrayVar(&filter, "filter", nil, "keep tags whose metadata has key=value; repeatable (all must match)")
	cmd.Flags().BoolVar(&all, "all", false, "include checkpoint pin tags (ogcp_)")
	return cmd
}

func (a *app) tagShowCmd(f *tagFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "show TAG TABLE-URI",
		Short: "Show one tag: branch, version, times, metadata and its version token",
		Long: `Show one tag, read-only.

--json prints one object: name, branch ("main" or the branch), version,
manifest_size (as recorded), created_at and updated_at (RFC 3339, null when
the file has none), metadata (the whole map), reserved (a checkpoint pin),
deleting (an interrupted delete marked it), key (the tag file) and token (its
version token, for --if-token).`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			tag, uri := a.tagArgs(cmd, args)
			t, done, err := a.openTags(cmd.Context(), uri, false, f)
			if err != nil {
				return err
			}
			defer done()
			tg, err := t.Show(cmd.Context(), tag)
			if err != nil {
				return err
			}
			if a.jsonOut {
				return a.printJSON(tg)
			}
			a.printTagShow(tg)
			return nil
		},
	}
}

func fmtTagTime(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.Format(time.RFC3339)
}

func (a *app) printTagList(out tagListJSON) {
	tw := tabwriter.NewWriter(a.stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TAG\tBRANCH\tVERSION\tCREATED\tUPDATED\tMETADATA")
	for _, tg := range out.Tags {
		name := tg.Name
		if tg.Deleting {
			name += " (deleting)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", name, tg.Branch, tg.Version, fmtTagTime(tg.CreatedAt), fmtTagTime(tg.UpdatedAt), fmtMeta(tg.Metadata))
	}
	tw.Flush()
	if out.Hidden > 0 {
		fmt.Fprintf(a.stdout, "(%d checkpoint pin tag(s) not shown: --all shows them)\n", out.Hidden)
	}
	for _, p := range out.Problems {
		fmt.Fprintf(a.stdout, "problem: %s: %s\n", p.Key, p.Reason)
	}
}

func (a *app) printTagShow(tg tag.Ref) {
	tw := tabwriter.NewWriter(a.stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "tag:\t%s\n", tg.Name)
	fmt.Fprintf(tw, "branch:\t%s\n", tg.Branch)
	fmt.Fprintf(tw, "version:\t%d\n", tg.Version)
	fmt.Fprintf(tw, "created:\t%s\n", fmtTagTime(tg.CreatedAt))
	fmt.Fprintf(tw, "updated:\t%s\n", fmtTagTime(tg.UpdatedAt))
	keys := make([]string, 0, len(tg.Metadata))
	for k := range tg.Metadata {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if len(keys) == 0 {
		fmt.Fprintf(tw, "metadata:\t-\n")
	}
	for _, k := range keys {
		fmt.Fprintf(tw, "meta %s:\t%s\n", k, tg.Metadata[k])
	}
	switch {
	case tg.Reserved:
		fmt.Fprintf(tw, "note:\ta checkpoint pin (read-only here)\n")
	case tg.Deleting:
		fmt.Fprintf(tw, "note:\tan interrupted delete marked it: `retain tag delete` finishes it\n")
	}
	fmt.Fprintf(tw, "key:\t%s\n", tg.Key)
	fmt.Fprintf(tw, "token:\t%s\n", tg.Token)
	tw.Flush()
}
