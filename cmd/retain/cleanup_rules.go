package main

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/retain-dev/retain/core/retention"
)

// windowRules are the per-table and per-branch windows of a cleanup
// command, as written on the command line.
type windowRules struct{ tables, branches []string }

func (r *windowRules) flags(cmd *cobra.Command) {
	cmd.Flags().StringArrayVar(&r.tables, "table-window", nil,
		"PATTERN:older-than=D,keep-last=N: the window of the tables PATTERN matches, instead of --older-than/--keep-last (repeatable; the first match wins)")
	cmd.Flags().StringArrayVar(&r.branches, "branch-window", nil,
		"PATTERN:older-than=D,keep-last=N: the window of the branches PATTERN matches in every table (\"main\" is main), over any table window (repeatable; the first match wins)")
}

func (r *windowRules) set() bool { return len(r.tables)+len(r.branches) > 0 }

// policy is the cleanup policy of the window and the rules.
func (r *windowRules) policy(olderThan time.Duration, keepLast int) (retention.Policy, error) {
	p := retention.Policy{OlderThan: olderThan, KeepLast: keepLast}
	for _, s := range r.tables {
		rule, err := retention.ParseRule(s)
		if err != nil {
			return p, usageError{err}
		}
		p.Tables = append(p.Tables, rule)
	}
	for _, s := range r.branches {
		rule, err := retention.ParseRule(s)
		if err != nil {
			return p, usageError{err}
		}
		p.Branches = append(p.Branches, rule)
	}
	return p, nil
}

// cutoffNote is " (cut-off T)" for a rule with one.
func cutoffNote(t *time.Time) string {
	if t == nil {
		return ""
	}
	return " (cut-off " + t.Format(time.RFC3339) + ")"
}
