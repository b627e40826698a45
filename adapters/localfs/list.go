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

	"github.com/retain-dev/retain/core"
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
// Temp files, the reserved directory, symlinks (never followed) and
// anything that is not a regular file are not listed; empty directories are
// not keys.
func (d *Driver) List(ctx context.Context, opts core.ListOptions) (core.ListPage, error) {
	const op = "list"
	if err := core.ValidatePrefix(op, opts.Prefix); err != nil {
		return core.ListPage{}, err
	}
	if opts.PageSize < 0 {
		return core.ListPage{}, core.Errorf(op, opts.Prefix, core.ErrInvalidArgument, "negative page size %d", opts.PageSize)
	}
	size := opts.PageSize
	if size == 0 || size > maxListPage {
		size = maxListPage
	}
	leave, err := d.enter(ctx, op, opts.Prefix)
	if err != nil {
		return core.ListPage{}, err
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
				return core.ListPage{}, nil
			}
		}
	}
	// Nothing under the prefix can come after StartAfter... or before it.
	if opts.StartAfter != "" && opts.StartAfter >= opts.Prefix && !strings.HasPrefix(opts.StartAfter, opts.Prefix) {
		return core.ListPage{}, nil
	}
	c, err := d.walk(op, opts.Prefix, segs, false)
	if err != nil {
		// No such directory, or a symlink on the way: nothing is listed.
		if core.KindOf(err) == core.ErrNotFound || errors.Is(err, unix.ELOOP) {
			return core.ListPage{}, nil
		}
		return core.ListPage{}, err
	}
	defer c.close()
	fd, err := unix.Openat(c.dir(), ".", openDirFlags, 0)
	if err != nil {
		return core.ListPage{}, mapErr(op, opts.Prefix, "opening the directory to list", err)
	}
	w := &lister{ctx: ctx, root: d.root, prefix: opts.Prefix, after: opts.StartAfter, limit: size + 1}
	if err := w.walk(fd, dirPart, namePrefix); err != nil {
		return core.ListPage{}, err
	}
	page := core.ListPage{Objects: w.out}
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
	out    []core.Info
}

type listEnt struct {
	name string
	dir  bool
	sort string
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
		switch t := e.Type(); {
		case t.IsDir():
			ents = append(ents, listEnt{name: n, dir: true, sort: n + "/"})
		case t.IsRegular():
			ents = append(ents, listEnt{name: n, sort: n})
		case t&fs.ModeType == fs.ModeIrregular:
			// unknown type: classify without following
			if k, err := lstatAt(fd, n); err == nil {
				switch k {
				case entDir:
					ents = append(ents, listEnt{name: n, dir: true, sort: n + "/"})
				case entFile:
					ents = append(ents, listEnt{name: n, sort: n})
				}
			}
		}
	}
	sort.Slice(ents, func(i, j int) bool { return ents[i].sort < ents[j].sort })
	for _, e := range ents {
		if len(w.out) >= w.limit {
			return nil
		}
		full := path + e.sort
		if !e.dir {
			if full <= w.after {
				continue
			}
			info, err := statObject("list", full, fd, e.name)
			switch {
			case err == nil:
				w.out = append(w.out, info)
			case core.KindOf(err) == core.ErrNotFound, errors.Is(err, unix.ELOOP):
				// removed or replaced by a symlink meanwhile
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
		case unix.ENOENT, unix.ELOOP, unix.ENOTDIR:
			continue // removed or replaced meanwhile
		default:
			return mapErr("list", w.prefix, "opening directory "+full, err)
		}
		if err := w.walk(cfd, full, ""); err != nil {
			return err
		}
	}
	return nil
}
