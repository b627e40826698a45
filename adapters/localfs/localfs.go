//go:build linux

// Package localfs is the local filesystem adapter: the store is a directory
// tree and object key "a/b/c" is the plain file <root>/a/b/c holding exactly
// the body, so other programs (Lance) can read the dataset directly.
//
// How each guarantee is made:
//
//   - Every write goes to a fsynced temp file (".retain-tmp-<random>") in the
//     target directory that is then linked (create-if-absent) or renamed
//     (overwrite, replace-if-version) into place, and the directory is
//     fsynced. A reader opens the file and streams from that descriptor, so
//     it only ever sees one complete write.
//   - create-if-absent is native: link(2) fails with EEXIST if the name
//     exists, atomically for every writer of the filesystem.
//   - replace-if-version and delete-if-version are gated: a flock(2) on one
//     of 256 striped lock files (<root>/.retain-localfs/locks/NN.lock, chosen
//     by a hash of the key) is held around the version compare and the
//     rename or unlink. Overwrite and unconditional delete take the same
//     lock, so no write through this adapter, in any process on the host,
//     slips between the compare and the write. Programs that write the tree
//     without this adapter are not excluded: the gate's scope is the host.
//   - The version token changes on every write: each write sets a random
//     128-bit xattr (user.retain.v) on the temp file, and the token combines
//     it with inode number, mtime and size, all read from the same
//     descriptor the body is read from (see version for why not ctime).
//   - Keys never escape the root: paths are walked component by component
//     with openat(O_NOFOLLOW) from a descriptor of the root, and every
//     link, rename, unlink and fsync is relative to the verified directory
//     descriptor. A symlink anywhere on a key's path is refused with
//     ErrPermissionDenied and never followed. A listing that meets a
//     symlink or a special file in the listed range refuses the same way,
//     naming it, rather than leave it out (List).
//
// Opened read-only (storage.Location.ReadOnly, OpenReadOnly) the adapter writes
// nothing at all, not even its reserved directory: it serves Get, Stat and
// List and refuses every write with ErrPermissionDenied.
//
// Names reserved for the adapter: the top-level directory ".retain-localfs"
// and any segment beginning ".retain-tmp-". Keys using them are refused with
// ErrInvalidArgument and List never shows them.
//
// A filesystem cannot hold both a file "a" and a directory "a", so the keys
// "a" and "a/b" cannot coexist here (object stores allow it): the second
// write fails with ErrInvalidArgument naming the conflict.
package localfs

import (
	"context"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/retain-dev/retain/core/storage"
)

const (
	// reservedDir is the adapter's own top-level directory.
	reservedDir = ".retain-localfs"
	// tmpPrefix starts the name of every temp file the adapter writes.
	tmpPrefix = ".retain-tmp-"
	// xattrName holds the random per-write part of the version token.
	xattrName = "user.retain.v"
	// stripeCount is the number of striped key lock files.
	stripeCount = 256
	// stripeGate names the internal gate of the gated capabilities.
	stripeGate = "localfs-key-stripe"
	// MetadataGate is the one gate localfs offers the core.
	MetadataGate = "metadata"

	maxDeleteBatch = 1000
	maxListPage    = 1000
	// parallelism: a local disk gains little past a few requests at once,
	// and each costs a file descriptor or two.
	parallelism = 4
)

// Adapter opens localfs stores for file:// locations (and plain paths,
// which storage.ParseLocation turns into file locations).
var Adapter = storage.Adapter{
	Name:    "localfs",
	Schemes: []string{"file"},
	Open: func(ctx context.Context, loc storage.Location) (storage.Driver, error) {
		if err := ctx.Err(); err != nil {
			return nil, ctxError("open", loc.Path, err)
		}
		if loc.Scheme != "file" {
			return nil, storage.Errorf("open", loc.String(), storage.ErrInvalidArgument,
				"localfs serves file:// locations, not %q", loc.Scheme)
		}
		if len(loc.Options) > 0 {
			names := make([]string, 0, len(loc.Options))
			for k := range loc.Options {
				names = append(names, k)
			}
			sort.Strings(names)
			return nil, storage.Errorf("open", loc.String(), storage.ErrInvalidArgument,
				"localfs takes no URI options, found %s", strings.Join(names, ", "))
		}
		d, err := openWith(loc.Path, openOptions{readOnly: loc.ReadOnly})
		if err != nil {
			return nil, err
		}
		return d, nil
	},
}

// Driver is a localfs store rooted at one directory. It implements
// storage.Driver and is safe for concurrent use.
type Driver struct {
	root string
	fs   fsKind
	caps storage.Capabilities

	// Conditional capabilities actually available, after the filesystem
	// type checks and the probes.
	createOK bool // link(2) is trusted
	lockOK   bool // flock(2) is trusted: gated ops and gates
	readOnly bool // the root is not writable
	openRO   bool // opened read-only (storage.Location.ReadOnly): nothing is ever written
	xattr    bool // user xattrs work: writes stamp the version xattr

	// mu guards the directory descriptors against Close: operations hold
	// it shared while they use them.
	mu      sync.RWMutex
	closed  bool
	rootFd  int
	locksFd int
	gatesFd int

	// stripes exclude goroutines of this process per key stripe before the
	// flock (which excludes every open file description on the host).
	stripes [stripeCount]chan struct{}

	gmu  sync.Mutex
	held map[string]heldGate // by token
}

type heldGate struct {
	name string
	fd   int
}

var _ storage.Driver = (*Driver)(nil)

// openOptions are test hooks: they force the paths an untrusted or limited
// filesystem would take.
type openOptions struct {
	fsType  *uint32 // pretend statfs reported this magic
	noLink  bool    // pretend the link(2) probe failed
	noFlock bool    // pretend the flock(2) probe failed
	noXattr bool    // pretend the filesystem refuses user xattrs

	readOnly bool // open read-only: create nothing, probe nothing, write nothing
}

// Open opens the store rooted at root, an absolute path to an existing
// directory. A missing root is refused, never created: a mistyped path must
// not become a new, empty store that every read reports as "nothing here".
func Open(root string) (*Driver, error) {
	return openWith(root, openOptions{})
}

// OpenReadOnly opens the store rooted at root without writing anything: the
// reserved directory is neither created nor used, the filesystem is not
// probed, every conditional capability is none, no gate is offered, and
// Put, Delete, DeleteMany and AcquireGate fail with ErrPermissionDenied.
// Get, Stat and List work as usual (List still hides the reserved
// directory and temp files a writable open left behind).
func OpenReadOnly(root string) (*Driver, error) {
	return openWith(root, openOptions{readOnly: true})
}

func openWith(root string, o openOptions) (*Driver, error) {
	const op = "open"
	if !filepath.IsAbs(root) {
		return nil, storage.Errorf(op, root, storage.ErrInvalidArgument, "the store root must be an absolute path")
	}
	root = filepath.Clean(root)
	// The root path itself is configuration and may go through symlinks;
	// only paths below it are confined.
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err == unix.ENOENT {
		return nil, &storage.Error{Op: op, Key: root, Kind: storage.ErrNotFound, Err: err,
			Msg: "the store root does not exist: check the path, or create the directory first (retain never creates a store root)"}
	}
	if err == unix.ENOTDIR {
		return nil, storage.Errorf(op, root, storage.ErrInvalidArgument, "the store root is not a directory")
	}
	if err != nil {
		return nil, mapErr(op, root, "cannot open the store root", err)
	}
	d := &Driver{root: root, rootFd: fd, locksFd: -1, gatesFd: -1, held: map[string]heldGate{}}
	for i := range d.stripes {
		d.stripes[i] = make(chan struct{}, 1)
	}
	var sfs unix.Statfs_t
	if err := unix.Fstatfs(fd, &sfs); err != nil {
		unix.Close(fd)
		return nil, mapErr(op, root, "statfs of the store root", err)
	}
	magic := uint32(sfs.Type)
	if o.fsType != nil {
		magic = *o.fsType
	}
	d.fs = fsKindOf(magic)
	if err := d.setup(o); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

// Capabilities declares what this instance provides; it never changes.
func (d *Driver) Capabilities(ctx context.Context) (storage.Capabilities, error) {
	if err := ctx.Err(); err != nil {
		return storage.Capabilities{}, ctxError("capabilities", "", err)
	}
	c := d.caps
	c.Gates = append([]storage.GateSpec(nil), c.Gates...)
	c.Notes = append([]string(nil), c.Notes...)
	return c, nil
}

// Root is the absolute path of the store's root directory.
func (d *Driver) Root() string { return d.root }

// Close releases the root's descriptors and any gate still held. Readers
// returned by Get stay valid until closed.
func (d *Driver) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil
	}
	d.closed = true
	d.gmu.Lock()
	for tok, h := range d.held {
		unix.Flock(h.fd, unix.LOCK_UN)
		unix.Close(h.fd)
		delete(d.held, tok)
	}
	d.gmu.Unlock()
	for _, fd := range []int{d.gatesFd, d.locksFd, d.rootFd} {
		if fd >= 0 {
			unix.Close(fd)
		}
	}
	d.rootFd, d.locksFd, d.gatesFd = -1, -1, -1
	return nil
}

// enter checks ctx and that the driver is open, and holds the driver's
// descriptors for the caller until the returned func is called.
func (d *Driver) enter(ctx context.Context, op, key string) (func(), error) {
	if err := ctx.Err(); err != nil {
		return nil, ctxError(op, key, err)
	}
	d.mu.RLock()
	if d.closed {
		d.mu.RUnlock()
		return nil, storage.Errorf(op, key, storage.ErrInvalidArgument, "the localfs driver is closed")
	}
	return d.mu.RUnlock, nil
}

// checkKey runs the contract's key rules and the adapter's reserved names.
func checkKey(op, key string) error {
	if err := storage.ValidateKey(op, key); err != nil {
		return err
	}
	for i, seg := range strings.Split(key, "/") {
		if i == 0 && seg == reservedDir {
			return storage.Errorf(op, key, storage.ErrInvalidArgument,
				"invalid key: the top-level segment %q is reserved for the localfs adapter", reservedDir)
		}
		if strings.HasPrefix(seg, tmpPrefix) {
			return storage.Errorf(op, key, storage.ErrInvalidArgument,
				"invalid key: segment %q: names beginning %q are reserved for localfs temp files", seg, tmpPrefix)
		}
	}
	return nil
}

// splitKey returns the directory segments and the final name of a key.
func splitKey(key string) ([]string, string) {
	segs := strings.Split(key, "/")
	return segs[:len(segs)-1], segs[len(segs)-1]
}
