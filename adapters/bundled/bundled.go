// Package bundled lists the first-party adapters that ship inside the retain
// binary and opens stores through them. Open runs them out of process: the
// binary re-executes itself as the adapter's plugin (hidden subcommand
// `__adapter-plugin NAME`, which its main must dispatch), so a bundled
// adapter and a vendor's binary cross the same gRPC boundary. An
// application embedding the library can instead open in process
// (OpenInProcess), with no dispatch line and no child.
package bundled

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/hashicorp/go-hclog"

	"github.com/retain-dev/retain/adapters/azure"
	"github.com/retain-dev/retain/adapters/gcs"
	"github.com/retain-dev/retain/adapters/localfs"
	"github.com/retain-dev/retain/adapters/s3"
	"github.com/retain-dev/retain/core/storage"
)

// Adapters are the adapters that ship in the binary.
var Adapters = []storage.Adapter{localfs.Adapter, s3.Adapter, gcs.Adapter, azure.Adapter}

// Reserved maps URI schemes whose adapters are planned but not shipped yet
// to the adapter's name. Empty now; kept so a planned scheme answers "not
// available yet" rather than "unknown".
var Reserved = map[string]string{}

// ForScheme returns the bundled adapter serving a URI scheme.
func ForScheme(scheme string) (storage.Adapter, error) {
	for _, a := range Adapters {
		for _, s := range a.Schemes {
			if s == scheme {
				return a, nil
			}
		}
	}
	if name, ok := Reserved[scheme]; ok {
		return storage.Adapter{}, storage.Errorf("open", scheme+"://", storage.ErrUnsupported,
			"adapter %q not available yet: this build serves %s", name, schemes())
	}
	return storage.Adapter{}, storage.Errorf("open", scheme+"://", storage.ErrInvalidArgument,
		"no adapter serves the %q scheme: this build serves %s", scheme, schemes())
}

func schemes() string {
	var out []string
	for _, a := range Adapters {
		for _, s := range a.Schemes {
			out = append(out, s+"://")
		}
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

// Open parses uri, picks the bundled adapter for its scheme and launches it
// as a plugin of the running executable, whose main must dispatch
// PluginCommand to Serve; without that, Open fails at once with an error
// wrapping ErrNotDispatched (see OpenInProcess).
func Open(ctx context.Context, uri string, logger hclog.Logger) (*storage.Store, error) {
	loc, err := storage.ParseLocation(uri)
	if err != nil {
		return nil, err
	}
	a, err := ForScheme(loc.Scheme)
	if err != nil {
		return nil, err
	}
	return OpenAdapter(ctx, a.Name, loc, logger)
}

// OpenReadOnly is Open with the location's ReadOnly set: the adapter writes
// nothing, not even at open (no reserved folder, no lock files, no probe
// objects), declares read-only and refuses every write, and so does the
// returned Store. For commands that only look at a store.
func OpenReadOnly(ctx context.Context, uri string, logger hclog.Logger) (*storage.Store, error) {
	loc, err := storage.ParseLocation(uri)
	if err != nil {
		return nil, err
	}
	a, err := ForScheme(loc.Scheme)
	if err != nil {
		return nil, err
	}
	loc.ReadOnly = true
	return OpenAdapter(ctx, a.Name, loc, logger)
}

// OpenAdapter launches the named bundled adapter on loc.
func OpenAdapter(ctx context.Context, name string, loc storage.Location, logger hclog.Logger) (*storage.Store, error) {
	c, err := launch(ctx, name, loc, logger)
	if err != nil {
		return nil, err
	}
	s, err := storage.NewStore(ctx, name, c)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("adapter %s: %w", name, err)
	}
	return s.At(loc), nil
}
