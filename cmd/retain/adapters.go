package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/retain-dev/retain/adapters/bundled"
	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/pluginproto"
)

func (a *app) versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, plugin protocol and bundled adapters",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var names []string
			for _, ad := range bundled.Adapters {
				names = append(names, ad.Name)
			}
			v := map[string]any{
				"version":          version(),
				"go":               runtime.Version(),
				"plugin_protocol":  pluginproto.ProtocolVersion,
				"bundled_adapters": names,
			}
			if a.jsonOut {
				return a.printJSON(v)
			}
			fmt.Fprintf(a.stdout, "retain %s (%s, plugin protocol v%d, adapters: %s)\n",
				v["version"], v["go"], pluginproto.ProtocolVersion, strings.Join(names, ", "))
			return nil
		},
	}
}

// adapterReport is one row of `retain adapters list`.
type adapterReport struct {
	Name         string                `json:"name"`
	Schemes      []string              `json:"schemes"`
	Status       string                `json:"status"` // "available" or "not available yet"
	ProbedOn     string                `json:"probed_on,omitempty"`
	Capabilities *storage.Capabilities `json:"capabilities,omitempty"`
	Note         string                `json:"note,omitempty"`
	Error        string                `json:"error,omitempty"`
}

// errNeedsStore: the adapter serves remote stores, whose capabilities can
// only be probed on a real endpoint the user names.
var errNeedsStore = errors.New("needs --store")

// errNotServed: --store names a scheme this adapter does not serve.
var errNotServed = errors.New("not the adapter of --store")

func (a *app) adaptersCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "adapters", Short: "Storage adapters bundled in this binary"}
	var store string
	list := &cobra.Command{
		Use:   "list",
		Short: "List adapters with the capabilities and gates each declares",
		Long: `Starts each bundled adapter as a plugin (a separate process, as in real use)
and prints what it declares. Capabilities can depend on the store (localfs
declares less on network or FAT mounts): localfs is probed on a fresh
temporary directory unless --store names the store to probe.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), time.Minute)
			defer cancel()
			var probe storage.Location
			if store != "" {
				loc, err := storage.ParseLocation(store)
				if err != nil {
					return err
				}
				probe = loc
			}
			var rows []adapterReport
			failed := false
			for _, ad := range bundled.Adapters {
				row := adapterReport{Name: ad.Name, Schemes: ad.Schemes, Status: "available"}
				loc, cleanup, err := probeLocation(ad, probe)
				if errors.Is(err, errNotServed) {
					continue
				}
				if errors.Is(err, errNeedsStore) {
					row.Note = fmt.Sprintf("capabilities depend on the endpoint: probe one with --store %s://bucket/prefix", ad.Schemes[0])
					rows = append(rows, row)
					continue
				}
				if err == nil {
					row.ProbedOn = loc.String()
					var s *storage.Store
					s, err = bundled.OpenAdapter(ctx, ad.Name, loc, a.logger())
					if err == nil {
						caps := s.Capabilities()
						row.Capabilities = &caps
						s.Close()
					}
					cleanup()
				}
				if err != nil {
					row.Error = err.Error()
					failed = true
				}
				rows = append(rows, row)
			}
			var reserved []string
			for scheme := range bundled.Reserved {
				reserved = append(reserved, scheme)
			}
			sort.Strings(reserved)
			for _, scheme := range reserved {
				rows = append(rows, adapterReport{Name: bundled.Reserved[scheme], Schemes: []string{scheme}, Status: "not available yet"})
			}
			if a.jsonOut {
				if err := a.printJSON(map[string]any{"adapters": rows}); err != nil {
					return err
				}
			} else {
				a.printAdapters(rows)
			}
			if failed {
				return storage.Errorf("adapters list", "", storage.ErrUnknown, "an adapter failed to start; see the error column")
			}
			return nil
		},
	}
	list.Flags().StringVar(&store, "store", "", "probe this store URI instead of a temporary one (only the adapter serving its scheme)")
	cmd.AddCommand(list)
	return cmd
}

// probeLocation picks where to open an adapter for `adapters list`.
func probeLocation(ad storage.Adapter, probe storage.Location) (storage.Location, func(), error) {
	if probe.Scheme != "" {
		for _, s := range ad.Schemes {
			if s == probe.Scheme {
				return probe, func() {}, nil
			}
		}
		return storage.Location{}, func() {}, errNotServed
	}
	if ad.Schemes[0] != "file" {
		return storage.Location{}, func() {}, errNeedsStore
	}
	dir, err := os.MkdirTemp("", "retain-probe-")
	if err != nil {
		return storage.Location{}, func() {}, err
	}
	return storage.Location{Scheme: "file", Path: dir}, func() { os.RemoveAll(dir) }, nil
}

func (a *app) printAdapters(rows []adapterReport) {
	tw := tabwriter.NewWriter(a.stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ADAPTER\tSCHEMES\tSTATUS\tCREATE-IF-ABSENT\tREPLACE-IF-VERSION\tDELETE-IF-VERSION\tGATES")
	for _, r := range rows {
		c1, c2, c3, gates := "-", "-", "-", "-"
		if c := r.Capabilities; c != nil {
			c1, c2, c3 = c.CreateIfAbsent.String(), c.ReplaceIfVersion.String(), c.DeleteIfVersion.String()
			var gs []string
			for _, g := range c.Gates {
				gs = append(gs, g.Name+"("+g.Scope.String()+")")
			}
			if len(gs) > 0 {
				gates = strings.Join(gs, ",")
			}
		}
		status := r.Status
		if r.Error != "" {
			status = "error: " + r.Error
		}
		if r.Note != "" {
			c1 = "(probe with --store)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Name, strings.Join(r.Schemes, ","), status, c1, c2, c3, gates)
	}
	tw.Flush()
	for _, r := range rows {
		if r.Capabilities == nil {
			continue
		}
		for _, n := range r.Capabilities.Notes {
			fmt.Fprintf(a.stdout, "%s: %s\n", r.Name, n)
		}
		for _, c := range []storage.Capability{r.Capabilities.CreateIfAbsent, r.Capabilities.ReplaceIfVersion, r.Capabilities.DeleteIfVersion} {
			if c.Level == storage.LevelNone && c.Reason != "" {
				fmt.Fprintf(a.stdout, "%s: %s\n", r.Name, c.Reason)
			}
		}
	}
}
