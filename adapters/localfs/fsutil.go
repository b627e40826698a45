//go:build linux

package localfs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/retain-dev/retain/core/storage"
)

// kindOf classifies an OS error by errno (never by its text).
func kindOf(err error) storage.Kind {
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return storage.ErrTransient
	case errors.Is(err, fs.ErrNotExist):
		return storage.ErrNotFound
	case errors.Is(err, unix.EEXIST):
		return storage.ErrAlreadyExists
	case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM), errors.Is(err, unix.EROFS),
		errors.Is(err, unix.ELOOP):
		return storage.ErrPermissionDenied
	case errors.Is(err, unix.ENOSPC), errors.Is(err, unix.EDQUOT), errors.Is(err, unix.EFBIG),
		errors.Is(err, unix.ENAMETOOLONG), errors.Is(err, unix.EMLINK):
		return storage.ErrLimitExceeded
	case errors.Is(err, unix.EINTR), errors.Is(err, unix.EAGAIN), errors.Is(err, unix.ETIMEDOUT),
		errors.Is(err, unix.ESTALE), errors.Is(err, unix.EMFILE), errors.Is(err, unix.ENFILE),
		errors.Is(err, unix.ENOMEM), errors.Is(err, unix.EBUSY), errors.Is(err, unix.ENOLCK):
		return storage.ErrTransient
	case errors.Is(err, unix.ENOTSUP), errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.ENOSYS),
		errors.Is(err, unix.EXDEV):
		return storage.ErrUnsupported
	}
	return storage.ErrUnknown
}

// mapErr makes err an *storage.Error for op and key. An error that already is
// one is returned as is.
func mapErr(op, key, msg string, err error) *storage.Error {
	var ce *storage.Error
	if errors.As(err, &ce) {
		return ce
	}
	if errors.Is(err, unix.ENAMETOOLONG) && msg == "" {
		msg = "a key segment is longer than the filesystem allows (usually 255 bytes)"
	}
	return &storage.Error{Op: op, Key: key, Kind: kindOf(err), Msg: msg, Err: err}
}

// ctxError reports a done context: transient, wrapping ctx.Err() so that
// errors.Is(err, context.DeadlineExceeded) still holds.
func ctxError(op, key string, err error) *storage.Error {
	return &storage.Error{Op: op, Key: key, Kind: storage.ErrTransient, Msg: "context done", Err: err}
}

func symlinkError(op, key, path string) *storage.Error {
	return &storage.Error{Op: op, Key: key, Kind: storage.ErrPermissionDenied,
		Msg: fmt.Sprintf("%q under the store root is a symbolic link; localfs never follows symlinks", path), Err: unix.ELOOP}
}

func specialError(op, key, path string) *storage.Error {
	return storage.Errorf(op, key, storage.ErrPermissionDenied,
		"%q under the store root is not a regular file or directory; localfs leaves it alone", path)
}

func notDirError(op, key, path string) *storage.Error {
	return storage.Errorf(op, key, storage.ErrInvalidArgument,
		"%q is an object, so nothing can be stored under %q: a filesystem cannot hold a file and a directory under one name", path, path+"/")
}

func isDirError(op, key string) *storage.Error {
	return storage.Errorf(op, key, storage.ErrInvalidArgument,
		"%q is a prefix of stored keys (a directory), so it cannot also be an object: a filesystem cannot hold a file and a directory under one name", key)
}

func randHex() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func newVersionStamp() []byte {
	b := make([]byte, 16)
	rand.Read(b)
	return b
}

// --- walking a key's path -------------------------------------------------

// chain holds the directories on a key's path: fds[0] is the root (not
// owned), fds[i] the directory of segs[:i].
type chain struct {
	fds  []int
	segs []string
}

func (c *chain) dir() int { return c.fds[len(c.fds)-1] }

func (c *chain) close() {
	for _, fd := range c.fds[1:] {
		unix.Close(fd)
	}
	c.fds = c.fds[:1]
}

// prune removes the chain's directories that are now empty, deepest first,
// up to but not including the root. Best effort: it stops at the first
// directory that is not empty (or any other error). A create racing with it
// sees ENOENT and retries its walk, so pruning never fails a write.
func (c *chain) prune() {
	for i := len(c.fds) - 1; i >= 1; i-- {
		if unix.Unlinkat(c.fds[i-1], c.segs[i-1], unix.AT_REMOVEDIR) != nil {
			return
		}
	}
}

const openDirFlags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC

// errRetryWalk means a directory on the path vanished under a write (pruned
// by a concurrent delete): walk again.
var errRetryWalk = errors.New("directory removed concurrently")

const maxWalkRetries = 32

// walk opens the directories segs below the root without following any
// symlink. With create, missing directories are made (and their parents
// fsynced); a non-directory on the way is a key conflict. Without create, a
// missing or non-directory component is ErrNotFound.
func (d *Driver) walk(op, key string, segs []string, create bool) (*chain, error) {
	for attempt := 0; ; attempt++ {
		c, err := d.walkOnce(op, key, segs, create)
		if err != errRetryWalk {
			return c, err
		}
		if attempt >= maxWalkRetries {
			return nil, storage.Errorf(op, key, storage.ErrTransient,
				"directories on the key's path kept being removed concurrently")
		}
	}
}

func (d *Driver) walkOnce(op, key string, segs []string, create bool) (*chain, error) {
	c := &chain{fds: make([]int, 1, len(segs)+1), segs: segs}
	c.fds[0] = d.rootFd
	for i, seg := range segs {
		parent := c.dir()
		fd, err := unix.Openat(parent, seg, openDirFlags, 0)
		if err == unix.ENOENT && create {
			switch merr := unix.Mkdirat(parent, seg, 0o755); merr {
			case nil:
				if serr := fsyncDir(parent); serr != nil {
					c.close()
					return nil, mapErr(op, key, "fsync of a directory", serr)
				}
			case unix.EEXIST:
			case unix.ENOENT:
				c.close()
				return nil, errRetryWalk
			default:
				c.close()
				return nil, mapErr(op, key, "creating directory "+strings.Join(segs[:i+1], "/"), merr)
			}
			fd, err = unix.Openat(parent, seg, openDirFlags, 0)
			if err == unix.ENOENT {
				c.close()
				return nil, errRetryWalk
			}
		}
		if err != nil {
			path := strings.Join(segs[:i+1], "/")
			err = classifyDirErr(op, key, parent, seg, path, create, err)
			c.close() // after classifying: it closes parent
			return nil, err
		}
		c.fds = append(c.fds, fd)
	}
	return c, nil
}

// classifyDirErr explains why seg in parent could not be opened as a
// directory.
func classifyDirErr(op, key string, parent int, seg, path string, create bool, err error) error {
	if err == unix.ENOENT {
		return storage.Errorf(op, key, storage.ErrNotFound, "no object: %q does not exist", path)
	}
	if err == unix.ELOOP || err == unix.ENOTDIR {
		var st unix.Stat_t
		if serr := unix.Fstatat(parent, seg, &st, unix.AT_SYMLINK_NOFOLLOW); serr == nil {
			switch st.Mode & unix.S_IFMT {
			case unix.S_IFLNK:
				return symlinkError(op, key, path)
			case unix.S_IFREG:
				if create {
					return notDirError(op, key, path)
				}
				return storage.Errorf(op, key, storage.ErrNotFound, "no object: %q is an object, not a directory", path)
			default:
				if create {
					return specialError(op, key, path)
				}
				return storage.Errorf(op, key, storage.ErrNotFound, "no object: %q is not a directory", path)
			}
		}
	}
	return mapErr(op, key, "opening directory "+path, err)
}

// dirSyncs counts directory syncs, for the tests that hold batch deletes
// to one per directory.
var dirSyncs atomic.Int64

func fsyncDir(fd int) error {
	dirSyncs.Add(1)
	err := unix.Fsync(fd)
	if err == unix.EINVAL || err == unix.ENOTSUP || err == unix.EOPNOTSUPP {
		return nil // the filesystem does not sync directories
	}
	return err
}

// --- examining objects ----------------------------------------------------

// entryKind is what a final name is, without following symlinks.
type entryKind uint8

const (
	entAbsent entryKind = iota
	entFile
	entDir
	entSymlink
	entSpecial
)

func lstatAt(dirfd int, name string) (entryKind, error) {
	var st unix.Stat_t
	err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	if err == unix.ENOENT {
		return entAbsent, nil
	}
	if err != nil {
		return entAbsent, err
	}
	return kindOfMode(st.Mode), nil
}

func kindOfMode(mode uint32) entryKind {
	switch mode & unix.S_IFMT {
	case unix.S_IFREG:
		return entFile
	case unix.S_IFDIR:
		return entDir
	case unix.S_IFLNK:
		return entSymlink
	}
	return entSpecial
}

// version renders the token. With the per-write xattr it is the xattr,
// inode number, mtime (ns) and size: the xattr is unique to one write
// through localfs, and mtime and size catch an in-place rewrite by another
// program. ctime is left out on purpose: link, unlink and rename change it
// without any write of the body (a reader that opened a file just before it
// was replaced would otherwise see a token no writer ever produced). A file
// with no xattr (written by another program, or a filesystem without user
// xattrs) falls back to "-", inode number, ctime, mtime and size: there
// ctime is the only field an mtime-preserving copy (rsync -a, cp -p) must
// change, and a spurious mismatch only fails a conditional write safely.
func version(st *unix.Stat_t, x string) string {
	mtime := uint64(st.Mtim.Sec)*1e9 + uint64(st.Mtim.Nsec)
	if x != "" {
		return fmt.Sprintf("%s.%x.%x.%x", x, st.Ino, mtime, uint64(st.Size))
	}
	ctime := uint64(st.Ctim.Sec)*1e9 + uint64(st.Ctim.Nsec)
	return fmt.Sprintf("-.%x.%x.%x.%x", st.Ino, ctime, mtime, uint64(st.Size))
}

// readStamp reads the per-write xattr through getx ("" if absent or
// unsupported).
func readStamp(getx func([]byte) (int, error)) (string, error) {
	var buf [64]byte
	n, err := getx(buf[:])
	switch err {
	case nil:
		return hex.EncodeToString(buf[:n]), nil
	case unix.ENODATA, unix.ENOTSUP: // ENOTSUP == EOPNOTSUPP on Linux
		return "", nil
	case unix.ERANGE:
		return "~", nil // an oversized value some other program set
	}
	return "", err
}

func infoOf(key string, st *unix.Stat_t, stamp string) storage.Info {
	return storage.Info{
		Key:     key,
		Size:    st.Size,
		Version: version(st, stamp),
		ModTime: time.Unix(st.Mtim.Sec, st.Mtim.Nsec),
	}
}

// infoFd computes the info of the open file fd.
func infoFd(key string, fd int) (storage.Info, unix.Stat_t, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return storage.Info{}, st, err
	}
	stamp, err := readStamp(func(b []byte) (int, error) { return unix.Fgetxattr(fd, xattrName, b) })
	if err != nil {
		return storage.Info{}, st, err
	}
	return infoOf(key, &st, stamp), st, nil
}

const openFileFlags = unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_CLOEXEC

// openObject opens the object name in dirfd for reading and returns its fd
// (blocking mode) and the info of exactly the version open. A missing name,
// a directory or a special file is ErrNotFound; a symlink is refused.
func openObject(op, key string, dirfd int, name string) (int, storage.Info, error) {
	// lstat first so that a device or fifo is never opened.
	k, err := lstatAt(dirfd, name)
	if err != nil {
		return -1, storage.Info{}, mapErr(op, key, "", err)
	}
	if err := objectKindErr(op, key, k); err != nil {
		return -1, storage.Info{}, err
	}
	fd, err := unix.Openat(dirfd, name, openFileFlags, 0)
	if err != nil {
		return -1, storage.Info{}, openFileErr(op, key, err)
	}
	info, st, err := infoFd(key, fd)
	if err == nil {
		if err = objectKindErr(op, key, kindOfMode(st.Mode)); err == nil {
			err = unix.SetNonblock(fd, false)
		}
	}
	if err != nil {
		unix.Close(fd)
		return -1, storage.Info{}, mapErr(op, key, "", err)
	}
	return fd, info, nil
}

func objectKindErr(op, key string, k entryKind) error {
	switch k {
	case entFile:
		return nil
	case entSymlink:
		return symlinkError(op, key, key)
	}
	return storage.Errorf(op, key, storage.ErrNotFound, "no object")
}

func openFileErr(op, key string, err error) error {
	switch err {
	case unix.ENOENT:
		return storage.Errorf(op, key, storage.ErrNotFound, "no object")
	case unix.ELOOP:
		return symlinkError(op, key, key)
	}
	return mapErr(op, key, "", err)
}

// statObject is the info of the object name in dirfd, as openObject would
// report it. If the file cannot be opened for lack of read permission the
// info comes from fstatat and an xattr read relative to dirfd.
func statObject(op, key string, dirfd int, name string) (storage.Info, error) {
	fd, info, err := openObject(op, key, dirfd, name)
	if err == nil {
		unix.Close(fd)
		return info, nil
	}
	var ce *storage.Error
	if !errors.As(err, &ce) || !errors.Is(ce.Err, unix.EACCES) {
		return storage.Info{}, err
	}
	var st unix.Stat_t
	if serr := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); serr != nil {
		return storage.Info{}, mapErr(op, key, "", serr)
	}
	if kerr := objectKindErr(op, key, kindOfMode(st.Mode)); kerr != nil {
		return storage.Info{}, kerr
	}
	// /proc/self/fd/N resolves to the verified directory itself; lgetxattr
	// does not follow the final name.
	p := fmt.Sprintf("/proc/self/fd/%d/%s", dirfd, name)
	stamp, xerr := readStamp(func(b []byte) (int, error) { return unix.Lgetxattr(p, xattrName, b) })
	if xerr != nil {
		return storage.Info{}, mapErr(op, key, "reading the version xattr", xerr)
	}
	return infoOf(key, &st, stamp), nil
}

// --- writing temp files ---------------------------------------------------

var copyBufs = sync.Pool{New: func() any { b := make([]byte, 256<<10); return &b }}

// tempFile is a complete, fsynced body under a reserved name in a
// directory, waiting to be linked or renamed into place.
type tempFile struct {
	dirfd int
	name  string
	f     *os.File
	fd    int
}

// writeTemp writes body to a new temp file in dirfd, stamps it with a fresh
// version xattr and fsyncs it. errRetryWalk means dirfd's directory was
// removed before the temp file could be created.
func writeTemp(ctx context.Context, op, key string, dirfd int, body io.Reader, stamp bool) (*tempFile, error) {
	name := tmpPrefix + randHex()
	fd, err := unix.Openat(dirfd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
	if err == unix.ENOENT {
		return nil, errRetryWalk
	}
	if err != nil {
		return nil, mapErr(op, key, "creating a temp file", err)
	}
	t := &tempFile{dirfd: dirfd, name: name, f: os.NewFile(uintptr(fd), name), fd: fd}
	if err := t.fill(ctx, op, key, body, stamp); err != nil {
		t.discard()
		return nil, err
	}
	return t, nil
}

func (t *tempFile) fill(ctx context.Context, op, key string, body io.Reader, stamp bool) error {
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	buf := *bp
	for {
		if err := ctx.Err(); err != nil {
			return ctxError(op, key, err)
		}
		n, rerr := body.Read(buf)
		if n > 0 {
			if _, err := t.f.Write(buf[:n]); err != nil {
				return mapErr(op, key, "writing the temp file", err)
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			e := storage.Wrap(op, key, storage.ErrUnknown, rerr)
			e.Msg = "reading the body"
			return e
		}
	}
	if stamp {
		// A mount below the root may refuse xattrs even though the root's
		// filesystem took them: the token then rests on the stat fields.
		if err := unix.Fsetxattr(t.fd, xattrName, newVersionStamp(), 0); err != nil && err != unix.ENOTSUP {
			return mapErr(op, key, "setting the version xattr", err)
		}
	}
	if err := t.f.Sync(); err != nil {
		return mapErr(op, key, "fsync of the temp file", err)
	}
	return nil
}

// unlinkName removes the temp file's name (after it was linked elsewhere).
func (t *tempFile) unlinkName() error { return unix.Unlinkat(t.dirfd, t.name, 0) }

// discard removes the temp file and closes it.
func (t *tempFile) discard() {
	unix.Unlinkat(t.dirfd, t.name, 0)
	t.f.Close()
}

// --- key stripe locks -----------------------------------------------------

func stripeOf(key string) int {
	// FNV-1a, 32 bit.
	h := uint32(2166136261)
	for i := 0; i < len(key); i++ {
		h ^= uint32(key[i])
		h *= 16777619
	}
	return int(h % stripeCount)
}

// lockKey takes the key's stripe: first the process-local slot (so
// goroutines of this process queue fairly), then flock(2) on a freshly
// opened lock file (so every other process on the host is excluded). The
// lock files are never deleted.
func (d *Driver) lockKey(ctx context.Context, op, key string) (func(), error) {
	i := stripeOf(key)
	select {
	case d.stripes[i] <- struct{}{}:
	case <-ctx.Done():
		return nil, ctxError(op, key, ctx.Err())
	}
	release := func() { <-d.stripes[i] }
	if !d.lockOK {
		return release, nil
	}
	// Open the lock file as it is, creating it only if missing: an open
	// with O_CREAT takes the locks directory's inode lock even for a file
	// that exists, and a batch delete opens one per key, from several
	// batches at once.
	name := fmt.Sprintf("%02x.lock", i)
	fd, err := unix.Openat(d.locksFd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err == unix.ENOENT {
		fd, err = unix.Openat(d.locksFd, name, unix.O_RDONLY|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
	}
	if err != nil {
		release()
		return nil, mapErr(op, key, "opening the key's lock file", err)
	}
	if err := flockWait(ctx, fd, 20*time.Microsecond, 2*time.Millisecond); err != nil {
		unix.Close(fd)
		release()
		if ctx.Err() != nil {
			return nil, ctxError(op, key, ctx.Err())
		}
		return nil, mapErr(op, key, "locking the key's lock file", err)
	}
	return func() {
		unix.Flock(fd, unix.LOCK_UN)
		unix.Close(fd)
		release()
	}, nil
}

// flockWait takes an exclusive flock on fd, polling without blocking so a
// done ctx ends the wait.
func flockWait(ctx context.Context, fd int, backoff, maxBackoff time.Duration) error {
	for {
		err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return nil
		}
		if err != unix.EWOULDBLOCK && err != unix.EINTR {
			return err
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		backoff = min(backoff*2, maxBackoff)
	}
}
