package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/retain-dev/retain/core/lance"
	"github.com/retain-dev/retain/core/refs/refmeta"
	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/claim"
	"github.com/retain-dev/retain/core/tag"
)

const tagLong = `Lance tags of one table as memory checkpoints: a name for a version of main
or of a branch, with a string→string metadata map (session, agent, purpose)
and createdAt/updatedAt, kept in the tag file itself — the file Lance 12
writes and reads (_refs/tags/<tag>.json), so real Lance lists and checks out
every tag retain writes and retain reads every tag Lance writes.

TABLE-URI is the dataset itself, as for inspect: /data/db/t.lance,
file:///data/db/t.lance, s3://bucket/db/t.lance?endpoint=..., gs://...,
az://.... A local table is opened through its database folder, as every
other retain command opens that store, so the gates of the localfs adapter
are the same ones. The table comes last (tag create TAG TABLE-URI), as the
store does in every command; the order TABLE-URI TAG of earlier releases is
still accepted in this one, with a warning.

Writes are conditional on what was read, so concurrent writers never both
win and a deleted tag never comes back: create is create-if-absent (an
existing tag is an error, exit 1); update and delete are compare-and-swap on
the tag object's version token (the "token" that show and list --json
print; pass it with --if-token to act only on the state you looked at). A lost race is
an error (exit 1) and nothing is written: read again and decide. On a store
without replace-if-version (or delete-if-version) reaching all its writers,
update (delete) is refused unless --gate names an adapter gate every writer
of the tags holds; without delete-if-version but with replace-if-version a
delete marks the tag (metadata key retain.deleting), then deletes it.

Tags beginning "ogcp_" are checkpoint pins: list --all and show display
them; create, update and delete refuse them (exit 2). Metadata keys
beginning "retain." are reserved.

Exit status: 0 done, 1 the operation failed or was refused by the store's
state (exists, not found, changed, dangling, malformed tag files), 2 the
command line is wrong.`

// tagFlags are the flags shared by the tag subcommands.
type tagFlags struct {
	gates []string
}

func (a *app) tagCmd() *cobra.Command {
	f := &tagFlags{}
	cmd := &cobra.Command{
		Use:   "tag",
		Short: "Lance tags of a table with metadata: create, list, show, update, delete, resolve",
		Long:  tagLong,
	}
	cmd.PersistentFlags().StringArrayVar(&f.gates, "gate", nil,
		"hold this adapter gate around a read-compare-write where the store lacks replace-/delete-if-version reaching all its writers (sound only if every writer of the tags holds it); repeatable")
	cmd.AddCommand(a.tagCreateCmd(f), a.tagListCmd(f), a.tagShowCmd(f), a.tagUpdateCmd(f), a.tagDeleteCmd(f), a.tagResolveCmd(f))
	return cmd
}

// openTags opens the table at uri for tag operations: read-only for the
// commands that only look. A local table is opened through its parent
// folder (the database), the store root every other command uses, so the
// localfs gates and lock stripes are the same.
func (a *app) openTags(ctx context.Context, uri string, write bool, f *tagFlags) (*tag.Tags, func(), error) {
	loc, err := storage.ParseLocation(uri)
	if err != nil {
		return nil, nil, err
	}
	storeURI, root := uri, ""
	if loc.Scheme == "file" {
		if err := checkLocalDataset(uri, loc.Path); err != nil {
			return nil, nil, err
		}
		if parent := filepath.Dir(loc.Path); parent != loc.Path {
			storeURI, root = parent, filepath.Base(loc.Path)
		}
	}
	// Opened unchecked: a table URI is not a store, and on object stores
	// it is what the adapter opens.
	s, sloc, err := a.open(ctx, storeURI, !write)
	if err != nil {
		return nil, nil, err
	}
	ds, err := lance.Open(s, root)
	if err != nil {
		s.Close()
		return nil, nil, err
	}
	if loc.Scheme != "file" {
		if _, err := ds.Latest(ctx); err != nil {
			defer s.Close()
			if errors.Is(err, lance.ErrNotDataset) {
				found := strings.TrimPrefix(err.Error(), lance.ErrNotDataset.Error()+": ")
				return nil, nil, notDataset(uri, found, remoteTables(ctx, s))
			}
			return nil, nil, err
		}
	}
	t := tag.New(ds, tag.Options{Scope: claim.ScopeFor(sloc), Gates: f.gates})
	return t, func() { s.Close() }, nil
}

func (a *app) tagCreateCmd(f *tagFlags) *cobra.Command {
	var expires expiryValue
	var version uint64
	var branch string
	var meta []string
	cmd := &cobra.Command{
		Use:   "create TAG TABLE-URI [--version V] [--branch B] [--meta k=v ...] [--expires D|TIME]",
		Short: "Tag a version (default: the newest of main, or of --branch) with metadata; never replaces an existing tag",
		Long: `Create a tag with create-if-absent. Without --version it names the newest
version of main (or of --branch B); with --version V version V of main (or of
--branch B). The version must exist; the tag file records its manifest size
as Lance does. An existing tag of that name is never replaced (exit 1).
With --expires D the tag carries an expiry (now + D, metadata
retain.expires): the daemon removes it once its clock is past that by its
expiry_margin, and the next cleanup may then remove what only it kept.

--json prints {op, cas, tag}: tag as in "retain tag show --json"; cas names
the conditional write used.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.Flags().Changed("version") && version == 0 {
				return usageError{errors.New("--version: Lance versions start at 1")}
			}
			m, err := refmeta.Parse(meta)
			if err != nil {
				return err
			}
			name, uri := a.tagArgs(cmd, args)
			t, done, err := a.openTags(cmd.Context(), uri, true, f)
			if err != nil {
				return err
			}
			defer done()
			co := tag.CreateOptions{Branch: branch, Version: version, Metadata: m}
			if cmd.Flags().Changed("expires") {
				at, err := expires.resolve(time.Now())
				if err != nil {
					return err
				}
				co.Expires = at
			}
			res, err := t.Create(cmd.Context(), name, co)
			if err != nil {
				return err
			}
			return a.printTagResult(res)
		},
	}
	cmd.Flags().Uint64Var(&version, "version", 0, "the version to tag (default: the newest)")
	cmd.Flags().StringVar(&branch, "branch", "", "the branch whose version to tag (default main)")
	cmd.Flags().StringArrayVar(&meta, "meta", nil, "metadata key=value; repeatable")
	cmd.Flags().Var(&expires, "expires", "the tag expires this long from now (2h, 7d) or at this moment (RFC 3339); the daemon then removes it")
	return cmd
}

func (a *app) tagUpdateCmd(f *tagFlags) *cobra.Command {
	var meta, unset []string
	var replace, noExpiry bool
	var ifToken string
	var expires expiryValue
	cmd := &cobra.Command{
		Use:   "update TAG TABLE-URI [--meta k=v ...] [--unset k ...] [--replace] [--expires D|TIME | --no-expiry] [--if-token T]",
		Short: "Change a tag's metadata by compare-and-swap; createdAt is kept, updatedAt refreshed",
		Long: `Change a tag's metadata: --meta k=v sets keys, --unset k removes them,
--replace makes the --meta pairs the whole metadata. The tag file is rewritten
only if it is still the object read (or the token given with --if-token):
a concurrent update or delete makes this one fail (exit 1) with nothing
written, and an update never brings a deleted tag back. The version, branch
and createdAt are kept; updatedAt is refreshed.

--json prints {op, cas, tag}.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := refmeta.Parse(meta)
			if err != nil {
				return err
			}
			name, uri := a.tagArgs(cmd, args)
			t, done, err := a.openTags(cmd.Context(), uri, true, f)
			if err != nil {
				return err
			}
			defer done()
			u := tag.MetaUpdate{Set: m, Unset: unset, Replace: replace, IfToken: ifToken, ClearExpiry: noExpiry}
			if cmd.Flags().Changed("expires") {
				at, err := expires.resolve(time.Now())
				if err != nil {
					return err
				}
				u.Expires = at
			}
			res, err := t.UpdateMeta(cmd.Context(), name, u)
			if err != nil {
				return err
			}
			return a.printTagResult(res)
		},
	}
	cmd.Flags().StringArrayVar(&meta, "meta", nil, "set metadata key=value; repeatable")
	cmd.Flags().StringArrayVar(&unset, "unset", nil, "remove a metadata key; repeatable")
	cmd.Flags().BoolVar(&replace, "replace", false, "the --meta pairs become the whole metadata")
	cmd.Flags().StringVar(&ifToken, "if-token", "", "only if the tag is still at this version token (from list or show)")
	cmd.Flags().Var(&expires, "expires", "the tag now expires this long from now (2h, 7d) or at this moment (RFC 3339)")
	cmd.Flags().BoolVar(&noExpiry, "no-expiry", false, "remove the tag's expiry: it is kept until deleted")
	return cmd
}

func (a *app) tagDeleteCmd(f *tagFlags) *cobra.Command {
	var ifToken string
	cmd := &cobra.Command{
		Use:   "delete TAG TABLE-URI [--if-token T]",
		Short: "Delete a tag by compare-and-swap: never a state updated since it was read",
		Long: `Delete a tag with delete-if-version of the object read (or of --if-token):
a tag updated meanwhile is kept and the delete fails (exit 1). Checkpoint
pins (ogcp_) are refused: delete the checkpoint instead.

--json prints {op, cas, tag}: tag is the state deleted.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, uri := a.tagArgs(cmd, args)
			t, done, err := a.openTags(cmd.Context(), uri, true, f)
			if err != nil {
				return err
			}
			defer done()
			res, err := t.Delete(cmd.Context(), name, ifToken)
			if err != nil {
				return err
			}
			return a.printTagResult(res)
		},
	}
	cmd.Flags().StringVar(&ifToken, "if-token", "", "only if the tag is still at this version token (from list or show)")
	return cmd
}

func (a *app) tagResolveCmd(f *tagFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "resolve TAG TABLE-URI",
		Short: "Where a tag points: branch and version (what a checkout by the tag opens)",
		Long: `Resolve a tag to the branch and version a checkout by it opens, checking that
the version still exists (a dangling tag is exit 1). Read-only.

--json prints {tag, branch, version, manifest_key (relative to the table),
manifest_size, recorded_manifest_size, size_matches, token}.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, uri := a.tagArgs(cmd, args)
			t, done, err := a.openTags(cmd.Context(), uri, false, f)
			if err != nil {
				return err
			}
			defer done()
			r, err := t.Resolve(cmd.Context(), name)
			if err != nil {
				return err
			}
			if a.jsonOut {
				return a.printJSON(r)
			}
			fmt.Fprintf(a.stdout, "%s\t%d\n", r.Branch, r.Version)
			if !r.SizeMatches {
				fmt.Fprintf(a.stderr, "warning: tag %q records manifest size %d, the manifest %s is %d bytes\n", r.Tag, r.RecordedSize, r.ManifestKey, r.ManifestSize)
			}
			return nil
		},
	}
}

func (a *app) printTagResult(res tag.Result) error {
	if a.jsonOut {
		return a.printJSON(res)
	}
	tg := res.Tag
	switch res.Op {
	case "create":
		fmt.Fprintf(a.stdout, "created tag %q: %s version %d%s\n", tg.Name, tg.Branch, tg.Version, metaSuffix(tg.Metadata))
	case "update":
		fmt.Fprintf(a.stdout, "updated tag %q: %s version %d%s\n", tg.Name, tg.Branch, tg.Version, metaSuffix(tg.Metadata))
	case "delete":
		fmt.Fprintf(a.stdout, "deleted tag %q (was %s version %d)\n", tg.Name, tg.Branch, tg.Version)
	}
	return nil
}

func metaSuffix(m map[string]string) string {
	if len(m) == 0 {
		return ""
	}
	return "; metadata " + fmtMeta(m)
}

func fmtMeta(m map[string]string) string {
	if len(m) == 0 {
		return "-"
	}
	return refmeta.Filter(m).String()
}
