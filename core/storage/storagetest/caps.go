package storagetest

import (
	"context"

	"github.com/retain-dev/retain/core/storage"
)

// Caps wraps a driver and declares its capabilities edited by Edit: the
// core then refuses what the declaration lacks, as it would on a store
// that really lacks it, while the data path stays the real driver's.
type Caps struct {
	storage.Driver
	Edit func(*storage.Capabilities) // nil declares the driver's own
}

func (c *Caps) Capabilities(ctx context.Context) (storage.Capabilities, error) {
	caps, err := c.Driver.Capabilities(ctx)
	if c.Edit != nil {
		c.Edit(&caps)
	}
	return caps, err
}

// Without returns an Edit that declares the named capability LevelNone
// with reason, e.g. Without(func(c *storage.Capabilities) *storage.Capability {
// return &c.DeleteIfVersion }, "no conditional delete").
func Without(field func(*storage.Capabilities) *storage.Capability, reason string) func(*storage.Capabilities) {
	return func(c *storage.Capabilities) {
		*field(c) = storage.Capability{Level: storage.LevelNone, Reason: reason}
	}
}
