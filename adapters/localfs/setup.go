//go:build linux

package localfs

import (
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/retain-dev/retain/core/storage"
)

// fsClass groups filesystems by how far link(2), flock(2) and xattrs can be
// trusted on them.
type fsClass uint8

const (
	classLocal   fsClass = iota // a local kernel filesystem: probed, then trusted
	classNetwork                // NFS, SMB/CIFS, 9p: nothing conditional is trusted
	classFUSE                   // semantics are whatever the userspace server does
	classFAT                    // no hard links, no xattrs, coarse timestamps
)

type fsKind struct {
	magic uint32
	name  string
	class fsClass
}

var fsKinds = map[uint32]fsKind{
	0xEF53:     {name: "ext2/ext3/ext4"},
	0x58465342: {name: "xfs"},
	0x9123683E: {name: "btrfs"},
	0x01021994: {name: "tmpfs"},
	0x794C7630: {name: "overlayfs"},
	0x2FC12FC1: {name: "zfs"},
	0xF2F52010: {name: "f2fs"},
	0x6969:     {name: "nfs", class: classNetwork},
	0x517B:     {name: "smb", class: classNetwork},
	0xFF534D42: {name: "cifs", class: classNetwork},
	0xFE534D42: {name: "smb2", class: classNetwork},
	0x01021997: {name: "9p", class: classNetwork},
	0x65735546: {name: "fuse", class: classFUSE},
	0x4D44:     {name: "msdos/vfat", class: classFAT},
	0x2011BAB0: {name: "exfat", class: classFAT},
}

func fsKindOf(magic uint32) fsKind {
	k, ok := fsKinds[magic]
	if !ok {
		k = fsKind{name: "unknown"}
	}
	k.magic = magic
	return k
}

func (k fsKind) String() string { return fmt.Sprintf("%s (statfs magic 0x%x)", k.name, k.magic) }

// setup creates the reserved directories, probes link(2), flock(2) and
// xattrs on the root's filesystem, and fixes the capabilities.
func (d *Driver) setup(o openOptions) error {
	caps := storage.Capabilities{
		Limits:         storage.Limits{MaxDeleteBatch: maxDeleteBatch, MaxListPage: maxListPage, Parallelism: parallelism},
		OrderedList:    true,
		ListAfterWrite: true,
		Notes: []string{
			"root " + d.root + " on filesystem " + d.fs.String(),
			"a key cannot be both an object and a prefix of other keys (\"a\" and \"a/b\"): a filesystem cannot hold a file and a directory under one name, so such a write fails with invalid argument",
			"symlinks under the root are never followed: a key whose path meets one fails with permission denied, and so does a listing that meets one (or a fifo, socket or device) instead of leaving it out",
			"the gated capabilities exclude every writer that goes through localfs on this host; programs that write the tree directly are not excluded",
		},
	}
	createWhy, lockWhy, versionWhy := "", "", ""
	switch d.fs.class {
	case classNetwork:
		createWhy = fmt.Sprintf("%s is a network filesystem: link(2) can report EEXIST for a link that succeeded (a retried non-idempotent RPC), so create-if-absent cannot be trusted", d.fs)
		lockWhy = fmt.Sprintf("%s is a network filesystem: flock(2) is local to one client or emulated, so it cannot exclude writers", d.fs)
	case classFUSE:
		createWhy = fmt.Sprintf("%s is a FUSE filesystem: link(2) semantics depend on the userspace server and cannot be trusted", d.fs)
		lockWhy = fmt.Sprintf("%s is a FUSE filesystem: flock(2) semantics depend on the userspace server and cannot be trusted", d.fs)
	case classFAT:
		createWhy = fmt.Sprintf("%s has no hard links, so create-if-absent cannot be made atomic with link(2)", d.fs)
		versionWhy = fmt.Sprintf("%s has no extended attributes, coarse timestamps and synthesized inode numbers: a version token cannot be guaranteed to change on every write", d.fs)
	}
	if d.fs.name == "unknown" {
		caps.Notes = append(caps.Notes, "unknown filesystem type: link(2), flock(2) and xattrs were probed at open and are trusted as probed")
	}

	if o.readOnly {
		d.openRO = true
		d.readOnly = true
		none := storage.Capability{Level: storage.LevelNone, Reason: "opened read-only"}
		caps.CreateIfAbsent, caps.ReplaceIfVersion, caps.DeleteIfVersion = none, none, none
		caps.ReadOnly = true
		caps.Notes = append(caps.Notes, "opened read-only: nothing was created or probed, and every write is refused")
		d.caps = caps
		return nil
	}

	xattrOK := false
	rfd, err := ensureDir(d.rootFd, reservedDir)
	if err != nil {
		if !isReadOnlyErr(err) {
			return mapErr("open", d.root, "cannot create the adapter's directory "+reservedDir, err)
		}
		d.readOnly = true
		why := fmt.Sprintf("the store root is not writable (%v): localfs serves it read-only", err)
		createWhy, lockWhy = why, why
	} else {
		defer unix.Close(rfd)
		d.locksFd, err = ensureDir(rfd, "locks")
		if err == nil {
			d.gatesFd, err = ensureDir(rfd, "gates")
		}
		var pfd int
		if err == nil {
			pfd, err = ensureDir(rfd, "probe")
		}
		if err != nil {
			return mapErr("open", d.root, "cannot set up the adapter's directory "+reservedDir, err)
		}
		p := probe(pfd)
		unix.Close(pfd)
		if p.err != nil {
			if !isReadOnlyErr(p.err) {
				return mapErr("open", d.root, "probing the filesystem in "+reservedDir+"/probe", p.err)
			}
			d.readOnly = true
			why := fmt.Sprintf("the store root is not writable (%v): localfs serves it read-only", p.err)
			createWhy, lockWhy = why, why
		}
		xattrOK = p.xattr && !o.noXattr
		d.xattr = xattrOK
		if createWhy == "" && (p.linkErr != nil || o.noLink) {
			createWhy = fmt.Sprintf("probe: link(2) failed in %s/%s/probe (%v), so create-if-absent cannot be made atomic", d.root, reservedDir, orForced(p.linkErr))
		}
		if lockWhy == "" && (p.lockErr != nil || o.noFlock) {
			lockWhy = fmt.Sprintf("probe: flock(2) does not exclude two open files in %s/%s/probe (%v), so no gate can be held", d.root, reservedDir, orForced(p.lockErr))
		}
	}

	if createWhy == "" {
		d.createOK = true
		caps.CreateIfAbsent = storage.Capability{Level: storage.LevelNative, Scope: storage.ScopeGlobal,
			Reason: "link(2) of a complete, fsynced temp file fails with EEXIST if the name exists; the kernel makes it atomic for every writer of the filesystem"}
	} else {
		caps.CreateIfAbsent = storage.Capability{Level: storage.LevelNone, Reason: createWhy}
	}
	if lockWhy == "" {
		d.lockOK = true
		caps.Gates = []storage.GateSpec{{Name: MetadataGate, Scope: storage.ScopeHost,
			Covers: "multi-object metadata updates of this store by processes on this host: flock(2) on " + reservedDir + "/gates/" + MetadataGate + ".lock"}}
	}
	gated := func() storage.Capability {
		switch {
		case lockWhy != "":
			return storage.Capability{Level: storage.LevelNone, Reason: lockWhy}
		case versionWhy != "":
			return storage.Capability{Level: storage.LevelNone, Reason: versionWhy}
		}
		return storage.Capability{Level: storage.LevelGated, Gate: stripeGate, Scope: storage.ScopeHost,
			Reason: "flock(2) on one of 256 striped lock files in " + reservedDir + "/locks is held around the version compare and the rename or unlink; every write of the key through localfs takes it"}
	}
	caps.ReplaceIfVersion = gated()
	caps.DeleteIfVersion = gated()
	switch {
	case d.readOnly:
	case xattrOK:
		caps.UniqueVersions = true
		caps.Notes = append(caps.Notes, "version token: random "+xattrName+" xattr set on every write, inode number, mtime (ns) and size")
	default:
		caps.Notes = append(caps.Notes, "the filesystem refuses user xattrs (ENOTSUP): version tokens fall back to inode number, ctime, mtime and size; a write in the same timestamp tick that reuses a freed inode number and has the same size could repeat an earlier token")
	}
	d.caps = caps
	return nil
}

func orForced(err error) any {
	if err == nil {
		return "forced by test"
	}
	return err
}

func isReadOnlyErr(err error) bool {
	return err == unix.EROFS || err == unix.EACCES || err == unix.EPERM
}

// ensureDir creates (if missing) and opens the directory name in dirfd,
// refusing to follow a symlink.
func ensureDir(dirfd int, name string) (int, error) {
	if err := unix.Mkdirat(dirfd, name, 0o755); err != nil && err != unix.EEXIST {
		return -1, err
	}
	return unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
}

type probeResult struct {
	err     error // the probe itself could not run (e.g. read-only)
	xattr   bool
	linkErr error
	lockErr error
}

// probe tries, in the probe directory, what the adapter relies on: a user
// xattr on a file, link(2) of a file to a second name, and flock(2)
// excluding a second open file description.
func probe(pfd int) probeResult {
	var p probeResult
	name := "p-" + randHex()
	fd, err := unix.Openat(pfd, name, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
	if err != nil {
		p.err = err
		return p
	}
	defer unix.Unlinkat(pfd, name, 0)
	defer unix.Close(fd)

	p.xattr = unix.Fsetxattr(fd, xattrName, newVersionStamp(), 0) == nil

	link := "l-" + randHex()
	if err := unix.Linkat(pfd, name, pfd, link, 0); err != nil {
		p.linkErr = err
	} else {
		unix.Unlinkat(pfd, link, 0)
	}

	fd2, err := unix.Openat(pfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		p.lockErr = err
		return p
	}
	defer unix.Close(fd2)
	if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		p.lockErr = err
		return p
	}
	switch err := unix.Flock(fd2, unix.LOCK_EX|unix.LOCK_NB); err {
	case unix.EWOULDBLOCK:
		// excluded, as it must be
	case nil:
		p.lockErr = fmt.Errorf("a second open file description took the lock")
	default:
		p.lockErr = err
	}
	unix.Flock(fd, unix.LOCK_UN)
	return p
}
