// Command retain keeps named checkpoints of Lance datasets alive on any
// object store. This build carries the storage adapters too: they run as
// plugins of this same binary, out of process.
package main

import (
	"os"

	"github.com/retain-dev/retain/adapters/bundled"
)

func main() {
	// The plugin half is dispatched before cobra so nothing, not even a
	// usage line, can reach stdout ahead of the go-plugin handshake.
	if len(os.Args) >= 3 && os.Args[1] == bundled.PluginCommand {
		if err := bundled.Serve(os.Args[2]); err != nil {
			os.Stderr.WriteString("retain: " + err.Error() + "\n")
			os.Exit(2)
		}
		os.Exit(0)
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}
