package storage

import (
	"context"
	"strings"
)

// listNativeLevel is one page of a level from a driver that declares
// ListDelimiter, checked like any listing: objects and folders under the
// prefix, in strictly increasing order together, after StartAfter (and
// outside it, when it is a folder), objects with no '/' after the prefix,
// folders with exactly one, at the end.
func (s *Store) listNativeLevel(ctx context.Context, opts ListOptions) (ListPage, error) {
	done, err := s.slot(ctx, "list", opts.Prefix)
	if err != nil {
		return ListPage{}, err
	}
	page, err := s.d.List(ctx, opts)
	done()
	if err != nil {
		return ListPage{}, shape("list", opts.Prefix, err)
	}
	lie := func(format string, args ...any) (ListPage, error) {
		return ListPage{}, s.lie("list", opts.Prefix, format, args...)
	}
	if opts.PageSize > 0 && len(page.Objects)+len(page.Folders) > opts.PageSize {
		return lie("returned more than the page size %d", opts.PageSize)
	}
	prev := opts.StartAfter
	oi, fi := 0, 0
	for oi < len(page.Objects) || fi < len(page.Folders) {
		var e string
		folder := fi < len(page.Folders) && (oi == len(page.Objects) || page.Folders[fi] < page.Objects[oi].Key)
		if folder {
			e, fi = page.Folders[fi], fi+1
		} else {
			e, oi = page.Objects[oi].Key, oi+1
		}
		rest, under := strings.CutPrefix(e, opts.Prefix)
		switch {
		case !under || rest == "":
			return lie("returned %q outside the prefix", e)
		case folder && strings.Index(rest, Delimiter) != len(rest)-1:
			return lie("returned folder %q that is not one level below the prefix", e)
		case !folder && strings.Contains(rest, Delimiter):
			return lie("returned key %q below a folder with a delimiter", e)
		case prev != "" && e <= prev:
			return lie("returned %q after %q: not in strictly increasing order", e, prev)
		case strings.HasSuffix(opts.StartAfter, Delimiter) && strings.HasPrefix(e, opts.StartAfter):
			return lie("returned %q under the folder %q it was to continue after", e, opts.StartAfter)
		}
		prev = e
	}
	if page.More && len(page.Objects)+len(page.Folders) == 0 {
		return lie("returned an empty page that claims more")
	}
	return page, nil
}

// listLevel lists a level of a store whose driver has no delimiter: a
// skip-scan, one request per entry, each asking for the first key after
// the entry before it (after every key under it, for a folder).
func (s *Store) listLevel(ctx context.Context, opts ListOptions) (ListPage, error) {
	size := opts.PageSize
	if size <= 0 {
		size = 1000
	}
	var page ListPage
	after := opts.StartAfter
	if strings.HasSuffix(after, Delimiter) {
		after = AfterFolder(after)
	}
	for len(page.Objects)+len(page.Folders) < size {
		p, err := s.ListPage(ctx, ListOptions{Prefix: opts.Prefix, StartAfter: after, PageSize: 1})
		if err != nil {
			return ListPage{}, err
		}
		if len(p.Objects) == 0 {
			return page, nil // ListPage refuses a page of nothing that claims more
		}
		o := p.Objects[0]
		rest := strings.TrimPrefix(o.Key, opts.Prefix)
		i := strings.Index(rest, Delimiter)
		if i < 0 {
			page.Objects = append(page.Objects, o)
			after = o.Key
			if !p.More {
				return page, nil
			}
			continue
		}
		folder := opts.Prefix + rest[:i+1]
		if n := len(page.Folders); n > 0 && page.Folders[n-1] == folder || folder == opts.StartAfter {
			after += "\U0010FFFF" // a key that sorts after AfterFolder: still the same folder
		} else {
			page.Folders = append(page.Folders, folder)
			after = AfterFolder(folder)
		}
		if !p.More {
			return page, nil
		}
	}
	page.More = true
	return page, nil
}
