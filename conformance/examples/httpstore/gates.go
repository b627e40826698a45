package httpstore

import (
	"context"

	"github.com/retain-dev/retain/core/storage"
)

// AcquireGate: httpstore declares no gates (see Capabilities). A read-only
// open refuses it as a write, as the contract asks.
func (d *Driver) AcquireGate(ctx context.Context, name string) (storage.GateLease, error) {
	if d.readOnly {
		return storage.GateLease{}, storage.ReadOnlyError("acquire-gate", name)
	}
	return storage.GateLease{}, storage.Errorf("acquire-gate", name, storage.ErrUnsupported, "httpstore declares no gates: the server has no lock primitive")
}

// ReleaseGate: no gate can have been acquired.
func (d *Driver) ReleaseGate(ctx context.Context, lease storage.GateLease) error {
	return storage.Errorf("release-gate", lease.Name, storage.ErrUnsupported, "httpstore declares no gates: the server has no lock primitive")
}
