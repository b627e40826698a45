package storage

import (
	"context"
	"io"
)

// Driver is the thin interface every storage adapter implements, in the
// manner of gocloud.dev's driver packages. Callers use the portable *Store,
// which validates input, checks capabilities and shapes errors; a Driver may
// assume nothing of the sort and must validate keys itself too, since across
// the plugin boundary it cannot trust its caller.
//
// Every error a Driver returns should be an *Error (or wrap a Kind) so its
// kind survives; anything else is reported as ErrUnknown.
type Driver interface {
	// Capabilities declares what this instance provides. It must not change
	// for the life of the driver.
	Capabilities(ctx context.Context) (Capabilities, error)
	// Get opens the object. The body read is exactly the version in Info:
	// never a mix of two writes, never a partial body presented as whole.
	Get(ctx context.Context, key string) (*Reader, error)
	Stat(ctx context.Context, key string) (Info, error)
	// Put stores body under key per opts.Mode and returns the new info.
	// A mode whose capability is none returns ErrUnsupported and writes
	// nothing.
	Put(ctx context.Context, key string, body io.Reader, opts PutOptions) (Info, error)
	Delete(ctx context.Context, key string, opts DeleteOptions) error
	// DeleteMany deletes unconditionally, at most Limits.MaxDeleteBatch keys
	// per call, and returns one result per key in the order given. The error
	// is for a failure of the whole call.
	DeleteMany(ctx context.Context, keys []string) ([]DeleteResult, error)
	// List returns one page in byte order of keys.
	List(ctx context.Context, opts ListOptions) (ListPage, error)
	// AcquireGate takes the named, declared gate, blocking until it is free
	// or ctx ends. ReleaseGate gives it back and refuses a wrong token.
	AcquireGate(ctx context.Context, name string) (GateLease, error)
	ReleaseGate(ctx context.Context, lease GateLease) error
	Close() error
}

// GateLease is a held gate.
type GateLease struct {
	Name  string
	Token string
}

// Adapter is a named way to open a Driver on a store location. First-party
// adapters and a vendor's own binary both present one of these to
// pluginproto.Serve.
type Adapter struct {
	// Name identifies the adapter ("localfs", "s3", "acme-store").
	Name string
	// Schemes are the store URI schemes it serves ("file", "s3").
	Schemes []string
	// Open connects to the store at loc.
	Open func(ctx context.Context, loc Location) (Driver, error)
}
