//go:build !linux

// Package localfs is the local filesystem adapter. It relies on Linux
// interfaces (openat with O_NOFOLLOW, flock, user xattrs, statfs magic
// numbers); on other systems Open reports it as unsupported.
package localfs

import (
	"context"

	"github.com/retain-dev/retain/core/storage"
)

// MetadataGate is the one gate localfs offers the core.
const MetadataGate = "metadata"

// Adapter is the localfs adapter; on this system it cannot open stores.
var Adapter = storage.Adapter{
	Name:    "localfs",
	Schemes: []string{"file"},
	Open: func(ctx context.Context, loc storage.Location) (storage.Driver, error) {
		_, err := Open(loc.Path)
		return nil, err
	},
}

// Driver is not available on this system.
type Driver struct{}

// Open reports that localfs is implemented for Linux only.
func Open(root string) (*Driver, error) {
	return nil, storage.Errorf("open", root, storage.ErrUnsupported, "the localfs adapter is implemented for Linux only")
}
