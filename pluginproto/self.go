package pluginproto

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
)

// Self is how a binary serves adapters it carries as plugins of itself:
// `<exe> Command NAME` must reach Serve. The retain binary (its bundled
// adapters) and a conformance test binary (the adapters under test) both
// do; each names its own subcommand and variable.
//
// A binary whose main does not dispatch the subcommand would re-execute
// itself as the adapter, its copy would do the same, and so on until the
// handshake timeout. So the child is told, in EnvHost, that its parent
// launched it as a plugin of itself: such a child that reaches its host
// code instead of Serve exits at once with ExitNotDispatched
// (ExitIfLaunched), and Launch turns that exit into ErrNotDispatched.
type Self struct {
	Command string // the hidden subcommand, e.g. "__adapter-plugin"
	EnvHost string // carries the launching host's process id to the child
}

// ExitNotDispatched is the exit status of a process launched as a plugin of
// itself whose main did not dispatch the subcommand.
const ExitNotDispatched = 86

// ErrNotDispatched: the executable was launched as a plugin of itself but
// its main does not dispatch the plugin subcommand.
var ErrNotDispatched = errors.New("the executable does not dispatch its plugin subcommand")

// Launched reports whether this process's parent launched it as one of
// these plugins. The parent's pid, not just the variable's presence, so a
// leaked variable (exported in a shell, inherited by grandchildren) never
// stops a legitimate launch.
func (c Self) Launched() bool {
	v := os.Getenv(c.EnvHost)
	return v != "" && len(os.Args) >= 2 && os.Args[1] == c.Command && v == strconv.Itoa(os.Getppid())
}

// ExitIfLaunched ends this process with ExitNotDispatched, saying why, if
// it was launched as one of these plugins: it is running host code it must
// not (it would launch another copy of itself).
func (c Self) ExitIfLaunched(prog string) {
	if c.Launched() {
		os.Stderr.WriteString(prog + ": this process was launched as adapter plugin " + strings.Join(os.Args[1:], " ") +
			" but its main does not dispatch " + c.Command + "; it exits rather than launch another copy of itself\n")
		os.Exit(ExitNotDispatched)
	}
}

// Serve serves the adapter named name among adapters; it returns only on
// error: an unknown name lists the adapters this binary carries.
func (c Self) Serve(adapters []storage.Adapter, name string) error {
	names := make([]string, 0, len(adapters))
	for _, a := range adapters {
		if a.Name == name {
			Serve(a)
			return nil
		}
		names = append(names, a.Name)
	}
	sort.Strings(names)
	carried := "none"
	if len(names) > 0 {
		carried = strings.Join(names, ", ")
	}
	return storage.Errorf("serve-plugin", "", storage.ErrInvalidArgument,
		"this binary carries no adapter %q; it carries: %s", name, carried)
}

// Launch runs adapter name as a plugin of this very executable. No
// checksum is checked: the binary is the one running. A child that exits
// with ExitNotDispatched is reported as ErrNotDispatched alone; the caller
// names the fix in its own terms.
func (c Self) Launch(ctx context.Context, name string, loc storage.Location, logger hclog.Logger) (*Client, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, &storage.Error{Op: "launch", Kind: storage.ErrUnavailable, Err: err,
			Msg: fmt.Sprintf("cannot find this executable to serve adapter %q", name)}
	}
	cl, err := Launch(ctx, LaunchConfig{
		Adapter:  name,
		Path:     exe,
		Args:     []string{c.Command, name},
		Env:      []string{c.EnvHost + "=" + strconv.Itoa(os.Getpid())},
		Location: loc,
		Logger:   logger,
	})
	var ee *ExitError
	if errors.As(err, &ee) && ee.Code == ExitNotDispatched {
		// Only the exit, not the launch failure's kind: a caller that
		// retries an unavailable plugin must not start another copy.
		return nil, fmt.Errorf("%w (plugin exited with status %d)", ErrNotDispatched, ee.Code)
	}
	return cl, err
}
