package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/retain-dev/retain/core/lance"
	"github.com/retain-dev/retain/core/storage"
)

// Every command puts the store or table last: `tag create TAG TABLE-URI`.
// The tag and branch commands took the table first until this release;
// that order still works, with a warning, for one release.

// isTagName: a name Lance takes for a tag. It has no '/' and no ':', so a
// URI or a path with a folder is never one.
func isTagName(s string) bool { return lance.ValidateTagName(s) == nil }

// isBranchName: a name Lance takes for a branch, or "main". A relative
// path ("db/t.lance") can be one; an absolute path or a URI cannot.
func isBranchName(s string) bool { return s == "main" || lance.ValidateBranchName(s) == nil }

// isTableArg: s can name a table. A URI with a scheme is taken by its
// syntax; a local path must exist as a folder, which is what tells
// "t.lance", a valid tag name too, from a tag.
func isTableArg(s string) bool {
	loc, err := storage.ParseLocation(s)
	if err != nil {
		return false
	}
	if loc.Scheme != "file" {
		return true
	}
	fi, err := os.Stat(loc.Path)
	return err == nil && fi.IsDir()
}

// refThenTable reads the arguments NAME TABLE-URI of a tag or branch
// command (what names NAME in the usage: TAG or BRANCH). The old order
// TABLE-URI NAME is taken, with a warning, only when the new reading is
// not valid (the first argument is no NAME or the second no table) and
// the first argument is a table while the second is a NAME, or is no
// table either (a bad name: its error then names the rule it broke, not
// a missing dataset). Both readings valid: the new order, quietly.
func (a *app) refThenTable(cmd *cobra.Command, args []string, what string, isName func(string) bool) (name, uri string) {
	name, uri = args[0], args[1]
	newOK := isName(name) && isTableArg(uri)
	old := !newOK && isTableArg(name) && (isName(uri) || !isTableArg(uri))
	if !old {
		return name, uri
	}
	path := cmd.CommandPath()
	fmt.Fprintf(a.stderr, "warning: `%s TABLE-URI %s` is the old order; write `%s %s TABLE-URI` (the old order is accepted until the next release)\n", path, what, path, what)
	return uri, name
}

// tagArgs is refThenTable for TAG TABLE-URI.
func (a *app) tagArgs(cmd *cobra.Command, args []string) (tag, uri string) {
	return a.refThenTable(cmd, args, "TAG", isTagName)
}

// branchArgs is refThenTable for BRANCH TABLE-URI.
func (a *app) branchArgs(cmd *cobra.Command, args []string) (br, uri string) {
	return a.refThenTable(cmd, args, "BRANCH", isBranchName)
}
