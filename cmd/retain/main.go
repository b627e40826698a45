// Command retain keeps named checkpoints of Lance datasets alive on any
// object store. This build carries the storage adapters too: they run as
// plugins of this same binary, out of process.
package main

import (
	"os"

	"github.com/retain-dev/retain/adapters/bundled"
	"github.com/retain-dev/retain/core/storage/redact"
)

func main() {
	// The plugin half is dispatched before cobra so nothing, not even a
	// usage line, can reach stdout ahead of the go-plugin handshake.
	if len(os.Args) >= 3 && os.Args[1] == bundled.PluginCommand {
		if err := bundled.Serve(os.Args[2]); err != nil {
			os.Stderr.WriteString(redact.String("retain: "+err.Error()) + "\n")
			os.Exit(2)
		}
		os.Exit(0)
	}
	os.Exit(runMasked(os.Args[1:]))
}

// runMasked is run with everything it prints (results, JSON, the error
// line, every log line, the plugins' logs relayed through the logger)
// passed through one credential mask: whatever an endpoint echoed back
// into an error, no credential the process knows reaches the terminal.
func runMasked(args []string) int {
	stdout, stderr := redact.NewWriter(os.Stdout), redact.NewWriter(os.Stderr)
	code := run(args, stdout, stderr)
	stdout.Flush()
	stderr.Flush()
	return code
}
