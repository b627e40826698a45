package bundled

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

// PluginCommand is the hidden subcommand under which a binary that embeds
// the bundled adapters serves one of them as a plugin:
// `retain __adapter-plugin <adapter>` must reach Serve.
const PluginCommand = "__adapter-plugin"

// EnvHost carries, to a bundled adapter's plugin process, the process id of
// the host that launched it.
const EnvHost = "RETAIN_BUNDLED_PLUGIN_HOST"

// ExitNotDispatched is the exit status of a process launched as a bundled
// plugin whose main did not dispatch PluginCommand.
const ExitNotDispatched = 86

// ErrNotDispatched: a bundled plugin's executable did not dispatch
// PluginCommand (its main never calls Serve).
var ErrNotDispatched = errors.New("the executable does not dispatch " + PluginCommand)

// Serve serves the named bundled adapter as a plugin; the hidden subcommand
// calls it. It returns only on error: an unknown name lists the adapters
// this binary has.
func Serve(name string) error { return serveFrom(Adapters, name) }

func serveFrom(adapters []storage.Adapter, name string) error {
	names := make([]string, 0, len(adapters))
	for _, a := range adapters {
		if a.Name == name {
			pluginproto.Serve(a)
			return nil
		}
		names = append(names, a.Name)
	}
	sort.Strings(names)
	avail := "none"
	if len(names) > 0 {
		avail = strings.Join(names, ", ")
	}
	return storage.Errorf("serve-plugin", "", storage.ErrInvalidArgument,
		"this binary bundles no adapter %q; available adapters: %s", name, avail)
}

// launch runs one of the adapters bundled into this very binary as a
// plugin: os.Executable() with arguments `__adapter-plugin <name>`, which
// must reach Serve. No checksum is checked: the binary is the one running.
//
// A binary whose main does not dispatch the subcommand would re-execute
// itself as the adapter, its copy would do the same, and so on until the
// handshake timeout. So the child is told, in EnvHost, that its parent
// launched it as a bundled plugin: a child that reaches launch instead of
// Serve exits at once with ExitNotDispatched, and the host turns that exit
// into an error (ErrInvalidArgument, wrapping ErrNotDispatched) naming the
// fix.
func launch(ctx context.Context, name string, loc storage.Location, logger hclog.Logger) (*pluginproto.Client, error) {
	if launchedAsBundled() {
		os.Stderr.WriteString("retain: this process was launched as bundled adapter plugin " +
			strings.Join(os.Args[1:], " ") + " but its main does not dispatch " + PluginCommand +
			"; it exits rather than launch another copy of itself\n")
		os.Exit(ExitNotDispatched)
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, &storage.Error{Op: "launch", Kind: storage.ErrUnavailable, Err: err,
			Msg: fmt.Sprintf("cannot find this executable to run bundled adapter %q", name)}
	}
	c, err := pluginproto.Launch(ctx, pluginproto.LaunchConfig{
		Adapter:  name,
		Path:     exe,
		Args:     []string{PluginCommand, name},
		Env:      []string{EnvHost + "=" + strconv.Itoa(os.Getpid())},
		Location: loc,
		Logger:   logger,
	})
	var ee *pluginproto.ExitError
	if errors.As(err, &ee) && ee.Code == ExitNotDispatched {
		return nil, &storage.Error{Op: "launch", Kind: storage.ErrInvalidArgument, Err: ErrNotDispatched, Msg: fmt.Sprintf(
			"bundled adapter %q runs as a plugin of this executable (%s), but its main does not dispatch the plugin subcommand: "+
				"put `if len(os.Args) >= 3 && os.Args[1] == bundled.PluginCommand { if err := bundled.Serve(os.Args[2]); err != nil { os.Exit(2) }; os.Exit(0) }` "+
				"first in main, or open the store in this process with bundled.OpenInProcess",
			name, exe)}
	}
	return c, err
}

// launchedAsBundled reports whether this process's parent launched it as a
// bundled plugin. The parent's pid, not just the variable's presence, so a
// leaked variable (exported in a shell, inherited by grandchildren) never
// stops a legitimate launch.
func launchedAsBundled() bool {
	v := os.Getenv(EnvHost)
	return v != "" && len(os.Args) >= 3 && os.Args[1] == PluginCommand && v == strconv.Itoa(os.Getppid())
}
