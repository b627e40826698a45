package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/cobra"

	"github.com/retain-dev/retain/core"
)

// Exit statuses: 0 success, 1 the operation failed, 2 usage or setup error.
const (
	exitFailed = 1
	exitUsage  = 2
)

type app struct {
	stdout, stderr io.Writer
	jsonOut        bool
	logLevel       string
	ran            bool
	// adapterPath, adapterSHA256: --adapter, --adapter-sha256 (open).
	adapterPath, adapterSHA256 string
}

func run(args []string, stdout, stderr io.Writer) int {
	a := &app{stdout: stdout, stderr: stderr}
	root := a.rootCmd()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.Execute()
	if err == nil {
		return 0
	}
	fmt.Fprintln(stderr, "retain:", err)
	var ue usageError
	if !a.ran || errors.As(err, &ue) || errors.Is(err, core.ErrInvalidArgument) {
		return exitUsage
	}
	return exitFailed
}

// rootCmd is the whole command tree; tests walk it to check that every
// command a message or doc names exists.
func (a *app) rootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "retain",
		Short: "Checkpoint-pinned retention of Lance datasets on any object store",
		Long: `retain keeps named checkpoints of Lance datasets alive through cleanup, on a
local filesystem, S3, GCS or Azure. Stores are named by URI: a path or
file:///abs/path (localfs); s3://, gs:// and az:// are reserved.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	// Errors before any command runs (unknown command or flag, wrong
	// arguments) are usage errors; PersistentPreRun marks that one ran.
	root.PersistentPreRun = func(*cobra.Command, []string) { a.ran = true }
	root.PersistentFlags().BoolVar(&a.jsonOut, "json", false, "print machine-readable JSON")
	root.PersistentFlags().StringVar(&a.logLevel, "log-level", envOr("RETAIN_LOG", "warn"), "log level (trace, debug, info, warn, error); env RETAIN_LOG")
	root.PersistentFlags().StringVar(&a.adapterPath, "adapter", os.Getenv("RETAIN_ADAPTER"), "open every store through this vendor adapter plugin binary instead of the bundled adapter for its scheme; env RETAIN_ADAPTER")
	root.PersistentFlags().StringVar(&a.adapterSHA256, "adapter-sha256", os.Getenv("RETAIN_ADAPTER_SHA256"), "expected SHA-256 (hex) of the --adapter binary, refused if it differs (recommended); env RETAIN_ADAPTER_SHA256")
	root.AddCommand(a.versionCmd(), a.adaptersCmd(), a.claimCmd(), a.inspectCmd(), a.checkpointCmd(), a.reconcileCmd(), a.cleanupCmd(), a.quickstartCmd(), a.branchCmd(), a.daemonCmd(), a.statusCmd(), a.auditCmd(), a.tagCmd(), a.registryCmd())
	refuseUnknownCommands(root)
	return root
}

// usageError marks a command line the command itself found wrong.
type usageError struct{ error }

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
