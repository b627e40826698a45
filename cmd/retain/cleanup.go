package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/retain-dev/retain/core/daemon"
	"github.com/retain-dev/retain/core/duration"
	"github.com/retain-dev/retain/core/retention"
	"github.com/retain-dev/retain/core/retention/runs"
	"github.com/retain-dev/retain/core/storage"
)

// cleanupPreviewJSON is the JSON of `retain cleanup preview --json`
// (docs/cleanup.md): the store's plan plus the two statements.
type cleanupPreviewJSON struct {
	Store string `json:"store"`
	*retention.StorePlan
	// RunNeedsWriteOutage is always true: `retain cleanup run` needs that
	// no writer commits to these tables while it runs.
	RunNeedsWriteOutage bool `json:"run_needs_write_outage"`
	// DeferringCost is what waiting keeps accumulating.
	DeferringCost deferringCost `json:"deferring_cost"`
	// UnfinishedRuns are cleanup runs a `run` would first have to resume
	// or abandon.
	UnfinishedRuns []string `json:"unfinished_runs,omitempty"`
	// PlanFile and Digest: where --out saved the plan for review, and its
	// digest (what `cleanup run --plan F --expect-digest D` checks).
	PlanFile string `json:"plan_file,omitempty"`
	Digest   string `json:"digest,omitempty"`
}

type deferringCost struct {
	VersionsRemovable int        `json:"versions_removable"`
	BytesReclaimable  int64      `json:"bytes_reclaimable"`
	Since             *time.Time `json:"since,omitempty"`
}

func (a *app) cleanupCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "cleanup", Short: "Remove old Lance versions while keeping every version a root protects"}
	var olderThan time.Duration
	var keepLast int
	var out, config string
	var rules windowRules
	preview := &cobra.Command{
		Use:   "preview STORE [--older-than D] [--keep-last N] [--table-window P:W]... [--branch-window P:W]... | --config daemon.yaml [--out plan.json]",
		Short: "Show, read-only and provisionally, which versions a cleanup would keep or remove and why",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var pol retention.Policy
			switch {
			case config != "" && (olderThan > 0 || keepLast > 0 || rules.set()):
				return usageError{fmt.Errorf("--config takes the window and its rules from the daemon's config: pass no --older-than, --keep-last, --table-window or --branch-window with it")}
			case config != "":
				cfg, err := daemon.LoadConfig(config)
				if err != nil {
					return err
				}
				if !cfg.RetentionOn() {
					return usageError{fmt.Errorf("%s sets no retention window (retention.older_than and/or keep_last): the daemon removes nothing by it", config)}
				}
				pol = cfg.Policy()
			case olderThan <= 0 && keepLast <= 0:
				return usageError{fmt.Errorf("cleanup preview needs --older-than D and/or --keep-last N (a positive value), or --config FILE: say which versions to keep")}
			default:
				var err error
				if pol, err = rules.policy(olderThan, keepLast); err != nil {
					return err
				}
			}
			s, _, err := a.openStoreReadOnly(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			defer s.Close()
			p, err := retention.Preview(cmd.Context(), s, pol)
			if err != nil {
				return err
			}
			var digest string
			if out != "" {
				rp := retention.NewReviewedPlan(s.Location(), p)
				if err := writePlanFile(out, rp); err != nil {
					return err
				}
				digest = rp.Digest
			}
			cost := deferringCost{VersionsRemovable: p.Totals.VersionsRemoved, BytesReclaimable: p.Totals.BytesToDelete, Since: p.Totals.OldestRemovable}
			open, err := runs.Open(cmd.Context(), s)
			if err != nil {
				return err
			}
			// A table refused (a kept version of it is broken) fails the
			// preview too, once the plan of the others is shown.
			var refused error
			for _, tp := range p.Tables {
				if refused == nil && tp.Err() != nil {
					refused = tp.Err()
				}
			}
			if a.jsonOut {
				if err := a.printJSON(cleanupPreviewJSON{Store: args[0], StorePlan: p, RunNeedsWriteOutage: true, DeferringCost: cost, UnfinishedRuns: open, PlanFile: out, Digest: digest}); err != nil {
					return err
				}
				return refused
			}
			if len(p.Tables) == 0 {
				a.noTablesNote(args[0])
			} else {
				a.printPreview(args[0], p, cost)
			}
			for _, op := range open {
				fmt.Fprintf(a.stdout, "unfinished: cleanup run %s stopped part-way; `retain cleanup run --resume` finishes it before any new run plans\n", op)
			}
			if out != "" {
				fmt.Fprintf(a.stdout, "plan saved to %s, digest %s; apply exactly it with\n  retain cleanup run %s --plan %s --expect-digest %s --confirm-write-outage\n",
					out, digest, storage.ShellWord(args[0]), storage.ShellWord(out), digest)
			}
			return refused
		},
	}
	preview.Flags().Var((*duration.Value)(&olderThan), "older-than", "versions committed longer ago than this may be removed (e.g. 7d, 1w2d or 36h)")
	preview.Flags().IntVar(&keepLast, "keep-last", 0, "keep the newest N versions of every branch")
	rules.flags(preview)
	preview.Flags().StringVar(&config, "config", "", "take the window and its per-table and per-branch rules from the daemon's config file: what its next retention pass would do")
	preview.Flags().StringVar(&out, "out", "", "save the plan and its digest to this file for review; `cleanup run --plan FILE` applies exactly it")
	cmd.AddCommand(preview, a.cleanupRunCmd())
	return cmd
}

// errTablesFailed: cleanup run finished but at least one table failed.
var errTablesFailed = errors.New("cleanup run: some tables failed")

func (a *app) cleanupRunCmd() *cobra.Command {
	var olderThan time.Duration
	var keepLast int
	var confirm, resume, progress bool
	var op, abandon, planFile, expectDigest string
	var rules windowRules
	run := &cobra.Command{
		Use:   "run STORE --confirm-write-outage [--older-than D] [--keep-last N] [--table-window P:W]... [--branch-window P:W]... | --plan FILE [--expect-digest D] | --resume [--op OP] | --abandon OP",
		Short: "Remove old Lance versions under the claim, keeping every root; needs a write outage",
		Long: `Remove old Lance versions under the retention claim, keeping every root.

A run journals every table's plan and publishes the tables' gc boundaries
before it deletes anything. If it stops part-way (a crash, a failing table)
the next run is refused until --resume carries out the same plans (the same
root digests; the window is not recomputed) or --abandon OP closes it.

--plan FILE applies a plan saved by 'cleanup preview --out FILE' after
review: the run recomputes it under the claim at the plan's cut-off and
refuses, deleting nothing and naming the difference, if any table's roots
changed (a new commit, a checkpoint created or deleted, a tag moved) or it
would remove anything the plan does not list. It may remove less.
--expect-digest D also refuses a plan file whose digest is not D.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			window := olderThan > 0 || keepLast > 0 || rules.set()
			switch {
			case planFile != "" && (window || resume || abandon != ""):
				return usageError{fmt.Errorf("--plan carries its window: it takes no --older-than, --keep-last, --table-window, --branch-window, --resume or --abandon")}
			case expectDigest != "" && planFile == "":
				return usageError{fmt.Errorf("--expect-digest checks a saved plan: use it with --plan FILE")}
			case abandon != "" && (resume || window):
				return usageError{fmt.Errorf("--abandon takes no window and no --resume")}
			case resume && window:
				return usageError{fmt.Errorf("--resume carries out the plans the run journaled: it takes no --older-than, --keep-last, --table-window or --branch-window (the window is the run's)")}
			case op != "" && !resume:
				return usageError{fmt.Errorf("--op picks the run to resume: use it with --resume")}
			case abandon == "" && !resume && olderThan <= 0 && keepLast <= 0 && planFile == "":
				return usageError{fmt.Errorf("cleanup run needs --older-than D and/or --keep-last N (a positive value): say which versions to keep (per-table and per-branch windows only replace it where they match)")}
			}
			pol, err := rules.policy(olderThan, keepLast)
			if err != nil {
				return err
			}
			var reviewed *retention.ReviewedPlan
			if planFile != "" {
				b, err := os.ReadFile(planFile)
				if err != nil {
					return usageError{fmt.Errorf("cannot read the plan file: %v", err)}
				}
				if reviewed, err = retention.ParseReviewedPlan(planFile, b, expectDigest); err != nil {
					return err
				}
			}
			actor, err := a.actor(cmd)
			if err != nil {
				return err
			}
			s, _, err := a.openStore(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			defer s.Close()
			if abandon != "" {
				j, err := retention.Abandon(cmd.Context(), s, abandon, retention.ResumeOptions{Actor: actor})
				if err != nil {
					return err
				}
				if a.jsonOut {
					return a.printJSON(j)
				}
				fmt.Fprintf(a.stdout, "cleanup run %s abandoned; its gc boundaries stay; the next run plans afresh\n", j.OperationID)
				return nil
			}
			var show func(retention.Progress)
			if !a.jsonOut && (progress || isTerminal(a.stderr)) {
				show = func(p retention.Progress) {
					fmt.Fprintf(a.stderr, "[%d/%d] %s %s; %s reclaimed so far\n", p.Done, p.Total, p.Table, p.State, bytesText(p.BytesDeleted))
				}
			}
			var rep *retention.RunReport
			if resume {
				if !confirm {
					return usageError{fmt.Errorf("cleanup run --resume deletes too: it needs --confirm-write-outage")}
				}
				rep, err = retention.Resume(cmd.Context(), s, retention.ResumeOptions{OperationID: op, Actor: actor, Progress: show})
			} else {
				rep, err = retention.Run(cmd.Context(), s, pol,
					retention.RunOptions{ConfirmWriteOutage: confirm, Actor: actor, Progress: show, Reviewed: reviewed})
			}
			if err != nil && cmd.Context().Err() != nil {
				// Stopped by a signal: name the resume only if a journal
				// says the run is unfinished (before its plans there is
				// nothing to continue; the claim was released either way).
				if runs, rerr := runs.Open(context.WithoutCancel(cmd.Context()), s); rerr == nil && len(runs) > 0 {
					a.onInterrupt = "retain cleanup run " + storage.ShellWord(args[0]) + " --resume --confirm-write-outage"
				}
			}
			if rep == nil || (err != nil && len(rep.Tables) == 0) {
				return err
			}
			if err == nil && rep.Failed > 0 {
				err = fmt.Errorf("%w: %d of %d tables failed (see the report)", errTablesFailed, rep.Failed, len(rep.Tables))
			}
			if a.jsonOut {
				if perr := a.printJSON(rep); perr != nil {
					return perr
				}
				return err
			}
			a.printRun(args[0], rep)
			return err
		},
	}
	run.Flags().BoolVar(&confirm, "confirm-write-outage", false, "confirm that no writer commits to the store's tables while cleanup runs")
	run.Flags().Var((*duration.Value)(&olderThan), "older-than", "versions committed longer ago than this may be removed (e.g. 7d, 1w2d or 36h)")
	run.Flags().IntVar(&keepLast, "keep-last", 0, "keep the newest N versions of every branch")
	rules.flags(run)
	run.Flags().BoolVar(&resume, "resume", false, "finish the unfinished run from its journaled plans (same root digests)")
	run.Flags().StringVar(&op, "op", "", "with --resume: the operation id of the run to finish, when there are several")
	run.Flags().StringVar(&abandon, "abandon", "", "close the unfinished run OP without finishing it (its boundaries stay)")
	run.Flags().StringVar(&planFile, "plan", "", "apply the reviewed plan FILE (from `cleanup preview --out`): refused if stale, never removes more")
	run.Flags().StringVar(&expectDigest, "expect-digest", "", "with --plan: refuse unless the plan file's digest is this (sha256:...)")
	run.Flags().BoolVar(&progress, "progress", false, "print progress to stderr even when it is not a terminal")
	return run
}

// writePlanFile saves a plan for review: written beside, then renamed
// over, so a reviewer never reads half a plan.
func writePlanFile(path string, rp *retention.ReviewedPlan) error {
	b, err := json.MarshalIndent(rp, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return usageError{fmt.Errorf("cannot save the plan: %v (choose another --out)", err)}
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return usageError{fmt.Errorf("cannot save the plan: %v (choose another --out)", err)}
	}
	return nil
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	if m, ok := w.(interface{ Unwrap() io.Writer }); ok {
		w = m.Unwrap() // the credential mask main puts around stdout and stderr
	}
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func (a *app) printRun(store string, rep *retention.RunReport) {
	w := a.stdout
	what := "cleanup run"
	if rep.Resumed {
		what = "resumed cleanup run"
	}
	if rep.BoundaryVersion == 0 {
		fmt.Fprintf(w, "%s %s of %s: no table has anything to remove; no gc boundary moved\n", what, rep.OperationID, store)
	} else {
		fmt.Fprintf(w, "%s %s of %s: gc boundaries published at registry version %d\n", what, rep.OperationID, store, rep.BoundaryVersion)
	}
	for _, tr := range rep.Tables {
		switch {
		case tr.Skipped:
			fmt.Fprintf(w, "  %-24s skipped: %s\n", tr.Table, strings.Join(tr.Notes, "; "))
		case tr.State == retention.TableRefused:
			fmt.Fprintf(w, "  %-24s REFUSED: %s\n", tr.Table, tr.Error)
		case tr.State == retention.TableStale:
			fmt.Fprintf(w, "  %-24s STALE: the table changed since the run planned it; its plan was dropped and the next run plans it afresh (%s)\n", tr.Table, tr.Error)
		case tr.Error != "":
			fmt.Fprintf(w, "  %-24s FAILED: %s (%d files, %s deleted before the failure)\n", tr.Table, tr.Error, tr.FilesDeleted, bytesText(tr.BytesDeleted))
		default:
			fmt.Fprintf(w, "  %-24s %d versions, %d files, %s removed\n", tr.Table, tr.VersionsRemoved, tr.FilesDeleted, bytesText(tr.BytesDeleted))
		}
	}
	cleaned := 0
	for _, tr := range rep.Tables {
		if !tr.Skipped && tr.Error == "" {
			cleaned++
		}
	}
	if r := rep.Registry; len(r.Remove) > 0 {
		fmt.Fprintf(w, "  %-24s %d of %d old registry versions removed (%d kept by pins or the window) %s\n", "registry", r.Deleted, len(r.Remove), r.Kept, r.Error)
	}
	fmt.Fprintf(w, "total: %d tables cleaned, %d failed; %d versions, %d files, %s removed\n",
		cleaned, rep.Failed, rep.Totals.VersionsRemoved, rep.Totals.FilesDeleted, bytesText(rep.Totals.BytesDeleted))
}

func (a *app) printPreview(store string, p *retention.StorePlan, cost deferringCost) {
	w := a.stdout
	var pol []string
	if p.Policy.OlderThan != "" {
		pol = append(pol, fmt.Sprintf("older than %s (cut-off %s)", p.Policy.OlderThan, p.Policy.Cutoff.Format(time.RFC3339)))
	}
	if p.Policy.KeepLast > 0 {
		pol = append(pol, fmt.Sprintf("keep last %d", p.Policy.KeepLast))
	}
	fmt.Fprintf(w, "cleanup preview of %s (PROVISIONAL: `retain cleanup run` recomputes the plan under the claim)\n", store)
	fmt.Fprintf(w, "window: %s; registry version %d; %d live checkpoints\n", strings.Join(pol, " or "), p.RegistryVersion, len(p.Checkpoints))
	for _, r := range p.Policy.Branches {
		fmt.Fprintf(w, "branch rule %s: %s%s (first match wins; over any table rule)\n", r.Pattern, r.String(), cutoffNote(r.Cutoff))
	}
	for _, r := range p.Policy.Tables {
		fmt.Fprintf(w, "table rule %s: %s%s (first match wins)\n", r.Pattern, r.String(), cutoffNote(r.Cutoff))
	}
	for _, tp := range p.Tables {
		fmt.Fprintf(w, "\ntable %s\n", tp.Table)
		tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  BRANCH\tVERSION\tCOMMITTED\tDECISION\tWHY")
		for _, v := range tp.Versions {
			dec := "KEEP"
			if !v.Keep {
				dec = "REMOVE"
			}
			fmt.Fprintf(tw, "  %s\t%d\t%s\t%s\t%s\n", v.Branch, v.Version, v.Timestamp.Format(time.RFC3339), dec, strings.Join(v.Reasons, "; "))
		}
		tw.Flush()
		if tp.Refused != "" {
			fmt.Fprintln(w, "  REFUSED:", tp.Refused)
		}
		for _, n := range tp.Notes {
			fmt.Fprintln(w, "  note:", n)
		}
		fmt.Fprintf(w, "  %d kept, %d removed; %d files, %s would be reclaimed\n",
			tp.Totals.VersionsKept, tp.Totals.VersionsRemoved, tp.Totals.FilesToDelete, bytesText(tp.Totals.BytesToDelete))
	}
	fmt.Fprintf(w, "\ntotal: %d tables, %d versions kept, %d removed; %d files, %s would be reclaimed\n",
		p.Totals.Tables, p.Totals.VersionsKept, p.Totals.VersionsRemoved, p.Totals.FilesToDelete, bytesText(p.Totals.BytesToDelete))
	fmt.Fprintln(w, "\nwrite outage: `retain cleanup run` needs one: no writer may commit to these tables while it runs,")
	fmt.Fprintln(w, "because a commit in flight could reference files the run is deleting.")
	if cost.VersionsRemovable == 0 {
		fmt.Fprintln(w, "deferring: nothing is removable under this window now; deferring costs nothing yet.")
	} else {
		fmt.Fprintf(w, "deferring: %d removable versions, %s, have been accumulating since %s; every commit until cleanup runs adds to them.\n",
			cost.VersionsRemovable, bytesText(cost.BytesReclaimable), cost.Since.Format(time.RFC3339))
	}
}

func bytesText(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	f, i := float64(n), 0
	for f >= unit && i < 4 {
		f /= unit
		i++
	}
	return fmt.Sprintf("%.1f %s (%d bytes)", f, []string{"B", "KiB", "MiB", "GiB", "TiB"}[i], n)
}
