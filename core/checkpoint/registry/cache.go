package registry

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"

	"github.com/retain-dev/retain/core/internal/fanout"
	"github.com/retain-dev/retain/core/storage"
)

// Cache is what a long-lived process (the daemon) remembers of one
// store's registry across its commands, so that what did not change costs
// a listing instead of a get of each object:
//
//   - the Ref of each registry version read, by the version token its
//     read returned: the registry pins of live checkpoints (ReadRefs);
//     with hourly checkpoints kept a month, ~720 gets for every reconcile
//     and every metrics refresh. Only the Ref (number, size, digest) is
//     kept, never the bytes: a format-1 version is a whole snapshot, and
//     one per live checkpoint would make the memory quadratic.
//   - the segments of the segmented versions read (named by the digest of
//     their bytes, never rewritten), so a head read costs its version
//     object, one listing of the segments, and the segments that are new,
//     not every live checkpoint's rows object again.
//
// The trust is lance.RefCache's: every adapter's listing reports the
// object's own version token and every write makes a new one (conformance:
// ListAgreesWithStat, "a new version at every write"), so the same token,
// size and modification time are the same bytes. A version or segment
// deleted or rewritten since is read again and judged as it is now: a
// segment missing or damaged refuses the head as it does without the
// cache, so nothing (a commit, a registry cleanup) builds on it. A listing
// that fails costs the cache, never the read.
type Cache struct {
	mu       sync.Mutex
	m        map[string]cachedVersion
	segs     map[string]cachedSegment
	segBytes int
}

type cachedSegment struct {
	body []byte
	info storage.Info
}

type cachedVersion struct {
	ref  Ref
	info storage.Info
}

// maxCachedVersions bounds the memory of the refs (about 5 MiB a store at
// the bound), maxCachedSegmentBytes that of the segments (a head of ~1,500
// live checkpoints over 30 tables); past either they start over, and what
// a head needs is read again. A fleet daemon keeps one Cache a store.
const (
	maxCachedVersions     = 1 << 15
	maxCachedSegmentBytes = 16 << 20
)

// NewCache returns an empty cache.
func NewCache() *Cache { return &Cache{m: map[string]cachedVersion{}} }

// sameObject: listing l shows the object read as info, by the rule
// lookup applies (token and size; modification time where both have one).
func sameObject(l, info storage.Info) bool {
	return l.Version != "" && l.Version == info.Version && l.Size == info.Size &&
		(l.ModTime.IsZero() || info.ModTime.IsZero() || l.ModTime.Equal(info.ModTime))
}

func (c *Cache) segment(store, key string) (cachedSegment, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.segs[store+"\x00"+key]
	return e, ok
}

func (c *Cache) rememberSegment(store string, body []byte, info storage.Info) {
	if c == nil || info.Version == "" || int64(len(body)) != info.Size || len(body) > maxCachedSegmentBytes {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.segs == nil || c.segBytes+len(body) > maxCachedSegmentBytes {
		c.segs, c.segBytes = map[string]cachedSegment{}, 0
	}
	k := store + "\x00" + info.Key
	if old, ok := c.segs[k]; ok {
		c.segBytes -= len(old.body)
	}
	c.segs[k] = cachedSegment{body: body, info: info}
	c.segBytes += len(body)
}

// forgetUnlisted drops the remembered segments of store that listed no
// longer has (collected since): the memory follows the store's segments,
// not its history.
func (c *Cache) forgetUnlisted(store string, listed map[string]storage.Info) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, e := range c.segs {
		if s, key, _ := strings.Cut(k, "\x00"); s == store {
			if _, ok := listed[key]; !ok {
				delete(c.segs, k)
				c.segBytes -= len(e.body)
			}
		}
	}
}

func (c *Cache) lookup(store string, l storage.Info) (Ref, bool) {
	if c == nil {
		return Ref{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[store+"\x00"+l.Key]
	if !ok || e.ref.Size != l.Size || !sameObject(l, e.info) {
		return Ref{}, false
	}
	return e.ref, true
}

func (c *Cache) remember(store string, ref Ref, info storage.Info) {
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

type cacheKey struct{}

// WithCache returns ctx carrying c for every registry read under it. A
// context, as lance.WithRefCache: the cache is a cost, never a decision.
// One cache serves one store.
func WithCache(ctx context.Context, c *Cache) context.Context {
	return context.WithValue(ctx, cacheKey{}, c)
}

func cacheFrom(ctx context.Context) *Cache {
	c, _ := ctx.Value(cacheKey{}).(*Cache)
	return c
}

// ReadRefs returns the Ref of each version of vs, in order: ReadRef for
// each, side by side, where a version that is not stored has the zero Ref
// instead of storage.ErrNotFound. Any other failure of any version fails the
// call.
//
// With a Cache in ctx, on a store with ordered listing, the versions
// from the newest to the oldest of vs are listed first (newest first, so
// the listing starts at the newest wanted and stops past the oldest, and
// never takes more pages than there are versions to read), and a version
// listed at the token it was read at is answered from the cache. What is
// not listed, or listed at another token, is read as ReadRef reads it.
func (r *Registry) ReadRefs(ctx context.Context, vs []Version) ([]Ref, error) {
	cache, store := cacheFrom(ctx), r.store.Location().String()
	listed := map[Version]storage.Info{}
	if cache != nil && len(vs) > 0 && r.store.Capabilities().OrderedList {
		// A listing that fails costs the cache, not the read: every
		// version is then read, as without one.
		listed = r.listVersions(ctx, vs)
	}
	return fanout.Map(ctx, r.store.Parallelism(), len(vs), func(ctx context.Context, i int) (Ref, error) {
		if l, ok := listed[vs[i]]; ok {
			if ref, ok := cache.lookup(store, l); ok && ref.Version == vs[i] {
				return ref, nil
			}
		}
		ref, info, err := r.readRef(ctx, vs[i])
		if errors.Is(err, storage.ErrNotFound) {
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
func (r *Registry) listVersions(ctx context.Context, vs []Version) map[Version]storage.Info {
	lo, hi := slices.Min(vs), slices.Max(vs)
	out := map[Version]storage.Info{}
	opts := storage.ListOptions{Prefix: VersionsPrefix, StartAfter: VersionKey(hi + 1), PageSize: refsListPage}
	for pages := 0; pages < len(vs); pages++ {
		page, err := r.store.ListPage(ctx, opts)
		if err != nil {
			return nil
		}
		for _, o := range page.Objects {
			v, ok := ParseVersionKey(o.Key)
			if !ok {
				continue
			}
			if v < lo {
				return out
			}
			out[v] = o
		}
		if !page.More || len(page.Objects) == 0 {
			break
		}
		opts.StartAfter = page.Last()
	}
	return out
}

// listedSegments lists every stored segment with its listing info: the
// proof a remembered segment is still there. A listing that fails is nil
// (every segment is then read); one that succeeds also drops what the
// store no longer has from sh's cache.
func (r *Registry) listedSegments(ctx context.Context, sh sharedSegments) map[string]storage.Info {
	out := map[string]storage.Info{}
	opts := storage.ListOptions{Prefix: SegmentsPrefix}
	for {
		page, err := r.store.ListPage(ctx, opts)
		if err != nil {
			return nil
		}
		for _, o := range page.Objects {
			out[o.Key] = o
		}
		if !page.More || len(page.Objects) == 0 {
			sh.c.forgetUnlisted(sh.store, out)
			return out
		}
		opts.StartAfter = page.Last()
	}
}
