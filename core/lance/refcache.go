package lance

import (
	"context"
	"sync"

	"github.com/retain-dev/retain/core/storage"
)

// RefCache remembers the tag and branch files read, each by its key and
// the version token its read returned. A read of a ref file whose listing
// shows the same token takes the remembered bytes instead of a request:
// every adapter's listing reports the object's own version, and every
// write makes a new one (conformance: ListAgreesWithStat, "a new version
// at every write"), so the same token is the same bytes. What changes is
// read; what did not costs nothing, however many pins the live checkpoints
// have. It also remembers the pinned commits that verified
// (VerifyPhysRefs), by their manifests' tokens. A long-lived process (the
// daemon) keeps one per store across its passes; a one-shot command needs
// none.
type RefCache struct {
	mu sync.Mutex
	m  map[string]cachedRef
	// commits: the refs verified (VerifyPhysRefs), by manifest key; each
	// carries its object's token and size.
	commits map[string]PhysRef
}

type cachedRef struct {
	body []byte
	info storage.Info
}

// maxCachedRefs bounds the memory (a few MiB a store; a fleet daemon keeps
// one cache per store): past it the cache starts over, and a pass reads
// what it needs again.
const maxCachedRefs = 1 << 15

// NewRefCache returns an empty cache.
func NewRefCache() *RefCache { return &RefCache{m: map[string]cachedRef{}} }

// lookup returns the bytes of the object listed as l, if remembered at
// the same version token. The size and modification time the listing
// shows must match the read's too: a token a filesystem builds from
// inode, times and size (localfs without its stamp) is then matched whole,
// and anything that differs is read again.
func (c *RefCache) lookup(store string, l storage.Info) ([]byte, storage.Info, bool) {
	if c == nil || l.Version == "" {
		return nil, storage.Info{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[store+"\x00"+l.Key]
	if !ok || e.info.Version != l.Version || int64(len(e.body)) != l.Size ||
		(!l.ModTime.IsZero() && !e.info.ModTime.IsZero() && !l.ModTime.Equal(e.info.ModTime)) {
		return nil, storage.Info{}, false
	}
	return e.body, e.info, true
}

func (c *RefCache) remember(store, key string, body []byte, info storage.Info) {
	if c == nil || info.Version == "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= maxCachedRefs {
		c.m = map[string]cachedRef{}
	}
	c.m[store+"\x00"+key] = cachedRef{body: body, info: info}
}

type refCacheKey struct{}

// WithRefCache returns ctx carrying c: every ref file read under ctx, by
// whichever package (reconcile, the reapers, cleanup planning), takes it.
// A context rather than an option on each of their APIs, as the authz
// gate rides one: the cache is a cost, never a decision.
func WithRefCache(ctx context.Context, c *RefCache) context.Context {
	return context.WithValue(ctx, refCacheKey{}, c)
}

// HasRefCache reports whether ctx carries a RefCache: a caller may then
// prefer one listing of a folder of refs, whose unchanged files cost
// nothing, to reading the few it needs one by one.
func HasRefCache(ctx context.Context) bool { return refCacheFrom(ctx) != nil }

func refCacheFrom(ctx context.Context) *RefCache {
	c, _ := ctx.Value(refCacheKey{}).(*RefCache)
	return c
}
