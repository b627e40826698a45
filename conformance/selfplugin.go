package conformance

import (
	"context"
	"errors"
	"os"

	"github.com/hashicorp/go-hclog"

	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/pluginproto"
)

// A binary that runs the suite on an adapter it carries (Config.Adapters)
// serves that adapter as a plugin of itself, so the cases cross the same
// gRPC boundary as a vendor's binary: `<exe> __conformance-plugin NAME`,
// which Dispatch handles.
const pluginSubcommand = "__conformance-plugin"

// envPluginHost carries, to such a plugin process, its host's process id.
// A child launched with it whose main never reached Dispatch (a TestMain
// without the call) would run the suite again and launch another copy of
// itself; it exits with pluginproto.ExitNotDispatched instead, which the host turns
// into an error naming the fix.
const envPluginHost = "RETAIN_CONFORMANCE_PLUGIN_HOST"

// self is how a suite binary runs the adapters it carries as plugins of
// itself.
var self = pluginproto.Self{Command: pluginSubcommand, EnvHost: envPluginHost}

// exitIfNotDispatched ends a process that its parent launched as one of
// the suite's plugins or workers but that reached the suite instead of
// Dispatch (a TestMain without the call), and so runs the suite again: it
// would launch copies of itself without end. Run calls it first. The
// parent turns the exit status into an error naming the fix (launchSelf)
// or a failed worker.
func exitIfNotDispatched() {
	if len(os.Args) >= 2 && os.Args[1] == WorkerSubcommand && os.Getenv(workerEnv) != "" {
		os.Stderr.WriteString("conformance: launched as " + os.Args[1] + " but main did not call conformance.Dispatch; exiting\n")
		os.Exit(pluginproto.ExitNotDispatched)
	}
	self.ExitIfLaunched("conformance")
}

func launchSelf(ctx context.Context, name string, loc storage.Location, logger hclog.Logger) (*pluginproto.Client, error) {
	c, err := self.Launch(ctx, name, loc, logger)
	if errors.Is(err, pluginproto.ErrNotDispatched) {
		exe, _ := os.Executable()
		return nil, storage.Errorf("launch", "", storage.ErrInvalidArgument,
			"%s runs adapter %q as a plugin of itself, but its main does not dispatch: call conformance.Dispatch(adapters) first in main or TestMain", exe, name)
	}
	return c, err
}
