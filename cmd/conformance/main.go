// Command conformance proves that a storage adapter can safely host
// retention: `conformance run --adapter localfs`, or a vendor's binary with
// `--adapter ./acme-adapter --sha256 D --store acme://bucket/prefix`.
//
// Exit status: 0 all cases passed or skipped, 1 a case failed, 2 a usage or
// setup error.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/cobra"

	"github.com/retain-dev/retain/adapters/bundled"
	"github.com/retain-dev/retain/cmd/conformance/internal/supportmatrix"
	"github.com/retain-dev/retain/conformance"
)

func main() {
	// Plugin and worker halves first: nothing may reach stdout before the
	// go-plugin handshake.
	conformance.Dispatch(bundled.Adapters)
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

type usageErr struct{ error }

// errFailed: the suite ran and a case failed (exit 1).
var errFailed = errors.New("conformance failed")

func run(args []string, stdout, stderr io.Writer) int {
	cfg := conformance.Config{Adapters: bundled.Adapters}
	var jsonPath, junitPath, logLevel string
	root := &cobra.Command{
		Use:           "conformance",
		Short:         "Prove a storage adapter keeps retain's storage contract",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	runCmd := &cobra.Command{
		Use:   "run",
		Short: "Run the conformance suite against an adapter",
		Long: `Runs every case against the adapter: the storage contract, a create-if-absent
race and a lost-update counter across real OS processes (each with its own
plugin instance), conditional delete, the retention claim, capability
honesty, gates, a linearizability check of the recorded histories
(porcupine), and hygiene. Everything it writes goes under a fresh random
prefix and is removed at the end.

With no --store a bundled file adapter runs in a fresh temporary directory.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cfg.Adapter == "" {
				return usageErr{errors.New("--adapter is required: a bundled name (localfs) or a binary path with --sha256")}
			}
			cfg.Logger = hclog.New(&hclog.LoggerOptions{Name: "conformance", Level: hclog.LevelFromString(logLevel), Output: stderr})
			if cfg.ReportDir == "" {
				switch {
				case jsonPath != "":
					cfg.ReportDir = dirOf(jsonPath)
				case junitPath != "":
					cfg.ReportDir = dirOf(junitPath)
				}
			}
			rep, err := conformance.Run(cmd.Context(), cfg)
			if err != nil {
				return usageErr{err}
			}
			rep.WriteTable(stdout)
			if jsonPath != "" {
				if err := rep.WriteJSON(jsonPath); err != nil {
					return usageErr{err}
				}
			}
			if junitPath != "" {
				if err := rep.WriteJUnit(junitPath); err != nil {
					return usageErr{err}
				}
			}
			if rep.Failed() {
				return errFailed
			}
			return nil
		},
	}
	f := runCmd.Flags()
	f.StringVar(&cfg.Adapter, "adapter", "", "bundled adapter name, or path to an adapter binary")
	f.StringVar(&cfg.SHA256, "sha256", "", "expected SHA-256 (hex) of the adapter binary")
	f.StringVar(&cfg.Backend, "backend", "", "what serves the store, for the report and matrix (\"versitygw v1.8.0\", \"AWS S3\")")
	f.StringVar(&cfg.Store, "store", "", "store URI to test in (default: a temporary directory for file adapters)")
	f.IntVar(&cfg.Processes, "processes", 4, "OS processes in the cross-process races")
	f.IntVar(&cfg.Rounds, "rounds", 0, "rounds of the race cases (0: enough to catch 1 failing operation in 500 with 99 % probability, 767 with 4 processes)")
	f.DurationVar(&cfg.Timeout, "timeout", 15*time.Minute, "bound on the whole run")
	f.StringVar(&cfg.Run, "run", "", "only cases matching this regular expression")
	f.StringToStringVar(&cfg.Skip, "skip", nil, "a case not to run, as NAME=REASON (repeatable): for a backend known to break that promise; the report gives the reason")
	f.StringVar(&jsonPath, "json", "", "write the report as JSON to this file")
	f.StringVar(&junitPath, "junit", "", "write the report as JUnit XML to this file")
	f.StringVar(&cfg.ReportDir, "report-dir", "", "where artefacts such as linearizability visualisations go (default: next to --json/--junit, else .)")
	f.StringVar(&logLevel, "log-level", "warn", "plugin log level")
	var update string
	matrixCmd := &cobra.Command{
		Use:   "matrix REPORT.json...",
		Short: "Render JSON reports as a Markdown support matrix",
		Long: `Prints the support matrix (adapter x backend x capability x result) built
from conformance JSON reports; with --update FILE rewrites the generated
section of FILE (between the conformance-matrix markers) instead.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var reps []*conformance.Report
			for _, p := range args {
				r, err := conformance.LoadReport(p)
				if err != nil {
					return usageErr{err}
				}
				reps = append(reps, r)
			}
			table := supportmatrix.Matrix(reps)
			if update == "" {
				fmt.Fprint(stdout, table)
				return nil
			}
			doc, err := os.ReadFile(update)
			if err != nil {
				return usageErr{err}
			}
			out, err := supportmatrix.ReplaceMatrix(string(doc), table)
			if err != nil {
				return usageErr{err}
			}
			return os.WriteFile(update, []byte(out), 0o644)
		},
	}
	matrixCmd.Flags().StringVar(&update, "update", "", "rewrite the generated matrix section of this Markdown file")
	root.AddCommand(runCmd, matrixCmd)
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := root.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	fmt.Fprintln(stderr, "conformance:", err)
	if errors.Is(err, errFailed) {
		return 1
	}
	return 2
}

func dirOf(p string) string {
	for i := len(p) - 1; i >= 0; i-- {
		if p[i] == '/' {
			return p[:i]
		}
	}
	return "."
}
