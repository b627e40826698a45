package main

import (
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/retain-dev/retain/core/branch"
	"github.com/retain-dev/retain/core/lance"
	"github.com/retain-dev/retain/core/refs/lifecycle"
	"github.com/retain-dev/retain/core/refs/refmeta"
)

// branchListJSON is the JSON of `retain branch list`.
type branchListJSON struct {
	Table    string            `json:"table"`
	Filter   map[string]string `json:"filter"`
	All      bool              `json:"all"`
	Branches []branch.Info     `json:"branches"`
	Hidden   int               `json:"hidden"`
	Total    int               `json:"total"`
	Problems []string          `json:"problems"`
}

// branchProblems lists the malformed branch files of a listing error.
func branchProblems(err error) ([]string, error) {
	var me *lance.MalformedRefsError
	if err == nil {
		return []string{}, nil
	}
	if !errors.As(err, &me) {
		return nil, err
	}
	out := []string{}
	for _, f := range me.Files {
		out = append(out, f.Error())
	}
	return out, nil
}

func (a *app) branchListCmd() *cobra.Command {
	var filter []string
	var all bool
	cmd := &cobra.Command{
		Use:   "list TABLE-URI [--filter k=v ...] [--all]",
		Short: "List a table's branches with metadata, lifecycle and lineage (ready ones; --all for creating/deleting too)",
		Long: `List the branches of a table with their user metadata, lifecycle state,
fork point (parent branch and version), creation time and lineage, drawn as
a tree under main. Only ready branches are listed by default (a branch only
Lance wrote, without retain's lifecycle, counts as ready); --all shows
creating, deleting and invalid ones too. --filter k=v (repeatable, all must
match) keeps the branches whose metadata has every pair; reserved keys
(retain.state, retain.source, ...) may be filtered on. The listing reads only
the branch files (_refs/branches/), never a manifest or a data file.

` + branchTableURI + `

--json prints {table, filter, all, branches[], hidden, total, problems[]}:
branches are flat, by name, each {name, state, lifecycle {state, managed,
operation, owner, source, at}, metadata (user keys only), parent_branch,
parent_version, created_at, lineage [{branch, version, missing}] (the parent
chain, main first), key, problem}. Malformed branch files are listed under
problems and the exit status is 1.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := refmeta.ParseFilter(filter)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			bt, s, _, ds, err := a.openBranchTable(ctx, args[0], false)
			if err != nil {
				return err
			}
			defer s.Close()
			l, lerr := branch.List(ctx, ds, branch.ListOptions{Filter: f, All: all})
			if l == nil {
				return lerr
			}
			problems, err := branchProblems(lerr)
			if err != nil {
				return err
			}
			if l.Total == 0 && len(problems) == 0 {
				if err := branchCheckDataset(ctx, bt, s, ds); err != nil {
					return err
				}
			}
			out := branchListJSON{Table: args[0], Filter: f, All: all, Branches: l.Branches, Hidden: l.Hidden, Total: l.Total, Problems: problems}
			if a.jsonOut {
				if err := a.printJSON(out); err != nil {
					return err
				}
			} else {
				a.printBranchList(out)
			}
			return lerr
		},
	}
	cmd.Flags().StringArrayVar(&filter, "filter", nil, "keep branches whose metadata has key=value; repeatable (all must match)")
	cmd.Flags().BoolVar(&all, "all", false, "list creating, deleting and invalid branches too")
	return cmd
}

func (a *app) branchShowCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "show BRANCH TABLE-URI",
		Short: "Show one branch: metadata, lifecycle, fork point, lineage, children and head",
		Long: `Show one branch of a table whatever its lifecycle state: its user metadata,
its lifecycle (state, the operation and owner of a transition, the recorded
source), parent branch and version, creation time, lineage as a tree from
main, the branches forked from it and its newest version.

` + branchTableURI + `

--json prints the branch as list does, plus children [{name, version}],
head (null with head_error when its versions cannot be listed) and
identifier (Lance's version_mapping: [{Version, ID}]).`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, uri := a.branchArgs(cmd, args)
			ctx := cmd.Context()
			_, s, _, ds, err := a.openBranchTable(ctx, uri, false)
			if err != nil {
				return err
			}
			defer s.Close()
			d, derr := branch.Show(ctx, ds, name)
			if d == nil {
				return derr
			}
			if a.jsonOut {
				if err := a.printJSON(d); err != nil {
					return err
				}
				return nil
			}
			a.printBranchShow(uri, d)
			return nil
		},
	}
}

// branchStateLabel is the state column: "ready (lance)" for a branch only
// Lance wrote.
func branchStateLabel(b branch.Info) string {
	if b.State == lifecycle.Ready && !b.Lifecycle.Managed {
		return "ready (lance)"
	}
	return string(b.State)
}

// branchNode is one node of the lineage tree.
type branchNode struct {
	name     string
	from     string // "<parent>@<version>"
	info     *branch.Info
	missing  bool
	children map[string]*branchNode
}

func (n *branchNode) child(name string) *branchNode {
	if n.children == nil {
		n.children = map[string]*branchNode{}
	}
	c, ok := n.children[name]
	if !ok {
		c = &branchNode{name: name}
		n.children[name] = c
	}
	return c
}

// branchTree puts every branch under main along its lineage; ancestors
// not in bs are context nodes.
func branchTree(bs []branch.Info) *branchNode {
	root := &branchNode{name: "main"}
	for i := range bs {
		b := &bs[i]
		n := root
		for j, st := range b.Lineage {
			if j == 0 && st.Branch == "main" {
				continue
			}
			c := n.child(st.Branch)
			c.missing = c.missing || st.Missing
			if j > 0 && c.from == "" {
				prev := b.Lineage[j-1]
				c.from = fmt.Sprintf("%s@%d", prev.Branch, prev.Version)
			}
			n = c
		}
		c := n.child(b.Name)
		c.info = b
		c.from = fmt.Sprintf("%s@%d", b.ParentBranch, b.ParentVersion)
	}
	return root
}

func writeBranchTree(w io.Writer, n *branchNode, prefix string, label func(*branchNode) string) {
	names := make([]string, 0, len(n.children))
	for k := range n.children {
		names = append(names, k)
	}
	sort.Strings(names)
	for i, k := range names {
		c := n.children[k]
		branchGlyph, next := "├── ", "│   "
		if i == len(names)-1 {
			branchGlyph, next = "└── ", "    "
		}
		fmt.Fprintf(w, "%s%s%s\n", prefix, branchGlyph, label(c))
		writeBranchTree(w, c, prefix+next, label)
	}
}

func (a *app) printBranchList(out branchListJSON) {
	what := "branches"
	if len(out.Filter) > 0 {
		what += " matching " + refmeta.Filter(out.Filter).String()
	}
	fmt.Fprintf(a.stdout, "%s of %s: %d listed", what, out.Table, len(out.Branches))
	if out.Hidden > 0 {
		fmt.Fprintf(a.stdout, ", %d not ready (creating/deleting/invalid: --all shows them)", out.Hidden)
	}
	fmt.Fprintln(a.stdout)
	if len(out.Branches) > 0 {
		fmt.Fprintln(a.stdout, "main")
		writeBranchTree(a.stdout, branchTree(out.Branches), "", func(n *branchNode) string {
			if n.info == nil {
				why := "not listed"
				if n.missing {
					why = "no branch file"
				}
				if n.from != "" {
					return fmt.Sprintf("%s  ← %s  (%s)", n.name, n.from, why)
				}
				return fmt.Sprintf("%s  (%s)", n.name, why)
			}
			b := n.info
			s := fmt.Sprintf("%s  ← %s  %s  created %s  %s", b.Name, n.from, branchStateLabel(*b), b.CreatedAt.Format(time.RFC3339), branchMetaString(b.Metadata))
			if b.Expires != nil {
				s += "  expires " + b.Expires.Format(time.RFC3339)
			}
			if b.Lifecycle.Owner != nil {
				s += fmt.Sprintf("  [operation %s, %s pid %d]", b.Lifecycle.Op, b.Lifecycle.Owner.Host, b.Lifecycle.Owner.PID)
			}
			if b.Problem != "" {
				s += "  PROBLEM: " + b.Problem
			}
			return s
		})
	}
	for _, p := range out.Problems {
		fmt.Fprintf(a.stdout, "problem: %s\n", p)
	}
}

func (a *app) printBranchShow(uri string, d *branch.Detail) {
	w := a.stdout
	fmt.Fprintf(w, "branch %s of %s\n", d.Name, uri)
	l := d.Lifecycle
	state := branchStateLabel(d.Info)
	switch {
	case !l.Managed:
		state += " — written by Lance, not adopted by retain"
	case l.Op != "":
		state += " — operation " + l.Op
		if !l.At.IsZero() {
			state += " at " + l.At.Format(time.RFC3339)
		}
	}
	fmt.Fprintf(w, "  state      %s\n", state)
	if l.Owner != nil {
		fmt.Fprintf(w, "  owner      %s pid %d (boot %s)\n", l.Owner.Host, l.Owner.PID, l.Owner.BootID)
	}
	if d.Problem != "" {
		fmt.Fprintf(w, "  problem    %s\n", d.Problem)
	}
	fmt.Fprintf(w, "  forked     from %s@%d", d.ParentBranch, d.ParentVersion)
	if l.Source != "" {
		fmt.Fprintf(w, " (recorded source %s)", l.Source)
	}
	fmt.Fprintf(w, "\n  created    %s\n", d.CreatedAt.Format(time.RFC3339))
	if d.Head != nil {
		fmt.Fprintf(w, "  head       v%d\n", *d.Head)
	} else {
		fmt.Fprintf(w, "  head       unreadable: %s\n", d.HeadError)
	}
	fmt.Fprintf(w, "  metadata   %s\n", branchMetaString(d.Metadata))
	fmt.Fprintln(w, "  lineage    main")
	var b strings.Builder
	prefix := "             "
	for i, st := range d.Lineage {
		if i == 0 && st.Branch == "main" {
			continue
		}
		note := ""
		if st.Missing {
			note = "  (no branch file)"
		} else if i > 0 {
			note = fmt.Sprintf("  ← %s@%d", d.Lineage[i-1].Branch, d.Lineage[i-1].Version)
		}
		fmt.Fprintf(&b, "%s└── %s%s\n", prefix, st.Branch, note)
		prefix += "    "
	}
	last := d.Lineage[len(d.Lineage)-1]
	fmt.Fprintf(&b, "%s└── %s  ← %s@%d\n", prefix, d.Name, last.Branch, last.Version)
	fmt.Fprint(w, b.String())
	if len(d.Children) > 0 {
		parts := make([]string, len(d.Children))
		for i, c := range d.Children {
			parts[i] = fmt.Sprintf("%s (from v%d)", c.Name, c.Version)
		}
		fmt.Fprintf(w, "  children   %s\n", strings.Join(parts, ", "))
	}
}
