//go:build linux

package localfs

import (
	"context"
	"io"
	"os"
	"path"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/retain-dev/retain/core/storage"
)

// Get opens the object and streams it from that descriptor; the Info is
// computed from the same descriptor, so it describes exactly the bytes read.
// Every write replaces the name with a complete file, so a reader never sees
// a partial or mixed body.
func (d *Driver) Get(ctx context.Context, key string) (*storage.Reader, error) {
	const op = "get"
	if err := checkKey(op, key); err != nil {
		return nil, err
	}
	leave, err := d.enter(ctx, op, key)
	if err != nil {
		return nil, err
	}
	defer leave()
	dirSegs, name := splitKey(key)
	c, err := d.walk(op, key, dirSegs, false)
	if err != nil {
		return nil, err
	}
	defer c.close()
	fd, info, err := openObject(op, key, c.dir(), name)
	if err != nil {
		return nil, err
	}
	return &storage.Reader{Info: info, ReadCloser: os.NewFile(uintptr(fd), filepath.Join(d.root, key))}, nil
}

// Stat returns the object's info.
func (d *Driver) Stat(ctx context.Context, key string) (storage.Info, error) {
	const op = "stat"
	if err := checkKey(op, key); err != nil {
		return storage.Info{}, err
	}
	leave, err := d.enter(ctx, op, key)
	if err != nil {
		return storage.Info{}, err
	}
	defer leave()
	dirSegs, name := splitKey(key)
	c, err := d.walk(op, key, dirSegs, false)
	if err != nil {
		return storage.Info{}, err
	}
	defer c.close()
	return statObject(op, key, c.dir(), name)
}

// Put writes body under key per opts.Mode.
func (d *Driver) Put(ctx context.Context, key string, body io.Reader, opts storage.PutOptions) (storage.Info, error) {
	const op = "put"
	if err := checkKey(op, key); err != nil {
		return storage.Info{}, err
	}
	switch opts.Mode {
	case storage.PutOverwrite, storage.PutCreateIfAbsent:
		if opts.IfVersion != "" {
			return storage.Info{}, storage.Errorf(op, key, storage.ErrInvalidArgument, "IfVersion is only meaningful with replace-if-version")
		}
	case storage.PutReplaceIfVersion:
		if opts.IfVersion == "" {
			return storage.Info{}, storage.Errorf(op, key, storage.ErrInvalidArgument, "replace-if-version needs the expected version")
		}
	default:
		return storage.Info{}, storage.Errorf(op, key, storage.ErrInvalidArgument, "unknown put mode %d", opts.Mode)
	}
	if body == nil {
		return storage.Info{}, storage.Errorf(op, key, storage.ErrInvalidArgument, "nil body: pass an empty reader for an empty object")
	}
	leave, err := d.enter(ctx, op, key)
	if err != nil {
		return storage.Info{}, err
	}
	defer leave()
	if d.openRO {
		return storage.Info{}, storage.ReadOnlyError(op, key)
	}
	if d.readOnly {
		return storage.Info{}, storage.Errorf(op, key, storage.ErrPermissionDenied, "the store root %s is not writable", d.root)
	}
	switch opts.Mode {
	case storage.PutCreateIfAbsent:
		if !d.createOK {
			return storage.Info{}, storage.Errorf(op, key, storage.ErrUnsupported,
				"create-if-absent is not provided here: %s; nothing was written", d.caps.CreateIfAbsent.Reason)
		}
		return d.putCreate(ctx, op, key, body)
	case storage.PutReplaceIfVersion:
		if d.caps.ReplaceIfVersion.Level == storage.LevelNone {
			return storage.Info{}, storage.Errorf(op, key, storage.ErrUnsupported,
				"replace-if-version is not provided here: %s; nothing was written", d.caps.ReplaceIfVersion.Reason)
		}
		return d.putReplace(ctx, op, key, body, opts.IfVersion)
	}
	return d.putOverwrite(ctx, op, key, body)
}

// makeRoom removes an empty directory at the final name (left by a crash or
// another program: empty directories are not keys), so that the object can
// take the name. A non-empty one stays and existingErr refuses it.
func makeRoom(dirfd int, name string, k entryKind) entryKind {
	if k == entDir && unix.Unlinkat(dirfd, name, unix.AT_REMOVEDIR) == nil {
		return entAbsent
	}
	return k
}

// existingErr refuses to write over something at the final name that is
// not an object file.
func existingErr(op, key string, k entryKind) error {
	switch k {
	case entDir:
		return isDirError(op, key)
	case entSymlink:
		return symlinkError(op, key, key)
	case entSpecial:
		return specialError(op, key, key)
	}
	return nil
}

// putCreate links a complete temp file to the key's name: link(2) fails with
// EEXIST if the name exists, so exactly one of any number of racing creators
// wins, in any process, and a loser has changed nothing.
//
// It takes no key lock. Racing with a gated replace-if-version or
// delete-if-version cannot break their compare-then-write: if the gated op
// saw the object, the object stays (every removal through localfs holds the
// key lock, which the gated op holds), so this link fails with EEXIST; if it
// saw none, it returned ErrNotFound without writing and this create simply
// comes after it. Between link and the unlink of the temp name the file has
// two links; the version token leaves ctime out, so that window does not
// change it.
func (d *Driver) putCreate(ctx context.Context, op, key string, body io.Reader) (storage.Info, error) {
	dirSegs, name := splitKey(key)
	for attempt := 0; ; attempt++ {
		c, err := d.walk(op, key, dirSegs, true)
		if err != nil {
			return storage.Info{}, err
		}
		info, err := d.createIn(ctx, op, key, c, name, body)
		c.close()
		if err == errRetryWalk {
			if attempt < maxWalkRetries {
				continue
			}
			return storage.Info{}, storage.Errorf(op, key, storage.ErrTransient, "the key's directory kept being removed concurrently")
		}
		return info, err
	}
}

func (d *Driver) createIn(ctx context.Context, op, key string, c *chain, name string, body io.Reader) (storage.Info, error) {
	k, err := lstatAt(c.dir(), name)
	if err != nil {
		return storage.Info{}, mapErr(op, key, "", err)
	}
	if k == entFile {
		return storage.Info{}, storage.Errorf(op, key, storage.ErrAlreadyExists, "the key exists; nothing was written")
	}
	if err := existingErr(op, key, makeRoom(c.dir(), name, k)); err != nil {
		return storage.Info{}, err
	}
	t, err := writeTemp(ctx, op, key, c.dir(), body, d.xattr)
	if err != nil {
		return storage.Info{}, err
	}
	defer t.f.Close()
	if err := unix.Linkat(c.dir(), t.name, c.dir(), name, 0); err != nil {
		t.unlinkName()
		if err == unix.EEXIST {
			k, _ := lstatAt(c.dir(), name)
			if e := existingErr(op, key, k); e != nil {
				return storage.Info{}, e
			}
			return storage.Info{}, &storage.Error{Op: op, Key: key, Kind: storage.ErrAlreadyExists,
				Msg: "the key exists; nothing was written", Err: err}
		}
		return storage.Info{}, mapErr(op, key, "linking the temp file into place", err)
	}
	// The object is in place. A temp name that cannot be removed is hidden
	// from List anyway, so its failure does not fail the create.
	t.unlinkName()
	info, _, err := infoFd(key, t.fd)
	if err != nil {
		return storage.Info{}, mapErr(op, key, "stat of the new object", err)
	}
	if err := fsyncDir(c.dir()); err != nil {
		return storage.Info{}, mapErr(op, key, "fsync of the key's directory", err)
	}
	return info, nil
}

// putOverwrite renames a complete temp file over the key's name, holding
// the key lock so it cannot land between a gated op's compare and write.
func (d *Driver) putOverwrite(ctx context.Context, op, key string, body io.Reader) (storage.Info, error) {
	dirSegs, name := splitKey(key)
	for attempt := 0; ; attempt++ {
		c, err := d.walk(op, key, dirSegs, true)
		if err != nil {
			return storage.Info{}, err
		}
		info, err := d.overwriteIn(ctx, op, key, c, name, body)
		c.close()
		if err == errRetryWalk {
			if attempt < maxWalkRetries {
				continue
			}
			return storage.Info{}, storage.Errorf(op, key, storage.ErrTransient, "the key's directory kept being removed concurrently")
		}
		return info, err
	}
}

func (d *Driver) overwriteIn(ctx context.Context, op, key string, c *chain, name string, body io.Reader) (storage.Info, error) {
	k, err := lstatAt(c.dir(), name)
	if err != nil {
		return storage.Info{}, mapErr(op, key, "", err)
	}
	if err := existingErr(op, key, makeRoom(c.dir(), name, k)); err != nil {
		return storage.Info{}, err
	}
	t, err := writeTemp(ctx, op, key, c.dir(), body, d.xattr)
	if err != nil {
		return storage.Info{}, err
	}
	unlock, err := d.lockKey(ctx, op, key)
	if err != nil {
		t.discard()
		return storage.Info{}, err
	}
	return d.renameInto(op, key, c, name, t, unlock)
}

// renameInto renames t over name, computes the new info and releases the
// key lock, then fsyncs the directory. It consumes t and unlock.
func (d *Driver) renameInto(op, key string, c *chain, name string, t *tempFile, unlock func()) (storage.Info, error) {
	// Refuse a symlink or directory that appeared meanwhile. (rename(2)
	// would replace a symlink itself, never write through it, but the rule
	// is to refuse.)
	k, err := lstatAt(c.dir(), name)
	if err == nil {
		err = existingErr(op, key, k)
	}
	if err == nil {
		err = unix.Renameat(c.dir(), t.name, c.dir(), name)
		if err == unix.EISDIR || err == unix.ENOTEMPTY {
			err = isDirError(op, key)
		}
	}
	if err != nil {
		unlock()
		t.discard()
		return storage.Info{}, mapErr(op, key, "renaming the temp file into place", err)
	}
	// Under the lock: the info is of the object as this write left it.
	info, _, ierr := infoFd(key, t.fd)
	unlock()
	t.f.Close()
	if ierr != nil {
		return storage.Info{}, mapErr(op, key, "stat of the new object", ierr)
	}
	if err := fsyncDir(c.dir()); err != nil {
		return storage.Info{}, mapErr(op, key, "fsync of the key's directory", err)
	}
	return info, nil
}

// putReplace writes the temp file first (outside the lock, after a cheap
// unlocked check that fails fast on a stale version), then under the key
// lock compares the version again and renames.
func (d *Driver) putReplace(ctx context.Context, op, key string, body io.Reader, ifVersion string) (storage.Info, error) {
	dirSegs, name := splitKey(key)
	c, err := d.walk(op, key, dirSegs, false)
	if err != nil {
		return storage.Info{}, err
	}
	defer c.close()
	if err := checkVersion(op, key, c, name, ifVersion); err != nil {
		return storage.Info{}, err
	}
	t, err := writeTemp(ctx, op, key, c.dir(), body, d.xattr)
	if err == errRetryWalk {
		// The directory is gone, so is the object.
		return storage.Info{}, storage.Errorf(op, key, storage.ErrNotFound, "no object; nothing was written")
	}
	if err != nil {
		return storage.Info{}, err
	}
	unlock, err := d.lockKey(ctx, op, key)
	if err != nil {
		t.discard()
		return storage.Info{}, err
	}
	if err := checkVersion(op, key, c, name, ifVersion); err != nil {
		unlock()
		t.discard()
		if storage.KindOf(err) == storage.ErrNotFound {
			c.prune()
		}
		return storage.Info{}, err
	}
	return d.renameInto(op, key, c, name, t, unlock)
}

// checkVersion fails unless the object exists with version want.
func checkVersion(op, key string, c *chain, name, want string) error {
	cur, err := statObject(op, key, c.dir(), name)
	if err != nil {
		if storage.KindOf(err) == storage.ErrNotFound {
			return storage.Errorf(op, key, storage.ErrNotFound, "no object; nothing was changed")
		}
		return err
	}
	if cur.Version != want {
		return storage.Errorf(op, key, storage.ErrPreconditionFailed,
			"the object's version is %s, not %s; nothing was changed", cur.Version, want)
	}
	return nil
}

// Delete removes key per opts.
func (d *Driver) Delete(ctx context.Context, key string, opts storage.DeleteOptions) error {
	const op = "delete"
	if err := checkKey(op, key); err != nil {
		return err
	}
	leave, err := d.enter(ctx, op, key)
	if err != nil {
		return err
	}
	defer leave()
	if d.openRO {
		return storage.ReadOnlyError(op, key)
	}
	if d.readOnly {
		return storage.Errorf(op, key, storage.ErrPermissionDenied, "the store root %s is not writable", d.root)
	}
	if opts.IfVersion != "" && d.caps.DeleteIfVersion.Level == storage.LevelNone {
		return storage.Errorf(op, key, storage.ErrUnsupported,
			"delete-if-version is not provided here: %s; nothing was deleted", d.caps.DeleteIfVersion.Reason)
	}
	return d.delete(ctx, op, key, opts.IfVersion)
}

// delete unlinks key under the key lock, comparing the version first when
// ifVersion is set, then prunes directories left empty.
func (d *Driver) delete(ctx context.Context, op, key, ifVersion string) error {
	missing := func() error {
		if ifVersion == "" {
			return nil
		}
		return storage.Errorf(op, key, storage.ErrNotFound, "no object; nothing was deleted")
	}
	dirSegs, name := splitKey(key)
	c, err := d.walk(op, key, dirSegs, false)
	if err != nil {
		if storage.KindOf(err) == storage.ErrNotFound {
			return missing()
		}
		return err
	}
	defer c.close()
	unlock, err := d.lockKey(ctx, op, key)
	if err != nil {
		return err
	}
	k, err := lstatAt(c.dir(), name)
	switch {
	case err != nil:
		unlock()
		return mapErr(op, key, "", err)
	case k == entSymlink:
		unlock()
		return symlinkError(op, key, key)
	case k != entFile:
		unlock()
		return missing()
	}
	if ifVersion != "" {
		if err := checkVersion(op, key, c, name, ifVersion); err != nil {
			unlock()
			return err
		}
	}
	err = unix.Unlinkat(c.dir(), name, 0)
	unlock()
	if err == unix.ENOENT {
		return missing()
	}
	if err != nil {
		return mapErr(op, key, "unlinking the object", err)
	}
	if err := fsyncDir(c.dir()); err != nil {
		return mapErr(op, key, "fsync of the key's directory", err)
	}
	c.prune()
	return nil
}

// DeleteMany deletes keys unconditionally, one result per key in order.
func (d *Driver) DeleteMany(ctx context.Context, keys []string) ([]storage.DeleteResult, error) {
	const op = "delete-many"
	if len(keys) > maxDeleteBatch {
		return nil, storage.Errorf(op, "", storage.ErrLimitExceeded, "%d keys exceeds the batch limit of %d", len(keys), maxDeleteBatch)
	}
	leave, err := d.enter(ctx, op, "")
	if err != nil {
		return nil, err
	}
	defer leave()
	if d.openRO {
		return nil, storage.ReadOnlyError(op, "")
	}
	if d.readOnly {
		return nil, storage.Errorf(op, "", storage.ErrPermissionDenied, "the store root %s is not writable", d.root)
	}
	out := make([]storage.DeleteResult, len(keys))
	for i, k := range keys {
		out[i].Key = k
	}
	// Keys are deleted directory by directory, each directory made durable
	// with one fsync after all its unlinks rather than one per key: a
	// cleanup's batch is mostly one folder (data/, _versions/), and a
	// directory fsync costs what a whole unlink-and-sync of one key did.
	groups := map[string][]int{}
	var order []string
	for i, k := range keys {
		if err := checkKey("delete", k); err != nil {
			out[i].Err = err
			continue
		}
		dir := path.Dir(k)
		if _, ok := groups[dir]; !ok {
			order = append(order, dir)
		}
		groups[dir] = append(groups[dir], i)
	}
	for _, dir := range order {
		if err := d.deleteInDir(ctx, keys, groups[dir], out); err != nil {
			return out, err
		}
	}
	return out, nil
}

// deleteInDir unlinks the keys at idx, which share one directory, and syncs
// that directory once. A key counts as deleted only once the sync is done:
// if it fails, every key unlinked in this directory reports it (deleting
// them again finds them gone, which is success). An ended context stops it
// before the next key (a cleanup that lost its claim must not go on
// deleting): what was unlinked is still synced, and the error is returned.
func (d *Driver) deleteInDir(ctx context.Context, keys []string, idx []int, out []storage.DeleteResult) error {
	if err := ctx.Err(); err != nil {
		return ctxError("delete-many", keys[idx[0]], err)
	}
	first := keys[idx[0]]
	dirSegs, _ := splitKey(first)
	c, err := d.walk("delete", first, dirSegs, false)
	if err != nil {
		if storage.KindOf(err) == storage.ErrNotFound {
			return nil // no directory: nothing to delete, each is a success
		}
		for _, i := range idx {
			out[i].Err = err
		}
		return nil
	}
	defer c.close()
	var unlinked []int
	var stopped error
	for _, i := range idx {
		k := keys[i]
		if err := ctx.Err(); err != nil {
			stopped = ctxError("delete-many", k, err)
			break
		}
		_, name := splitKey(k)
		unlock, err := d.lockKey(ctx, "delete", k)
		if err != nil {
			out[i].Err = err
			continue
		}
		kind, err := lstatAt(c.dir(), name)
		switch {
		case err != nil:
			out[i].Err = mapErr("delete", k, "", err)
		case kind == entSymlink:
			out[i].Err = symlinkError("delete", k, k)
		case kind != entFile:
			// Nothing there (or a folder): an unconditional delete of a
			// missing object succeeds.
		default:
			if err := unix.Unlinkat(c.dir(), name, 0); err != nil && err != unix.ENOENT {
				out[i].Err = mapErr("delete", k, "unlinking the object", err)
			} else if err == nil {
				unlinked = append(unlinked, i)
			}
		}
		unlock()
	}
	if len(unlinked) == 0 {
		return stopped
	}
	if err := fsyncDir(c.dir()); err != nil {
		for _, i := range unlinked {
			out[i].Err = mapErr("delete", keys[i], "fsync of the key's directory", err)
		}
		return stopped
	}
	if stopped == nil {
		c.prune()
	}
	return stopped
}
