package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/retain-dev/retain/core/lance"
	"github.com/retain-dev/retain/core/storage"
)

const inspectLong = `Shows what a Lance dataset holds, read-only: every version of main and of
each branch (grouped) with its commit time, manifest size, the tags and
branches that point at it and the bytes it references; the tags; and a
summary. With --version V (and --branch B for a branch) it lists the files of
that one version instead.

The table URI is a store URI whose location is the dataset itself:
/data/db/t.lance, file:///data/db/t.lance, s3://bucket/db/t.lance,
gs://bucket/db/t.lance, az://container/db/t.lance (with the options each
backend takes, e.g. ?endpoint=...). A dataset is a folder with _versions/.

Nothing unreadable stops the listing: malformed tag or branch files,
unreadable manifests and failed listings are reported under "problems" with
their key and reason, everything else is still shown, and the exit status is
1. Warnings (a tag naming a version that does not exist, files a version
references that are not in the folder, tree/ folders no branch file names,
a recorded manifest size that differs from the manifest's) do not change
the exit status. Exit status: 0 everything was readable, 1 something was
not (or the URI is not a dataset), 2 the command line or URI is malformed.

Bytes a version references are the sizes its manifest records; where it
records none (deletion and transaction files, index folders) the size found
by one listing of the dataset folder is used, and a file whose size is known
from neither counts as unknown. Above 500000 objects the listing stops:
sizes then come from the manifests alone and the folder total is not given.

--json prints one object:
  uri, adapter          the table URI as given; the adapter that served it
  naming                "v1" or "v2": main's manifest naming scheme
  branches[]            main first, then branches by name (only the one
                        selected with --branch); each:
    name                "main" or the branch name
    root                key prefix of its dataset: "" or "tree/<name>"
    ref_key             its _refs/branches/ file (absent for main)
    parent              {branch, version} it was forked from (absent for main)
    created_at          from the branch file (absent for main)
    head                its newest version, null if none could be listed
    versions[]          oldest first (only V with --version); each:
      version, time     number; commit time (RFC 3339, UTC; null if unreadable)
      manifest_key      key of the manifest, relative to the dataset
      manifest_size     bytes of the manifest object
      head              the newest version of its branch
      tags[]            names of tags pointing at it
      forked_by[]       branches whose fork point it is
      fork_of           {branch, version} when it is its branch's fork point
      files             number of files (and index folders) it references,
                        its manifest included
      bytes             sum of the sizes of those files
      unknown_sizes     how many of them have no known size (not in bytes)
      missing           how many are not in the folder (listing done only)
      error             why its manifest could not be read (absent if fine)
  tags[]                every tag, by name: name, branch ("main" or a branch),
                        version, manifest_size (recorded), key, created_at,
                        dangling (its version does not exist)
  files[]               only with --version: key (relative to the dataset, a
                        URI when outside), kind (manifest, data, overlay,
                        deletion, index, transaction, external), size (null
                        if unknown), folder (an index folder, referenced
                        whole), owner (the branch whose folder holds it,
                        "" when outside), inherited (owned by a parent
                        branch), outside (not in this dataset family; never
                        deleted by retain), missing (not in the folder)
  summary               absent with --version: versions, unreadable_versions,
                        tags, branches, latest {branch, version, files, bytes,
                        unknown_sizes} (main's head, or the --branch head),
                        referenced_files, referenced_bytes,
                        referenced_unknown_sizes (union over every version
                        shown), folder {objects, bytes} (null if not listed)
  problems[]            {what, key, reason}: what is tag, branch, tags,
                        branches, versions, manifest or listing
  warnings[]            {what, key, reason}`

// Reports of `retain inspect --json`; the fields are documented in
// inspectLong and are part of the CLI's contract.
type inspectReport struct {
	URI     string `json:"uri"`
	Adapter string `json:"adapter"`
	*lance.Inspection
}

func (a *app) inspectCmd() *cobra.Command {
	var o lance.InspectOptions
	cmd := &cobra.Command{
		Use:   "inspect TABLE-URI [--version V] [--branch B]",
		Short: "Show a Lance dataset's versions, tags, branches and the bytes each version references",
		Long:  inspectLong,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.HasVersion = cmd.Flags().Changed("version")
			o.HasBranch = cmd.Flags().Changed("branch")
			return a.inspect(cmd.Context(), args[0], o)
		},
	}
	cmd.Flags().Uint64Var(&o.Version, "version", 0, "list the files of this version")
	cmd.Flags().StringVar(&o.Branch, "branch", "", "only this branch (\"main\" for main); with --version, the branch the version is on")
	return cmd
}

// errUnreadable: inspect printed everything it could, but some metadata
// could not be read (exit 1).
var errUnreadable = errors.New("some of the dataset could not be read")

func (a *app) inspect(ctx context.Context, uri string, o lance.InspectOptions) error {
	loc, err := storage.ParseLocation(uri)
	if err != nil {
		return err
	}
	if o.Branch != "" && o.Branch != "main" {
		if err := lance.ValidateBranchName(o.Branch); err != nil {
			return usageError{fmt.Errorf("--branch: %w", err)}
		}
	}
	// A local path is checked before the store is opened, for a clearer
	// message about a mistyped path. The store is opened read-only: inspect
	// writes nothing, not even the adapter's own folder or probe objects.
	if loc.Scheme == "file" {
		if err := checkLocalDataset(uri, loc.Path); err != nil {
			return err
		}
	}
	// a.open, not openStoreReadOnly: the URI is a table, not a store.
	s, _, err := a.open(ctx, uri, true)
	if err != nil {
		return err
	}
	defer s.Close()
	ds, err := lance.Open(s, "")
	if err != nil {
		return err
	}
	ins, err := lance.Inspect(ctx, ds, o)
	var nameErr *lance.NameError
	switch {
	case errors.Is(err, lance.ErrNotDataset):
		found := strings.TrimPrefix(err.Error(), lance.ErrNotDataset.Error()+": ")
		return notDataset(uri, found, remoteTables(ctx, s))
	case errors.As(err, &nameErr):
		return usageError{err}
	case err != nil:
		return err
	}
	rep := &inspectReport{URI: uri, Adapter: s.Adapter(), Inspection: ins}
	if a.jsonOut {
		if err := a.printJSON(rep); err != nil {
			return err
		}
	} else {
		printInspection(a.stdout, rep)
	}
	if n := len(rep.Problems); n > 0 {
		keys := make([]string, n)
		for i, p := range rep.Problems {
			keys[i] = p.Key
		}
		return fmt.Errorf("%w: %d problem(s), see the listing: %s", errUnreadable, n, strings.Join(keys, ", "))
	}
	return nil
}

// notDataset is the error for a table URI that is not a Lance dataset.
func notDataset(uri, found string, tables []string) error {
	msg := fmt.Sprintf("%s is not a Lance dataset: expected a folder with _versions/ holding its manifests (a LanceDB table is <db>/<table>.lance/); %s", showURI(uri), found)
	if len(tables) > 0 {
		more := ""
		if len(tables) > 5 {
			more = fmt.Sprintf(" and %d more", len(tables)-5)
			tables = tables[:5]
		}
		msg += fmt.Sprintf(". It holds tables: %s%s — inspect one of them, e.g. %s", strings.Join(tables, ", "), more, childURI(uri, tables[0]))
	}
	return notDatasetError{msg}
}

// notDatasetError matches lance.ErrNotDataset; its message names the URI.
type notDatasetError struct{ msg string }

func (e notDatasetError) Error() string { return e.msg }
func (e notDatasetError) Unwrap() error { return lance.ErrNotDataset }

// childURI appends name to a table URI's path, keeping its query.
func childURI(uri, name string) string {
	base, query, _ := strings.Cut(uri, "?")
	out := strings.TrimRight(base, "/") + "/" + name
	if query != "" {
		out += "?" + query
	}
	return out
}

// checkLocalDataset refuses a local path that is not a dataset folder
// without touching it.
func checkLocalDataset(uri, dir string) error {
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return notDataset(uri, "it does not exist", nil)
	case err != nil:
		// Not the *PathError itself: it would repeat the path in full.
		return fmt.Errorf("cannot read %s: %w", showURI(uri), errors.Unwrap(err))
	case !st.IsDir():
		return notDataset(uri, "it is a file, not a folder", nil)
	}
	if st, err := os.Stat(filepath.Join(dir, "_versions")); err == nil && st.IsDir() {
		return nil
	}
	var tables []string
	if ents, err := os.ReadDir(dir); err == nil {
		for _, e := range ents {
			if e.IsDir() && strings.HasSuffix(e.Name(), ".lance") {
				tables = append(tables, e.Name())
			}
		}
	}
	return notDataset(uri, "it has no _versions/ folder", tables)
}

// remoteTables names the *.lance folders at the top of a store, from one
// bounded listing page, to suggest what to inspect instead.
func remoteTables(ctx context.Context, s *storage.Store) []string {
	page, err := s.ListPage(ctx, storage.ListOptions{PageSize: 1000})
	if err != nil {
		return nil
	}
	seen := map[string]bool{}
	var out []string
	for _, o := range page.Objects {
		if first, _, ok := strings.Cut(o.Key, "/"); ok && strings.HasSuffix(first, ".lance") && !seen[first] {
			seen[first] = true
			out = append(out, first)
		}
	}
	return out
}
