package testkit

import (
	"context"

	"github.com/retain-dev/retain/sdk/core"
)

// Caps wraps a driver and declares its capabilities edited by Edit: the
// core then refuses what the declaration lacks, as it would on a store
// that really lacks it, while the data path stays the real driver's.
type Caps struct {
	core.Driver
	Edit func(*core.Capabilities) // nil declares the driver's own
}

func (c *Caps) Capabilities(ctx context.Context) (core.Capabilities, error) {
	caps, err := c.Driver.Capabilities(ctx)
	if c.Edit != nil {
		c.Edit(&caps)
	}
	return caps, err
}

// Without returns an Edit that declares the named capability LevelNone
// with reason, e.g. Without(func(c *core.Capabilities) *core.Capability {
// return &c.DeleteIfVersion }, "no conditional delete").
func Without(field func(*core.Capabilities) *core.Capability, reason string) func(*core.Capabilities) {
	return func(c *core.Capabilities) {
		*field(c) = core.Capability{Level: core.LevelNone, Reason: reason}
	}
}
