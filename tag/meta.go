// Package tag makes Lance tags safe references for agent memory: tags
// with metadata whose create is create-if-absent and whose update and
// delete are compare-and-swap on the tag object, refused on a branch that
// is being deleted. Every file it writes is one real Lance reads; every
// file real Lance writes it reads. The metadata helpers here (ParseMeta,
// Filter, lifecycle.UserMeta) serve branches too.
package tag

import (
	"fmt"
	"sort"
	"strings"

	"github.com/retain-dev/retain/branch/lifecycle"
	"github.com/retain-dev/retain/sdk/core"
)

// ParseMeta parses "k=v" pairs (--meta) into a map. Keys are non-empty,
// unique and not reserved; values may be empty and may contain '='.
func ParseMeta(kvs []string) (map[string]string, error) {
	m := map[string]string{}
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		switch {
		case !ok || k == "":
			return nil, core.Errorf("meta", kv, core.ErrInvalidArgument, "metadata is written key=value, got %s", core.Quote(kv))
		case strings.HasPrefix(k, lifecycle.ReservedPrefix):
			return nil, core.Errorf("meta", kv, core.ErrInvalidArgument, "metadata keys beginning %q are reserved for retain", lifecycle.ReservedPrefix)
		}
		if _, dup := m[k]; dup {
			return nil, core.Errorf("meta", kv, core.ErrInvalidArgument, "metadata key %q given twice", k)
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
			return nil, core.Errorf("filter", kv, core.ErrInvalidArgument, "a filter is written key=value, got %s", core.Quote(kv))
		}
		if old, dup := f[k]; dup && old != v {
			return nil, core.Errorf("filter", kv, core.ErrInvalidArgument, "filter key %q given twice with different values: nothing can match", k)
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
