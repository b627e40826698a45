package conformance

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"

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
// itself; it exits with exitNotDispatched instead, which the host turns
// into an error naming the fix.
const envPluginHost = "RETAIN_CONFORMANCE_PLUGIN_HOST"

const exitNotDispatched = 86

// exitIfNotDispatched ends a process that its parent launched as one of
// the suite's plugins or workers but that reached the suite instead of
// Dispatch (a TestMain without the call), and so runs the suite again: it
// would launch copies of itself without end. Run calls it first. The
// parent turns the exit status into an error naming the fix (launchSelf)
// or a failed worker.
func exitIfNotDispatched() {
	if len(os.Args) < 2 {
		return
	}
	plugin := os.Args[1] == pluginSubcommand && os.Getenv(envPluginHost) == strconv.Itoa(os.Getppid())
	worker := os.Args[1] == WorkerSubcommand && os.Getenv(workerEnv) != ""
	if plugin || worker {
		os.Stderr.WriteString("conformance: launched as " + os.Args[1] + " but main did not call conformance.Dispatch; exiting\n")
		os.Exit(exitNotDispatched)
	}
}

func serveSelf(adapters []storage.Adapter, name string) error {
	names := make([]string, 0, len(adapters))
	for _, a := range adapters {
		if a.Name == name {
			pluginproto.Serve(a)
			return nil
		}
		names = append(names, a.Name)
	}
	sort.Strings(names)
	carried := "none"
	if len(names) > 0 {
		carried = strings.Join(names, ", ")
	}
	return storage.Errorf("conformance", "", storage.ErrInvalidArgument,
		"this binary carries no adapter %q; it carries: %s", name, carried)
}

func launchSelf(ctx context.Context, name string, loc storage.Location, logger hclog.Logger) (*pluginproto.Client, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, &storage.Error{Op: "launch", Kind: storage.ErrUnavailable, Err: err,
			Msg: fmt.Sprintf("cannot find this executable to serve adapter %q", name)}
	}
	c, err := pluginproto.Launch(ctx, pluginproto.LaunchConfig{
		Adapter:  name,
		Path:     exe,
		Args:     []string{pluginSubcommand, name},
		Env:      []string{envPluginHost + "=" + strconv.Itoa(os.Getpid())},
		Location: loc,
		Logger:   logger,
	})
	var ee *pluginproto.ExitError
	if errors.As(err, &ee) && ee.Code == exitNotDispatched {
		return nil, storage.Errorf("launch", "", storage.ErrInvalidArgument,
			"%s runs adapter %q as a plugin of itself, but its main does not dispatch: call conformance.Dispatch(adapters) first in main or TestMain", exe, name)
	}
	return c, err
}
