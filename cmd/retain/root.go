package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"regexp"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/cobra"

	"github.com/retain-dev/retain/core/storage"
)

// Exit statuses: 0 success, 1 the operation failed, 2 usage or setup error.
const (
	exitFailed = 1
	exitUsage  = 2
	// exitInterrupted: SIGINT or SIGTERM stopped the command (128 + 2, as
	// a shell reports Ctrl-C).
	exitInterrupted = 130
)

type app struct {
	stdout, stderr io.Writer
	jsonOut        bool
	logLevel       string
	ran            bool
	// printedJSON: the command already wrote its JSON result, which then
	// carries the failure; a second object would break a reader of one.
	printedJSON bool
	showVersion bool
	// adapterPath, adapterSHA256: --adapter, --adapter-sha256 (open).
	adapterPath, adapterSHA256 string
	// parallelism: --parallelism (RETAIN_PARALLELISM), 0 for the adapter's
	// default.
	parallelism int
	// maxRPS: --max-rps (RETAIN_MAX_RPS), 0 for no cap.
	maxRPS float64
	// actorFlag: --actor (see actor.go).
	actorFlag string
	// policyFlag: --policy (see policy.go).
	policyFlag string
	// onInterrupt is the command that continues what a command stopped by
	// a signal leaves resumable (cleanup run sets it once it has an
	// operation); printed after the error.
	onInterrupt string
	// ownsSignals: the command handles SIGINT/SIGTERM itself (the daemon
	// finishes its pass; its exit status says how that pass went).
	ownsSignals atomic.Bool
}

func run(args []string, stdout, stderr io.Writer) int {
	a := &app{stdout: stdout, stderr: stderr}
	root := a.rootCmd()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	// Ctrl-C or a service manager's SIGTERM cancels the command's context:
	// the work stops at its next store call, claims are released, journals
	// stay resumable. The handler stays until the command returns, so a
	// duplicate (`timeout` signals the child and then its group) cannot
	// kill it; a second Ctrl-C a moment later ends a one-shot command at
	// once. A command that owns its signals (the daemon) is never cut short.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer func() {
		// A command that owns its signals keeps them absorbed until the
		// process exits: a late duplicate must not kill it mid-teardown.
		if !a.ownsSignals.Load() {
			signal.Stop(sigs)
		}
	}()
	go func() {
		var first time.Time
		for range sigs {
			switch {
			case first.IsZero():
				first = time.Now()
				cancel()
			case time.Since(first) > time.Second && !a.ownsSignals.Load():
				fmt.Fprintln(stderr, "retain: a second signal: stopping now")
				os.Exit(exitInterrupted)
			}
		}
	}()
	err := root.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	code := exitFailed
	var ue usageError
	if !a.ran || errors.As(err, &ue) || errors.Is(err, storage.ErrInvalidArgument) {
		code = exitUsage
	}
	if ctx.Err() != nil && !a.ownsSignals.Load() {
		code = exitInterrupted
		err = fmt.Errorf("interrupted by a signal; the work stopped at a safe point: %w", err)
		if a.onInterrupt != "" {
			err = fmt.Errorf("%w; `%s` continues it", err, a.onInterrupt)
		}
	}
	// The plain line goes to stderr in JSON mode too: it is what a person
	// at the terminal reads, and scripts read stdout.
	fmt.Fprintln(stderr, "retain:", err)
	if (a.jsonOut || jsonRequested(args)) && !a.printedJSON {
		a.printJSON(jsonErrorOf(err, code))
	}
	return code
}

// jsonRequested finds --json in a command line whose parsing stopped
// before reaching it (an unknown flag ahead of it).
func jsonRequested(args []string) bool {
	for _, arg := range args {
		if arg == "--" {
			return false
		}
		if v, ok := strings.CutPrefix(arg, "--json"); ok && (v == "" || v[0] == '=') {
			b, err := strconv.ParseBool(strings.TrimPrefix(v, "="))
			return v == "" || err == nil && b
		}
	}
	return false
}

type jsonError struct {
	Error jsonErrorBody `json:"error"`
}

type jsonErrorBody struct {
	Kind    string `json:"kind"`
	Message string `json:"message"`
	Next    string `json:"next,omitempty"`
}

// nextCommand is the first command a message names; messages name the
// command that gets out in backquotes.
var nextCommand = regexp.MustCompile("`(retain [^`]+)`")

func jsonErrorOf(err error, code int) jsonError {
	kind := storage.KindOf(err)
	if kind == storage.ErrUnknown && code == exitUsage {
		kind = storage.ErrInvalidArgument // a command line the parser or the command refused
	}
	e := jsonErrorBody{Kind: kind.String(), Message: err.Error()}
	if m := nextCommand.FindStringSubmatch(e.Message); m != nil {
		e.Next = m[1]
	}
	return jsonError{e}
}

// logLevels are the names hclog knows; it maps any other to its default.
var logLevels = []string{"trace", "debug", "info", "warn", "error", "off"}

func (a *app) checkLogLevel(cmd *cobra.Command) error {
	l := strings.ToLower(strings.TrimSpace(a.logLevel))
	for _, v := range logLevels {
		if l == v {
			return nil
		}
	}
	from := "--log-level"
	if !cmd.Flags().Changed("log-level") {
		from = "RETAIN_LOG"
	}
	return usageError{fmt.Errorf("%s %s is not a log level: use one of %s", from, storage.Quote(a.logLevel), strings.Join(logLevels, ", "))}
}

// rootCmd is the whole command tree; tests walk it to check that every
// command a message or doc names exists.
func (a *app) rootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "retain",
		Short: "Checkpoint-pinned retention of Lance datasets on any object store",
		Long: `retain keeps named checkpoints of Lance datasets alive through cleanup, on a
local filesystem, S3, GCS or Azure. Stores are named by URI: a path or
file:///abs/path (localfs), s3://bucket/prefix, gs://bucket/prefix or
az://container/prefix (see docs/backend-*.md for each one's options).`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	// Errors before any command runs (unknown command or flag, wrong
	// arguments) are usage errors; PersistentPreRun marks that one ran.
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		a.ran = true
		if err := a.checkLogLevel(cmd); err != nil {
			return err
		}
		return a.setupPolicy(cmd)
	}
	root.PersistentFlags().BoolVar(&a.jsonOut, "json", false, "print machine-readable JSON")
	root.PersistentFlags().StringVar(&a.logLevel, "log-level", envOr("RETAIN_LOG", "warn"), "log level ("+strings.Join(logLevels, ", ")+"); env RETAIN_LOG")
	root.Flags().BoolVar(&a.showVersion, "version", false, "print the version, as `retain version`")
	a.addAdapterFlags(root.PersistentFlags())
	root.PersistentFlags().Float64Var(&a.maxRPS, "max-rps", envFloat("RETAIN_MAX_RPS"), "cap the requests per second to the store (0: no cap), for a bucket other workloads share; env RETAIN_MAX_RPS")
	root.PersistentFlags().IntVar(&a.parallelism, "parallelism", envInt("RETAIN_PARALLELISM"), fmt.Sprintf("most requests in flight to the store at once (1-%d; default: what its adapter declares, e.g. 4 for a local disk, 64 for S3, GCS and Azure); env RETAIN_PARALLELISM", storage.MaxParallelism))
	root.PersistentFlags().StringVar(&a.actorFlag, "actor", "", "who is acting, recorded in the claim, the audit lines and checkpoints (default: env "+actorEnv+", else the OS user@host)")
	root.PersistentFlags().StringVar(&a.policyFlag, "policy", "", "authorize every mutating action with this Cedar policy file; a denial exits 1 and writes nothing (default: env "+policyEnv+"; none: no authorization)")
	versionCmd := a.versionCmd()
	root.AddCommand(versionCmd, a.adaptersCmd(), a.claimCmd(), a.inspectCmd(), a.checkpointCmd(), a.reconcileCmd(), a.cleanupCmd(), a.quickstartCmd(), a.branchCmd(), a.daemonCmd(), a.statusCmd(), a.auditCmd(), a.tagCmd(), a.registryCmd(), a.leaseCmd())
	refuseUnknownCommands(root)
	help := root.RunE
	root.RunE = func(cmd *cobra.Command, args []string) error {
		if a.showVersion {
			return versionCmd.RunE(cmd, args)
		}
		return help(cmd, args)
	}
	return root
}

// usageError marks a command line the command itself found wrong.
type usageError struct{ error }

// envFloat is the number in $k, 0 if it is unset, -1 if it is not a
// number (which the flag's check then refuses, naming the variable).
func envFloat(k string) float64 {
	v := os.Getenv(k)
	if v == "" {
		return 0
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		return -1
	}
	return f
}

// envInt is the number in $k, 0 if it is unset, -1 if it is not a number
// (which the flag's check then refuses, naming the variable).
func envInt(k string) int {
	v := os.Getenv(k)
	if v == "" {
		return 0
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return -1
	}
	return n
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func (a *app) logger() hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Name: "retain", Level: hclog.LevelFromString(a.logLevel), Output: a.stderr})
}

func (a *app) printJSON(v any) error {
	a.printedJSON = true
	enc := json.NewEncoder(a.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}
