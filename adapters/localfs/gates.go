//go:build linux

package localfs

import (
	"context"
	"time"

	"golang.org/x/sys/unix"

	"github.com/retain-dev/retain/core/storage"
)

// AcquireGate takes the named gate: flock(2) on a freshly opened
// <root>/.retain-localfs/gates/<name>.lock, which excludes every other
// holder on the host, including other goroutines of this process (each
// acquisition is its own open file description). It polls so that a done
// ctx ends the wait.
func (d *Driver) AcquireGate(ctx context.Context, name string) (storage.GateLease, error) {
	const op = "acquire-gate"
	if d.openRO {
		return storage.GateLease{}, storage.ReadOnlyError(op, name)
	}
	if err := d.checkGate(op, name); err != nil {
		return storage.GateLease{}, err
	}
	leave, err := d.enter(ctx, op, name)
	if err != nil {
		return storage.GateLease{}, err
	}
	fd, err := unix.Openat(d.gatesFd, name+".lock", unix.O_RDONLY|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
	leave()
	if err != nil {
		return storage.GateLease{}, mapErr(op, name, "opening the gate's lock file", err)
	}
	if err := flockWait(ctx, fd, time.Millisecond, 20*time.Millisecond); err != nil {
		unix.Close(fd)
		if ctx.Err() != nil {
			return storage.GateLease{}, ctxError(op, name, ctx.Err())
		}
		return storage.GateLease{}, mapErr(op, name, "locking the gate's lock file", err)
	}
	lease := storage.GateLease{Name: name, Token: randHex()}
	d.mu.RLock()
	defer d.mu.RUnlock()
	if d.closed {
		unix.Close(fd)
		return storage.GateLease{}, storage.Errorf(op, name, storage.ErrInvalidArgument, "the localfs driver is closed")
	}
	d.gmu.Lock()
	d.held[lease.Token] = heldGate{name: name, fd: fd}
	d.gmu.Unlock()
	return lease, nil
}

// ReleaseGate gives the gate back. A token that does not hold the named
// gate is refused with ErrPreconditionFailed and changes nothing. It works
// even when ctx is done: a gate must not outlive its holder.
func (d *Driver) ReleaseGate(ctx context.Context, lease storage.GateLease) error {
	const op = "release-gate"
	if err := d.checkGate(op, lease.Name); err != nil {
		return err
	}
	d.gmu.Lock()
	h, ok := d.held[lease.Token]
	if ok && h.name == lease.Name {
		delete(d.held, lease.Token)
	}
	d.gmu.Unlock()
	if !ok || h.name != lease.Name {
		return storage.Errorf(op, lease.Name, storage.ErrPreconditionFailed,
			"this token does not hold gate %q (never acquired, already released, or a wrong token); nothing was released", lease.Name)
	}
	unix.Flock(h.fd, unix.LOCK_UN)
	if err := unix.Close(h.fd); err != nil {
		return mapErr(op, lease.Name, "closing the gate's lock file", err)
	}
	return nil
}

func (d *Driver) checkGate(op, name string) error {
	if _, ok := d.caps.Gate(name); ok {
		return nil
	}
	if len(d.caps.Gates) == 0 {
		return storage.Errorf(op, name, storage.ErrUnsupported,
			"gate %q is not declared: localfs offers no gates on this filesystem (%s)", name, d.caps.ReplaceIfVersion.Reason)
	}
	return storage.Errorf(op, name, storage.ErrUnsupported, "gate %q is not declared: localfs offers only %q", name, MetadataGate)
}
