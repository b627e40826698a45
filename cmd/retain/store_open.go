package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"

	"github.com/spf13/pflag"
	"golang.org/x/time/rate"

	"github.com/retain-dev/retain/adapters/bundled"
	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/pluginproto"
)

// Every command opens its store here: STORE commands through openStore or
// openStoreReadOnly (which refuse a table given as a store), TABLE-URI
// commands through open.

// addAdapterFlags adds --adapter and --adapter-sha256, which choose how
// open reaches every store.
func (a *app) addAdapterFlags(fs *pflag.FlagSet) {
	fs.StringVar(&a.adapterPath, "adapter", os.Getenv("RETAIN_ADAPTER"), "open every store through this vendor adapter plugin binary instead of the bundled adapter for its scheme; env RETAIN_ADAPTER")
	fs.StringVar(&a.adapterSHA256, "adapter-sha256", os.Getenv("RETAIN_ADAPTER_SHA256"), "expected SHA-256 (hex) of the --adapter binary, refused if it differs (recommended); env RETAIN_ADAPTER_SHA256")
}

// openStore opens the store at uri writable (through its bundled adapter,
// out of process, or the --adapter binary) and returns its parsed location
// too. A store that is a Lance table, or lies inside one, is refused first
// (openStoreChecked).
func (a *app) openStore(ctx context.Context, uri string) (*storage.Store, storage.Location, error) {
	return a.openStoreChecked(ctx, uri, false)
}

// openStoreReadOnly opens the store for a command that only looks: the
// adapter writes nothing, not even at open, and every write is refused.
func (a *app) openStoreReadOnly(ctx context.Context, uri string) (*storage.Store, storage.Location, error) {
	return a.openStoreChecked(ctx, uri, true)
}

// open is where every command opens its store (table commands directly, on
// the table's own URI; store commands through openStoreChecked): through
// the bundled adapter for the URI's scheme, or, with --adapter PATH
// (RETAIN_ADAPTER), through that vendor plugin binary whatever the scheme.
func (a *app) open(ctx context.Context, uri string, readOnly bool) (*storage.Store, storage.Location, error) {
	if a.parallelism < 0 || a.parallelism > storage.MaxParallelism {
		return nil, storage.Location{}, usageError{fmt.Errorf("--parallelism must be between 1 and %d, got %d (env RETAIN_PARALLELISM=%q)", storage.MaxParallelism, a.parallelism, os.Getenv("RETAIN_PARALLELISM"))}
	}
	if a.maxRPS < 0 || math.IsInf(a.maxRPS, 0) || math.IsNaN(a.maxRPS) {
		return nil, storage.Location{}, usageError{fmt.Errorf("--max-rps must be a positive number of requests per second (0: no cap), got %v (env RETAIN_MAX_RPS=%q)", a.maxRPS, os.Getenv("RETAIN_MAX_RPS"))}
	}
	s, loc, err := a.openAdapter(ctx, uri, readOnly)
	if err != nil {
		return s, loc, err
	}
	return paced(s, a.parallelism, a.maxRPS), loc, nil
}

// paced applies the operator's bounds to a store: at most parallelism
// requests in flight (0: the adapter's default) and at most maxRPS a
// second (0: no cap).
func paced(s *storage.Store, parallelism int, maxRPS float64) *storage.Store {
	if parallelism > 0 {
		s = s.WithParallelism(parallelism)
	}
	if maxRPS > 0 {
		s = s.WithPacer(rate.NewLimiter(rate.Limit(maxRPS), 1))
	}
	return s
}

// openAdapter opens uri through its bundled adapter or the --adapter binary.
func (a *app) openAdapter(ctx context.Context, uri string, readOnly bool) (*storage.Store, storage.Location, error) {
	loc, err := storage.ParseLocation(uri)
	if err != nil {
		return nil, loc, err
	}
	if a.adapterPath == "" {
		if a.adapterSHA256 != "" {
			return nil, loc, usageError{errors.New("--adapter-sha256 (env RETAIN_ADAPTER_SHA256) is the digest of an --adapter binary, and no --adapter (env RETAIN_ADAPTER) was given")}
		}
		open := bundled.Open
		if readOnly {
			open = bundled.OpenReadOnly
		}
		s, err := open(ctx, uri, a.logger())
		return s, loc, err
	}
	s, err := a.openVendor(ctx, uri, loc, readOnly)
	return s, loc, err
}

// openVendor launches the --adapter binary as a plugin on loc, the way
// `conformance run --adapter PATH --sha256 D` does (pluginproto.Launch),
// and wraps it as a portable Store. Read-only opens pass Location.ReadOnly
// to the plugin, as bundled.OpenReadOnly does.
func (a *app) openVendor(ctx context.Context, uri string, loc storage.Location, readOnly bool) (*storage.Store, error) {
	path, logger := a.adapterPath, a.logger()
	name := filepath.Base(path)
	if a.adapterSHA256 == "" {
		logger.Warn("running the adapter binary without a digest check: pass --adapter-sha256 (env RETAIN_ADAPTER_SHA256) with the digest its vendor published",
			"adapter", path)
	}
	loc.ReadOnly = readOnly
	c, err := pluginproto.Launch(ctx, pluginproto.LaunchConfig{
		Adapter: name, Path: path, SHA256: a.adapterSHA256, Location: loc, Logger: logger,
	})
	if err != nil {
		return nil, vendorOpenError(uri, path, err)
	}
	s, err := storage.NewStore(ctx, name, c)
	if err != nil {
		c.Close()
		return nil, vendorOpenError(uri, path, fmt.Errorf("adapter %s: %w", name, err))
	}
	return s.At(loc), nil
}

// vendorOpenError explains an --adapter binary that could not open the
// store. A binary that cannot serve at all (missing, wrong digest, not a
// retain storage plugin, another protocol version, crashed) is a setup
// error, exit 2, with the next step; the adapter's own refusal to open the
// store (not found, permission denied, …) passes through as from a bundled
// adapter.
func vendorOpenError(uri, path string, err error) error {
	var ce *storage.Error
	launch := errors.As(err, &ce) && ce.Op == "launch"
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) ||
		(!launch && !errors.Is(err, storage.ErrUnavailable)) {
		return err
	}
	next := "check that --adapter (env RETAIN_ADAPTER) names the vendor's plugin binary; run with --log-level debug to see the plugin's own output"
	switch {
	case errors.Is(err, storage.ErrPermissionDenied):
		next = fmt.Sprintf("give --adapter-sha256 (env RETAIN_ADAPTER_SHA256) the digest the vendor published for this release, and compare it with `sha256sum %s`", path)
	case errors.Is(err, storage.ErrInvalidArgument):
		next = "check the path given to --adapter (env RETAIN_ADAPTER) and that --adapter-sha256 is 64 hex digits"
	case errors.Is(err, storage.ErrUnsupported):
		next = "install a build of the adapter for this retain's plugin protocol version (`retain version`)"
	case errors.Is(err, storage.ErrUnavailable) && !launch:
		next = "the plugin started but exited while opening the store: run with --log-level debug to see its output, and report it to the adapter's vendor"
	case errors.Is(err, storage.ErrUnavailable):
		next = "a retain adapter binary is a program whose main calls pluginproto.Serve (docs/adapters.md); run with --log-level debug to see its output"
	}
	return &adapterSetupError{cause: err, msg: fmt.Sprintf(
		"cannot open %s through adapter binary %s: %v\nnext: %s", uri, path, err, next)}
}

// adapterSetupError is a usage or setup error (exit 2) that still matches
// its cause: errors.Is(err, storage.ErrUnavailable) holds through it.
type adapterSetupError struct {
	msg   string
	cause error
}

func (e *adapterSetupError) Error() string   { return e.msg }
func (e *adapterSetupError) Unwrap() []error { return []error{usageError{e.cause}, e.cause} }

// openStoreChecked is how every command that takes a STORE opens it: a
// store that is a Lance table, or lies inside one, is refused before the
// adapter writes anything. Commands that take a TABLE-URI open with a.open.
func (a *app) openStoreChecked(ctx context.Context, uri string, readOnly bool) (*storage.Store, storage.Location, error) {
	loc, err := storage.ParseLocation(uri)
	if err != nil {
		return nil, loc, err
	}
	remote := loc.Scheme != "file"
	if remote {
		err = remoteNameMisuse(uri, loc)
	} else {
		err = localStoreMisuse(uri, loc.Path)
	}
	if err != nil {
		return nil, loc, err
	}
	if remote && !readOnly {
		// A writable open may probe (write) at the root: look first
		// through a read-only open, which writes nothing.
		ro, _, err := a.open(ctx, uri, true)
		if err == nil {
			err = remoteStoreMisuse(ctx, uri, loc, ro)
			ro.Close()
			if err != nil {
				return nil, loc, err
			}
		}
	}
	s, loc, err := a.open(ctx, uri, readOnly)
	if err != nil {
		return nil, loc, err
	}
	if remote && readOnly {
		if err := remoteStoreMisuse(ctx, uri, loc, s); err != nil {
			s.Close()
			return nil, loc, err
		}
	}
	return s, loc, nil
}

// onStore is the shape of most STORE commands: open uri (writable with
// write, else read-only), run on it, and print the result, as JSON with
// --json or else with text, while the store is still open. A result
// returned with an error is a report of what was done before the failure:
// it is printed, then the error returned. Commands whose result means
// nothing beside an error wrap run's return in resultOnly.
func onStore[T any](a *app, ctx context.Context, uri string, write bool, run func(*storage.Store) (*T, error), text func(*T) error) error {
	open := a.openStoreReadOnly
	if write {
		open = a.openStore
	}
	s, _, err := open(ctx, uri)
	if err != nil {
		return err
	}
	defer s.Close()
	res, err := run(s)
	if res == nil {
		return err
	}
	if a.jsonOut {
		if perr := a.printJSON(res); perr != nil {
			return perr
		}
		return err
	}
	if terr := text(res); terr != nil {
		return terr
	}
	return err
}

// resultOnly drops the result that comes with an error.
func resultOnly[T any](res *T, err error) (*T, error) {
	if err != nil {
		return nil, err
	}
	return res, nil
}
