package registry

import (
	"context"
	"errors"
	"slices"
	"sync"

	"github.com/retain-dev/retain/internal/fanout"
	"github.com/retain-dev/retain/sdk/core"
)

// RefCache remembers the Ref of each registry version read, by the
// version token its read returned. A long-lived caller (the daemon) keeps
// one per store across its passes, so that the registry pins of live
// checkpoints that did not change cost one listing of their versions per
// reader instead of one get each: with hourly checkpoints kept a month,
// ~720 gets for every reconcile and every metrics refresh. Only the Ref
// (number, size, digest) is kept, never the bytes: a format-1 version is a
// whole snapshot, and one per live checkpoint would make the memory
// quadratic.
//
// The trust is lance.RefCache's: every adapter's listing reports the
// object's own version token and every write makes a new one (conformance:
// ListAgreesWithStat, "a new version at every write"), so the same token,
// size and modification time are the same bytes. A version deleted or
// rewritten since is read again, and judged as it is now.
type RefCache struct {
	mu sync.Mutex
	m  map[string]cachedVersion
}

type cachedVersion struct {
	ref  Ref
	info core.Info
}

// maxCachedVersions bounds the memory (about 5 MiB a store at the bound);
// past it the cache starts over.
const maxCachedVersions = 1 << 15

// NewRefCache returns an empty cache.
func NewRefCache() *RefCache { return &RefCache{m: map[string]cachedVersion{}} }

func (c *RefCache) lookup(store string, l core.Info) (Ref, bool) {
	if c == nil || l.Version == "" {
		return Ref{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[store+"\x00"+l.Key]
	if !ok || e.info.Version != l.Version || e.ref.Size != l.Size ||
		(!l.ModTime.IsZero() && !e.info.ModTime.IsZero() && !l.ModTime.Equal(e.info.ModTime)) {
		return Ref{}, false
	}
	return e.ref, true
}

func (c *RefCache) remember(store string, ref Ref, info core.Info) {
	if c == nil || info.Version == "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= maxCachedVersions {
		c.m = map[string]cachedVersion{}
	}
	c.m[store+"\x00"+info.Key] = cachedVersion{ref: ref, info: info}
}

type refCacheKey struct{}

// WithRefCache returns ctx carrying c for every ReadRefs under it. A
// context, as lance.WithRefCache: the cache is a cost, never a decision.
func WithRefCache(ctx context.Context, c *RefCache) context.Context {
	return context.WithValue(ctx, refCacheKey{}, c)
}

func refCacheFrom(ctx context.Context) *RefCache {
	c, _ := ctx.Value(refCacheKey{}).(*RefCache)
	return c
}

// ReadRefs returns the Ref of each version of vs, in order: ReadRef for
// each, side by side, where a version that is not stored has the zero Ref
// instead of core.ErrNotFound. Any other failure of any version fails the
// call.
//
// With a RefCache in ctx, on a store with ordered listing, the versions
// from the newest to the oldest of vs are listed first (newest first, so
// the listing starts at the newest wanted and stops past the oldest, and
// never takes more pages than there are versions to read), and a version
// listed at the token it was read at is answered from the cache. What is
// not listed, or listed at another token, is read as ReadRef reads it.
func (r *Registry) ReadRefs(ctx context.Context, vs []Version) ([]Ref, error) {
	cache, store := refCacheFrom(ctx), r.store.Location().String()
	listed := map[Version]core.Info{}
	if cache != nil && len(vs) > 0 && r.store.Capabilities().OrderedList {
		var err error
		if listed, err = r.listVersions(ctx, vs); err != nil {
			return nil, err
		}
	}
	return fanout.Map(ctx, r.store.Parallelism(), len(vs), func(ctx context.Context, i int) (Ref, error) {
		if l, ok := listed[vs[i]]; ok {
			if ref, ok := cache.lookup(store, l); ok && ref.Version == vs[i] {
				return ref, nil
			}
		}
		ref, info, err := r.readRef(ctx, vs[i])
		if errors.Is(err, core.ErrNotFound) {
			return Ref{}, nil
		}
		if err == nil {
			cache.remember(store, ref, info)
		}
		return ref, err
	})
}

// refsListPage is listVersions' page size: 0, the adapter's largest.
// Tests make it small.
var refsListPage = 0

// listVersions lists the stored versions between the newest and the
// oldest of vs, with their listing infos.
func (r *Registry) listVersions(ctx context.Context, vs []Version) (map[Version]core.Info, error) {
	lo, hi := slices.Min(vs), slices.Max(vs)
	out := map[Version]core.Info{}
	opts := core.ListOptions{Prefix: VersionsPrefix, StartAfter: VersionKey(hi + 1), PageSize: refsListPage}
	for pages := 0; pages < len(vs); pages++ {
		page, err := r.store.ListPage(ctx, opts)
		if err != nil {
			return nil, err
		}
		for _, o := range page.Objects {
			v, ok := ParseVersionKey(o.Key)
			if !ok {
				continue
			}
			if v < lo {
				return out, nil
			}
			out[v] = o
		}
		if !page.More || len(page.Objects) == 0 {
			break
		}
		opts.StartAfter = page.Last()
	}
	return out, nil
}
