//go:build linux

package localfs

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/retain-dev/retain/core/storage"
)

// List returns one page of keys in byte order.
//
// The tree is walked in key order rather than collected and sorted: within a
// directory an entry's keys are contiguous, and sorting entries by name for
// files and name+"/" for directories orders them as their keys order (for
// names n and n+s, the directory n's keys compare '/' against s[0]). So
// "a-1" < "a.b" < "a/..." < "a0", and in a directory "b.c" < "b/" < "bc".
// Subtrees entirely at or before StartAfter are skipped without reading them
// and the walk stops after PageSize+1 keys.
//
// Temp files and the reserved directory are the adapter's own and are not
// listed; empty directories are not keys.
//
// A symlink (never followed) or a special file (fifo, socket, device) met
// within the listed range is refused with ErrPermissionDenied naming it
// (listRefusal), also when it is a directory on the prefix's own path. It is
// not silently left out: whoever decides from a listing — cleanup deciding
// which files no version references — would decide on a partial tree, and a
// symlinked dataset or partition is data retain can neither see nor manage
// (deleting through the link would delete outside the root). Entries outside
// the range (another prefix, at or before StartAfter, past the page) do not
// matter.
func (d *Driver) List(ctx context.Context, opts storage.ListOptions) (storage.ListPage, error) {
	const op = "list"
	if err := storage.ValidatePrefix(op, opts.Prefix); err != nil {
		return storage.ListPage{}, err
	}
	if opts.PageSize < 0 {
		return storage.ListPage{}, storage.Errorf(op, opts.Prefix, storage.ErrInvalidArgument, "negative page size %d", opts.PageSize)
	}
	size := opts.PageSize
	if size == 0 || size > maxListPage {
		size = maxListPage
	}
	leave, err := d.enter(ctx, op, opts.Prefix)
	if err != nil {
		return storage.ListPage{}, err
	}
	defer leave()

	// The prefix is a directory part (up to its last '/') and a name prefix
	// within that directory.
	cut := strings.LastIndexByte(opts.Prefix, '/') + 1
	dirPart, namePrefix := opts.Prefix[:cut], opts.Prefix[cut:]
	var segs []string
	if dirPart != "" {
		segs = strings.Split(strings.TrimSuffix(dirPart, "/"), "/")
		for i, s := range segs {
			if (i == 0 && s == reservedDir) || strings.HasPrefix(s, tmpPrefix) {
				return storage.ListPage{}, nil
			}
		}
	}
	// Nothing under the prefix can come after StartAfter... or before it.
	if opts.StartAfter != "" && opts.StartAfter >= opts.Prefix && !strings.HasPrefix(opts.StartAfter, opts.Prefix) {
		return storage.ListPage{}, nil
	}
	c, err := d.walk(op, opts.Prefix, segs, false)
	if err != nil {
		// No such directory (or a file or special file where a directory
		// would be): nothing is under the prefix.
		if storage.KindOf(err) == storage.ErrNotFound {
			return storage.ListPage{}, nil
		}
		// A symlink on the way: whatever it points to would be under the
		// prefix. Name it.
		if errors.Is(err, unix.ELOOP) {
			return storage.ListPage{}, listRefusal(opts.Prefix, d.symlinkOnPath(segs, dirPart), entSymlink)
		}
		return storage.ListPage{}, err
	}
	defer c.close()
	fd, err := unix.Openat(c.dir(), ".", openDirFlags, 0)
	if err != nil {
		return storage.ListPage{}, mapErr(op, opts.Prefix, "opening the directory to list", err)
	}
	w := &lister{ctx: ctx, root: d.root, prefix: opts.Prefix, after: opts.StartAfter, limit: size + 1}
	if err := w.walk(fd, dirPart, namePrefix); err != nil {
		return storage.ListPage{}, err
	}
	page := storage.ListPage{Objects: w.out}
	if len(w.out) > size {
		page.Objects, page.More = w.out[:size], true
	}
	return page, nil
}

type lister struct {
	ctx    context.Context
	root   string
	prefix string
	after  string
	limit  int
	out    []storage.Info
}

type listEnt struct {
	name string
	dir  bool
	sort string
	// refuse is entSymlink or entSpecial for an entry the listing refuses
	// (listRefusal) when it reaches it; entAbsent otherwise.
	refuse entryKind
}

// listRefusal refuses a listing of prefix that met a symlink (k
// entSymlink) or a special file at path (relative to the root). The key is
// path, so the error names what to fix; the message says why the listing
// does not just leave it out, and the next step.
func listRefusal(prefix, path string, k entryKind) *storage.Error {
	const partial = "the listing of %q refuses rather than leave it out (whatever is decided from the listing, such as which files cleanup deletes, would be decided on a partial tree): "
	if k == entSymlink {
		return storage.Errorf("list", path, storage.ErrPermissionDenied,
			"%q under the store root is a symbolic link; localfs never follows symlinks, and "+partial+
				"replace the link with the real folder, or point retain at the real location", path, prefix)
	}
	return storage.Errorf("list", path, storage.ErrPermissionDenied,
		"%q under the store root is not a regular file or directory (a fifo, socket or device); localfs never opens one, and "+partial+
			"move it out of the store", path, prefix)
}

// symlinkOnPath finds which directory of the prefix's path is the symlink
// walk met (walking again, one more segment at a time); dirPart itself if
// it is no longer found (replaced meanwhile).
func (d *Driver) symlinkOnPath(segs []string, dirPart string) string {
	for i := 1; i <= len(segs); i++ {
		c, err := d.walk("list", dirPart, segs[:i], false)
		if err != nil {
			if errors.Is(err, unix.ELOOP) {
				return strings.Join(segs[:i], "/")
			}
			break
		}
		c.close()
	}
	return strings.TrimSuffix(dirPart, "/")
}

// walk lists the directory fd (owned: closed on return), whose keys start
// with path ("" or ending in '/'), keeping only names starting with
// namePrefix.
func (w *lister) walk(fd int, path, namePrefix string) error {
	f := os.NewFile(uintptr(fd), filepath.Join(w.root, path))
	defer f.Close()
	if err := w.ctx.Err(); err != nil {
		return ctxError("list", w.prefix, err)
	}
	dirents, err := f.ReadDir(-1)
	if err != nil {
		return mapErr("list", w.prefix, "reading directory "+path, err)
	}
	ents := make([]listEnt, 0, len(dirents))
	for _, e := range dirents {
		n := e.Name()
		if !strings.HasPrefix(n, namePrefix) || strings.HasPrefix(n, tmpPrefix) || (path == "" && n == reservedDir) {
			continue
		}
		k := entSpecial
		switch t := e.Type(); {
		case t.IsDir():
			k = entDir
		case t.IsRegular():
			k = entFile
		case t&fs.ModeSymlink != 0:
			k = entSymlink
		case t&fs.ModeType == fs.ModeIrregular:
			// unknown type: classify without following
			lk, err := lstatAt(fd, n)
			if err != nil {
				return mapErr("list", w.prefix, "examining "+path+n, err)
			}
			if lk == entAbsent {
				continue // removed meanwhile
			}
			k = lk
		}
		switch k {
		case entDir:
			ents = append(ents, listEnt{name: n, dir: true, sort: n + "/"})
		case entFile:
			ents = append(ents, listEnt{name: n, sort: n})
		default:
			// Sorted where its first key would be: a symlink could stand
			// for the object n or for the keys under n/, a special file
			// for n.
			ents = append(ents, listEnt{name: n, sort: n, refuse: k})
		}
	}
	sort.Slice(ents, func(i, j int) bool { return ents[i].sort < ents[j].sort })
	for _, e := range ents {
		if len(w.out) >= w.limit {
			return nil
		}
		full := path + e.sort
		if e.refuse != entAbsent {
			// Skipped only when every key it could stand for is at or
			// before StartAfter (an earlier page went past it).
			if e.refuse == entSymlink && (full+"/" > w.after || strings.HasPrefix(w.after, full+"/")) ||
				e.refuse != entSymlink && full > w.after {
				return listRefusal(w.prefix, full, e.refuse)
			}
			continue
		}
		if !e.dir {
			if full <= w.after {
				continue
			}
			info, err := statObject("list", full, fd, e.name)
			switch {
			case err == nil:
				w.out = append(w.out, info)
			case errors.Is(err, unix.ELOOP):
				// replaced by a symlink meanwhile
				return listRefusal(w.prefix, full, entSymlink)
			case storage.KindOf(err) == storage.ErrNotFound:
				// removed (or replaced by a directory) meanwhile
			default:
				return err
			}
			continue
		}
		// Every key in the directory starts with full; skip it when all of
		// them are at or before StartAfter.
		if full <= w.after && !strings.HasPrefix(w.after, full) {
			continue
		}
		cfd, err := unix.Openat(fd, e.name, openDirFlags, 0)
		switch err {
		case nil:
		case unix.ELOOP:
			// replaced by a symlink meanwhile
			return listRefusal(w.prefix, strings.TrimSuffix(full, "/"), entSymlink)
		case unix.ENOENT, unix.ENOTDIR:
			continue // removed or replaced by a file meanwhile
		default:
			return mapErr("list", w.prefix, "opening directory "+full, err)
		}
		if err := w.walk(cfd, full, ""); err != nil {
			return err
		}
	}
	return nil
}
