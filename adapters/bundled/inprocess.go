package bundled

import (
	"context"
	"fmt"

	"github.com/retain-dev/retain/core/storage"
)

// OpenInProcess is Open without the plugin: it parses uri and opens the
// store with the bundled adapter's driver in this process, so an
// application embedding retain needs no dispatch line in its main and
// starts no child process. The price is the isolation the plugin gives: a
// crash or a hang in the adapter is the application's own, and no call
// deadline kills it (pass a ctx with a deadline instead).
func OpenInProcess(ctx context.Context, uri string) (*storage.Store, error) {
	loc, err := storage.ParseLocation(uri)
	if err != nil {
		return nil, err
	}
	return OpenLocationInProcess(ctx, loc)
}

// OpenReadOnlyInProcess is OpenInProcess with the location's ReadOnly set
// (see OpenReadOnly): the adapter writes nothing and refuses every write.
func OpenReadOnlyInProcess(ctx context.Context, uri string) (*storage.Store, error) {
	loc, err := storage.ParseLocation(uri)
	if err != nil {
		return nil, err
	}
	loc.ReadOnly = true
	return OpenLocationInProcess(ctx, loc)
}

// OpenLocationInProcess opens loc with the bundled adapter serving its
// scheme, in this process.
func OpenLocationInProcess(ctx context.Context, loc storage.Location) (*storage.Store, error) {
	a, err := ForScheme(loc.Scheme)
	if err != nil {
		return nil, err
	}
	d, err := a.Open(ctx, loc)
	if err != nil {
		return nil, err
	}
	s, err := storage.NewStore(ctx, a.Name, d)
	if err != nil {
		d.Close()
		return nil, fmt.Errorf("adapter %s: %w", a.Name, err)
	}
	return s.At(loc), nil
}
