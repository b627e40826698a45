// Package refmeta is the metadata retain keeps on refs, tags and branches
// alike: user metadata parsed from --meta, filters from --filter, and the
// prefix of the keys retain reserves for itself (the branch lifecycle).
package refmeta

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/retain-dev/retain/core/storage"
)

// ReservedPrefix starts the metadata keys retain keeps for itself (the
// branch lifecycle). User metadata on tags and branches may not use it.
const ReservedPrefix = "retain."

// MetaExpires is the reserved key of a ref's expiry (RFC 3339, UTC): the
// daemon removes a tag past it (tag.ReapExpired).
const MetaExpires = ReservedPrefix + "expires"

// Expiry reads meta's expiry: ok is false without one; a value that does
// not parse is an error (and such a ref is never removed).
func Expiry(meta map[string]string) (at time.Time, ok bool, err error) {
	v, ok := meta[MetaExpires]
	if !ok {
		return time.Time{}, false, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, true, fmt.Errorf("%s is %q, not a time", MetaExpires, v)
	}
	return t.UTC(), true, nil
}

// DefaultExpiryMargin is how far past an expiry (a tag's, a branch's, a
// reader lease's) a reaper's clock must be before it removes the ref: the
// clock skew expiries tolerate.
const DefaultExpiryMargin = 5 * time.Minute

// ExpiryClock is a reaper's clock and margin: now (nil: time.Now) in UTC,
// and margin, or DefaultExpiryMargin when it is not positive. Every reaper
// judges by it, so a lease, a tag and a branch expire alike.
func ExpiryClock(now func() time.Time, margin time.Duration) (time.Time, time.Duration) {
	if margin <= 0 {
		margin = DefaultExpiryMargin
	}
	if now == nil {
		return time.Now().UTC(), margin
	}
	return now().UTC(), margin
}

// FormatExpiry is how an expiry is written.
func FormatExpiry(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// User returns meta without the reserved keys.
func User(meta map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range meta {
		if !strings.HasPrefix(k, ReservedPrefix) {
			out[k] = v
		}
	}
	return out
}

// Parse parses "k=v" pairs (--meta) into a map. Keys are non-empty,
// unique and not reserved; values may be empty and may contain '='.
func Parse(kvs []string) (map[string]string, error) {
	m := map[string]string{}
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		switch {
		case !ok || k == "":
			return nil, storage.Errorf("meta", kv, storage.ErrInvalidArgument, "metadata is written key=value, got %s", storage.Quote(kv))
		case strings.HasPrefix(k, ReservedPrefix):
			return nil, storage.Errorf("meta", kv, storage.ErrInvalidArgument, "metadata keys beginning %q are reserved for retain", ReservedPrefix)
		}
		if _, dup := m[k]; dup {
			return nil, storage.Errorf("meta", kv, storage.ErrInvalidArgument, "metadata key %q given twice", k)
		}
		m[k] = v
	}
	return m, nil
}

// Filter selects refs by metadata: every pair must match exactly.
type Filter map[string]string

// ParseFilter parses "k=v" pairs (--filter). Reserved keys may be
// filtered on.
func ParseFilter(kvs []string) (Filter, error) {
	f := Filter{}
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, storage.Errorf("filter", kv, storage.ErrInvalidArgument, "a filter is written key=value, got %s", storage.Quote(kv))
		}
		if old, dup := f[k]; dup && old != v {
			return nil, storage.Errorf("filter", kv, storage.ErrInvalidArgument, "filter key %q given twice with different values: nothing can match", k)
		}
		f[k] = v
	}
	return f, nil
}

// Match reports whether meta carries every pair of f.
func (f Filter) Match(meta map[string]string) bool {
	for k, v := range f {
		if got, ok := meta[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// String is "k=v, ..." sorted by key.
func (f Filter) String() string {
	keys := make([]string, 0, len(f))
	for k := range f {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s=%s", k, f[k])
	}
	return b.String()
}
