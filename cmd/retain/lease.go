package main

import (
	"context"
	"fmt"
	"path"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/retain-dev/retain/core/checkpoint/registry"
	"github.com/retain-dev/retain/core/duration"
	"github.com/retain-dev/retain/core/lease"
	"github.com/retain-dev/retain/core/storage"
)

const leaseLong = `Reader leases: pin one version of a table for a while, so that no
cleanup deletes its files under a long scan. A lease is a reserved Lance tag
(ogcp_lease_<id>) on the version, with its expiry in the tag's metadata: every
cleanup keeps the version while the tag exists. The daemon (before each
retention run) or "retain lease reap" removes a lease once its clock is past
the expiry by a margin (default 5m: the clock skew tolerated); renew well
before expiry. The clock only ever decides to keep less after the expiry it
was told, never to take a claim. docs/refs.md#reader-leases.`

func (a *app) leaseCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "lease", Short: "Reader leases: pin a table version for a reader for a while (acquire, renew, release, list, reap)", Long: leaseLong}
	cmd.AddCommand(a.leaseAcquireCmd(), a.leaseRenewCmd(), a.leaseReleaseCmd(), a.leaseListCmd(), a.leaseReapCmd())
	return cmd
}

// tableInStore splits a table URI into its store (the database folder or
// prefix above it, where the registry is) and the table's folder there.
func tableInStore(uri string) (store, table string, err error) {
	loc, err := storage.ParseLocation(uri)
	if err != nil {
		return "", "", err
	}
	if loc.Scheme == "file" {
		if err := checkLocalDataset(uri, loc.Path); err != nil {
			return "", "", err
		}
		parent := filepath.Dir(loc.Path)
		if parent == loc.Path {
			return "", "", usageError{fmt.Errorf("%s: a table URI names a <table>.lance folder inside a database folder", uri)}
		}
		return parent, filepath.Base(loc.Path), nil
	}
	if loc.Prefix == "" {
		return "", "", usageError{fmt.Errorf("%s: a table URI names a <table>.lance folder, e.g. s3://bucket/db/events.lance", uri)}
	}
	table = path.Base(loc.Prefix)
	loc.Prefix = strings.TrimSuffix(strings.TrimSuffix(loc.Prefix, table), "/")
	return loc.String(), table, nil
}

// onTable opens the store above the table at uri and runs fn on it.
func onTable[T any](a *app, ctx context.Context, uri string, write bool, run func(s *storage.Store, table string) (*T, error), text func(*T) error) error {
	store, table, err := tableInStore(uri)
	if err != nil {
		return err
	}
	return onStore(a, ctx, store, write, func(s *storage.Store) (*T, error) { return run(s, table) }, text)
}

func (a *app) leaseAcquireCmd() *cobra.Command {
	var req lease.Request
	var ttl duration.Value
	c := &cobra.Command{
		Use:   "acquire TABLE-URI --ttl D [--version V] [--branch B]",
		Short: "Pin a version (default: the newest of main, or of --branch) for a reader until now+TTL",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("ttl") {
				return usageError{fmt.Errorf("--ttl is required: how long the reader needs the version (e.g. 30m), at most %s", lease.MaxTTL)}
			}
			actor, err := a.actor(cmd)
			if err != nil {
				return err
			}
			req.TTL = time.Duration(ttl)
			return onTable(a, cmd.Context(), args[0], true, func(s *storage.Store, table string) (*lease.Lease, error) {
				req.Table = table
				return lease.Acquire(cmd.Context(), s, req, lease.Options{Actor: actor})
			}, func(l *lease.Lease) error {
				fmt.Fprintf(a.stdout, "leased %s %s v%d until %s as lease %s (tag %s)\n", l.Table, l.Branch, l.Version, l.Expires.Format(time.RFC3339), l.ID, l.Tag)
				fmt.Fprintf(a.stdout, "renew: retain lease renew %s %s --ttl %s\nrelease: retain lease release %s %s\n", l.ID, args[0], time.Duration(ttl), l.ID, args[0])
				return nil
			})
		},
	}
	c.Flags().Var(&ttl, "ttl", "how long the lease lasts from now (e.g. 30m, 2h; at most 7d)")
	c.Flags().Uint64Var(&req.Version, "version", 0, "the version to lease (default: the newest)")
	c.Flags().StringVar(&req.Branch, "branch", "", "the branch whose version to lease (default main)")
	return c
}

func (a *app) leaseRenewCmd() *cobra.Command {
	var ttl duration.Value
	c := &cobra.Command{
		Use:   "renew LEASE-ID TABLE-URI --ttl D",
		Short: "Extend a lease to now+TTL (conditional on the lease as read: a concurrent reap or renew wins)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("ttl") {
				return usageError{fmt.Errorf("--ttl is required: how long from now the lease lasts")}
			}
			return onTable(a, cmd.Context(), args[1], true, func(s *storage.Store, table string) (*lease.Lease, error) {
				return lease.Renew(cmd.Context(), s, table, registry.ID(args[0]), time.Duration(ttl), lease.Options{})
			}, func(l *lease.Lease) error {
				fmt.Fprintf(a.stdout, "renewed lease %s on %s %s v%d until %s\n", l.ID, l.Table, l.Branch, l.Version, l.Expires.Format(time.RFC3339))
				return nil
			})
		},
	}
	c.Flags().Var(&ttl, "ttl", "how long the lease lasts from now")
	return c
}

func (a *app) leaseReleaseCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "release LEASE-ID TABLE-URI",
		Short: "End a lease: the next cleanup may remove what only it kept",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return onTable(a, cmd.Context(), args[1], true, func(s *storage.Store, table string) (*lease.Lease, error) {
				return lease.Release(cmd.Context(), s, table, registry.ID(args[0]))
			}, func(l *lease.Lease) error {
				fmt.Fprintf(a.stdout, "released lease %s on %s %s v%d\n", l.ID, l.Table, l.Branch, l.Version)
				return nil
			})
		},
	}
}

type leaseList struct {
	Table  string        `json:"table"`
	Leases []lease.Lease `json:"leases"`
}

func (a *app) leaseListCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "list TABLE-URI",
		Short: "The table's leases, by expiry (read-only)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return onTable(a, cmd.Context(), args[0], false, func(s *storage.Store, table string) (*leaseList, error) {
				ls, err := lease.List(cmd.Context(), s, table)
				if ls == nil {
					ls = []lease.Lease{}
				}
				return &leaseList{Table: table, Leases: ls}, err
			}, func(l *leaseList) error {
				tw := tabwriter.NewWriter(a.stdout, 2, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "LEASE\tBRANCH\tVERSION\tEXPIRES\tHOLDER\tPROBLEM")
				for _, x := range l.Leases {
					exp := "-"
					if !x.Expires.IsZero() {
						exp = x.Expires.Format(time.RFC3339)
					}
					fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", x.ID, x.Branch, x.Version, exp, x.Holder, x.Problem)
				}
				return tw.Flush()
			})
		},
	}
}

func (a *app) leaseReapCmd() *cobra.Command {
	var o lease.ReapOptions
	var margin duration.Value
	c := &cobra.Command{
		Use:   "reap STORE [--margin D] [--dry-run]",
		Short: "Remove the store's leases expired by more than the margin (the daemon does this before each retention run)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Margin = time.Duration(margin)
			return onStore(a, cmd.Context(), args[0], !o.DryRun, func(s *storage.Store) (*lease.Reaped, error) {
				return lease.Reap(cmd.Context(), s, o)
			}, func(r *lease.Reaped) error {
				verb := "reaped"
				if r.DryRun {
					verb = "would reap"
				}
				fmt.Fprintf(a.stdout, "%d leases in %d tables at %s (margin %s): %s %d\n", len(r.Leases), r.Tables, r.Now.Format(time.RFC3339), r.Margin, verb, r.Removed)
				tw := tabwriter.NewWriter(a.stdout, 2, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "TABLE\tLEASE\tVERSION\tEXPIRES\tDECISION")
				for _, j := range r.Leases {
					fmt.Fprintf(tw, "%s\t%s\t%s v%d\t%s\t%s\n", j.Table, j.ID, j.Branch, j.Version, j.Expires.Format(time.RFC3339), j.Why)
				}
				return tw.Flush()
			})
		},
	}
	c.Flags().Var(&margin, "margin", "how far past its expiry this host's clock must be (default 5m)")
	c.Flags().BoolVar(&o.DryRun, "dry-run", false, "decide and remove nothing")
	return c
}
