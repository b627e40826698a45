package bundled

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/hashicorp/go-hclog"

	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/pluginproto"
)

// PluginCommand is the hidden subcommand under which a binary that embeds
// the bundled adapters serves one of them as a plugin:
// `retain __adapter-plugin <adapter>` must reach Serve.
const PluginCommand = "__adapter-plugin"

// EnvHost carries, to a bundled adapter's plugin process, the process id of
// the host that launched it.
const EnvHost = "RETAIN_BUNDLED_PLUGIN_HOST"

// self is how this binary runs its bundled adapters as plugins of itself.
var self = pluginproto.Self{Command: PluginCommand, EnvHost: EnvHost}

// ExitNotDispatched is the exit status of a process launched as a bundled
// plugin whose main did not dispatch PluginCommand.
const ExitNotDispatched = pluginproto.ExitNotDispatched

// ErrNotDispatched: a bundled plugin's executable did not dispatch
// PluginCommand (its main never calls Serve).
var ErrNotDispatched = pluginproto.ErrNotDispatched

// Serve serves the named bundled adapter as a plugin; the hidden subcommand
// calls it. It returns only on error: an unknown name lists the adapters
// this binary has.
func Serve(name string) error { return self.Serve(Adapters, name) }

// launch runs one of the adapters bundled into this very binary as a
// plugin (pluginproto.Self): a child that reaches launch instead of Serve
// exits at once, and the host turns that exit into an error
// (ErrInvalidArgument, wrapping ErrNotDispatched) naming the fix.
func launch(ctx context.Context, name string, loc storage.Location, logger hclog.Logger) (*pluginproto.Client, error) {
	self.ExitIfLaunched("retain")
	c, err := self.Launch(ctx, name, loc, logger)
	if errors.Is(err, ErrNotDispatched) {
		exe, _ := os.Executable()
		return nil, &storage.Error{Op: "launch", Kind: storage.ErrInvalidArgument, Err: err, Msg: fmt.Sprintf(
			"bundled adapter %q runs as a plugin of this executable (%s), but its main does not dispatch the plugin subcommand: "+
				"put `if len(os.Args) >= 3 && os.Args[1] == bundled.PluginCommand { if err := bundled.Serve(os.Args[2]); err != nil { os.Exit(2) }; os.Exit(0) }` "+
				"first in main, or open the store in this process with bundled.OpenInProcess",
			name, exe)}
	}
	return c, err
}
