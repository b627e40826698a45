package lance

import (
	"context"

	"github.com/retain-dev/retain/core/internal/fanout"
	"github.com/retain-dev/retain/core/storage"
)

// VerifyPhysRefs is VerifyPhysRef for each of refs (the commits live
// checkpoints pin in this dataset), side by side: gots[i] and errs[i] are
// what VerifyPhysRef(refs[i]) returns.
//
// Under a RefCache (ctx) and with two refs or more, _versions/ is listed
// first (never more pages than refs), and a ref whose manifest the listing
// shows at the version token it was verified at before is answered from
// memory: the same token is the same bytes (RefCache). Only a ref that
// verified is remembered, and only under the name a read would try first
// of those listed; a mismatch, a missing manifest, or a listing that did
// not finish is read again every time. So the commits pinned by a
// daemon's live checkpoints cost a listing per table and branch, not a
// manifest read each.
func (d *Dataset) VerifyPhysRefs(ctx context.Context, refs []PhysRef) (gots []PhysRef, errs []error) {
	cache, store := refCacheFrom(ctx), d.Store.Location().String()
	var listed map[string]storage.Info
	if cache != nil && len(refs) >= 2 {
		listed = d.listManifests(ctx, len(refs))
	}
	gots, errs = make([]PhysRef, len(refs)), make([]error, len(refs))
	done := make([]bool, len(refs))
	err := fanout.Each(ctx, d.Store.Parallelism(), len(refs), func(ctx context.Context, i int) error {
		ref := refs[i]
		defer func() { done[i] = true }()
		if listed != nil {
			for _, k := range d.manifestKeys(ref) {
				l, ok := listed[k]
				if !ok {
					continue
				}
				if got, ok := cache.verified(store, l); ok && ref.Matches(got) {
					gots[i] = got
					return nil
				}
				break
			}
		}
		gots[i], errs[i] = d.VerifyPhysRef(ctx, ref)
		if errs[i] == nil {
			cache.rememberVerified(store, gots[i])
		}
		return nil
	})
	for i := range refs {
		if !done[i] && errs[i] == nil {
			// Not checked (the context ended): never verified.
			errs[i] = err
			if errs[i] == nil {
				errs[i] = context.Canceled
			}
		}
	}
	return gots, errs
}

// listManifests lists _versions/ whole, at most maxPages pages; nil when
// that did not finish or failed (then every ref is read).
func (d *Dataset) listManifests(ctx context.Context, maxPages int) map[string]storage.Info {
	out := map[string]storage.Info{}
	opts := storage.ListOptions{Prefix: d.Key(versionsDir) + "/"}
	for pages := 0; pages < maxPages; pages++ {
		page, err := d.Store.ListPage(ctx, opts)
		if err != nil {
			return nil
		}
		for _, o := range page.Objects {
			out[o.Key] = o
		}
		if !page.More || len(page.Objects) == 0 {
			return out
		}
		opts.StartAfter = page.Last()
	}
	return nil
}

// verified returns the ref verified at the object listed as l, if
// remembered at the same token and size.
func (c *RefCache) verified(store string, l storage.Info) (PhysRef, bool) {
	if c == nil || l.Version == "" {
		return PhysRef{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	got, ok := c.commits[store+"\x00"+l.Key]
	if !ok || got.ObjectVersion != l.Version || got.Size != l.Size {
		return PhysRef{}, false
	}
	return got, true
}

func (c *RefCache) rememberVerified(store string, got PhysRef) {
	if c == nil || got.ObjectVersion == "" || got.Key == "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.commits == nil || len(c.commits) >= maxCachedRefs {
		c.commits = map[string]PhysRef{}
	}
	c.commits[store+"\x00"+got.Key] = got
}
