package httpstore

import (
	"context"

	"github.com/retain-dev/retain/sdk/core"
)

// AcquireGate: httpstore declares no gates (see Capabilities). A read-only
// open refuses it as a write, as the contract asks.
func (d *Driver) AcquireGate(ctx context.Context, name string) (core.GateLease, error) {
	if d.readOnly {
		return core.GateLease{}, core.ReadOnlyError("acquire-gate", name)
	}
	return core.GateLease{}, core.Errorf("acquire-gate", name, core.ErrUnsupported, "httpstore declares no gates: the server has no lock primitive")
}

// ReleaseGate: no gate can have been acquired.
func (d *Driver) ReleaseGate(ctx context.Context, lease core.GateLease) error {
	return core.Errorf("release-gate", lease.Name, core.ErrUnsupported, "httpstore declares no gates: the server has no lock primitive")
}
