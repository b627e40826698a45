package azure

import (
	"context"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/retain-dev/retain/core/storage"
)

// List returns one page of keys under opts.Prefix after opts.StartAfter.
//
// Azure lists in name order from a prefix and an opaque continuation
// marker; it has no start-after. A page that continues one this driver
// returned (StartAfter = its last key) resumes from the marker cached for
// that key; any other StartAfter lists from the start of the prefix and
// skips keys up to it: correct, slower. Keys at or before StartAfter are
// dropped on every path, so a marker from a stale cache entry cannot
// return them again.
func (d *Driver) List(ctx context.Context, opts storage.ListOptions) (storage.ListPage, error) {
	const op = "list"
	if err := storage.ValidatePrefix(op, opts.Prefix); err != nil {
		return storage.ListPage{}, err
	}
	if opts.PageSize < 0 {
		return storage.ListPage{}, storage.Errorf(op, opts.Prefix, storage.ErrInvalidArgument, "negative page size %d", opts.PageSize)
	}
	if err := d.enter(ctx, op, opts.Prefix); err != nil {
		return storage.ListPage{}, err
	}
	size := opts.PageSize
	if size == 0 || size > maxListPage {
		size = maxListPage
	}
	prefix := d.prefix + opts.Prefix
	after := ""
	if opts.StartAfter != "" {
		if opts.StartAfter > opts.Prefix && !strings.HasPrefix(opts.StartAfter, opts.Prefix) {
			// Every key under the prefix sorts before StartAfter.
			return storage.ListPage{}, nil
		}
		after = d.prefix + opts.StartAfter
	}
	if opts.Delimiter != "" {
		if opts.Delimiter != storage.Delimiter {
			return storage.ListPage{}, storage.Errorf(op, opts.Prefix, storage.ErrInvalidArgument, "delimiter %q: only %q is supported", opts.Delimiter, storage.Delimiter)
		}
		return d.listLevel(ctx, opts, prefix, after, size)
	}
	var marker *string
	if after != "" {
		if m, ok := d.markers.get(markerKey{prefix, after}); ok {
			marker = to.Ptr(m)
		}
	}
	var page storage.ListPage
	for {
		lo := &container.ListBlobsFlatOptions{MaxResults: to.Ptr(int32(size - len(page.Objects))), Marker: marker}
		if prefix != "" {
			lo.Prefix = to.Ptr(prefix)
		}
		resp, err := d.cc.NewListBlobsFlatPager(lo).NextPage(ctx)
		if err != nil {
			return storage.ListPage{}, d.mapErr(op, opts.Prefix, err)
		}
		var last string
		for _, it := range resp.Segment.BlobItems {
			if it == nil || it.Name == nil {
				continue
			}
			name := *it.Name
			last = name
			if after != "" && name <= after {
				continue
			}
			if !strings.HasPrefix(name, prefix) {
				return storage.ListPage{}, storage.Errorf(op, opts.Prefix, storage.ErrUnknown, "the endpoint listed blob %q outside the prefix %q", name, prefix)
			}
			info := storage.Info{Key: strings.TrimPrefix(name, d.prefix)}
			if p := it.Properties; p != nil {
				info.Size, info.Version, info.ModTime = sizeOf(p.ContentLength), version(p.ETag), timeOf(p.LastModified)
			}
			page.Objects = append(page.Objects, info)
		}
		next := ""
		if resp.NextMarker != nil {
			next = *resp.NextMarker
		}
		if next == "" {
			return page, nil
		}
		if len(page.Objects) >= size {
			page.More = true
			// The page ends with the last blob of this response, so the
			// marker continues exactly after its last key.
			if last != "" {
				d.markers.put(markerKey{prefix, last}, next)
			}
			return page, nil
		}
		marker = to.Ptr(next)
	}
}

// listLevel is List of one level (ListBlobsHierarchy with the delimiter):
// blobs and blob prefixes of the level after after, through the same
// marker cache, keyed apart from flat listings. Every entry at or before
// after (and, for a folder, the folder itself) is dropped on every path.
func (d *Driver) listLevel(ctx context.Context, opts storage.ListOptions, prefix, after string, size int) (storage.ListPage, error) {
	const op = "list"
	cacheKey := func(last string) markerKey { return markerKey{prefix + "\x00level", last} }
	var marker *string
	if after != "" {
		if m, ok := d.markers.get(cacheKey(after)); ok {
			marker = to.Ptr(m)
		}
	}
	var page storage.ListPage
	entries := func() int { return len(page.Objects) + len(page.Folders) }
	for {
		lo := &container.ListBlobsHierarchyOptions{MaxResults: to.Ptr(int32(size - entries())), Marker: marker}
		if prefix != "" {
			lo.Prefix = to.Ptr(prefix)
		}
		resp, err := d.cc.NewListBlobsHierarchyPager(storage.Delimiter, lo).NextPage(ctx)
		if err != nil {
			return storage.ListPage{}, d.mapErr(op, opts.Prefix, err)
		}
		last := ""
		for _, bp := range resp.Segment.BlobPrefixes {
			if bp == nil || bp.Name == nil {
				continue
			}
			name := *bp.Name
			last = max(last, name)
			if after != "" && name <= after {
				continue
			}
			if !strings.HasPrefix(name, prefix) {
				return storage.ListPage{}, storage.Errorf(op, opts.Prefix, storage.ErrUnknown, "the endpoint listed prefix %q outside the prefix %q", name, prefix)
			}
			page.Folders = append(page.Folders, strings.TrimPrefix(name, d.prefix))
		}
		for _, it := range resp.Segment.BlobItems {
			if it == nil || it.Name == nil {
				continue
			}
			name := *it.Name
			last = max(last, name)
			if after != "" && name <= after {
				continue
			}
			if !strings.HasPrefix(name, prefix) {
				return storage.ListPage{}, storage.Errorf(op, opts.Prefix, storage.ErrUnknown, "the endpoint listed blob %q outside the prefix %q", name, prefix)
			}
			info := storage.Info{Key: strings.TrimPrefix(name, d.prefix)}
			if p := it.Properties; p != nil {
				info.Size, info.Version, info.ModTime = sizeOf(p.ContentLength), version(p.ETag), timeOf(p.LastModified)
			}
			page.Objects = append(page.Objects, info)
		}
		next := ""
		if resp.NextMarker != nil {
			next = *resp.NextMarker
		}
		if entries() > size {
			// The endpoint did not count its prefixes against the page
			// size: keep the first size entries; the next page starts after
			// the last kept one (no marker for it: it lists from the start
			// and skips, correct and slower).
			return storage.ClampLevel(page, size), nil
		}
		if next == "" {
			return page, nil
		}
		if entries() >= size {
			page.More = true
			if last != "" {
				d.markers.put(cacheKey(last), next)
			}
			return page, nil
		}
		marker = to.Ptr(next)
	}
}
