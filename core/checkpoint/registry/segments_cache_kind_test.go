package registry

import (
	"bytes"
	"errors"
	"testing"

	"github.com/retain-dev/retain/core/storage"
)

// A version object naming, as a bucket, a segment that is a rows object
// (digest and size right, the kind wrong) is ErrCorruptRegistry whether or
// not the handle reading it has that segment cached: recover's walk down
// the history reads every version with one handle and skips only what is
// ErrCorruptRegistry, so a cache hit must not change the error's kind.
func TestMisnamedSegmentIsCorruptFromTheCacheToo(t *testing.T) {
	withSpill(t, 0)
	s, d := memStore(t)
	reg := Open(s, Options{Scope: storage.ScopeHost})
	draft := newDraft(t)
	reserveT(t, draft, "team/a")
	if _, err := reg.Commit(bg, 0, draft); err != nil {
		t.Fatal(err)
	}
	s1, err := reg.Read(bg, 1)
	if err != nil {
		t.Fatal(err)
	}
	var rowsKey string
	for _, p := range s1.stored.rows {
		rowsKey = p.key
	}
	rows := readRaw(t, d, rowsKey)
	if !bytes.Contains(rows, []byte(`"kind":"rows"`)) {
		t.Fatalf("%s is not a rows object", rowsKey)
	}
	// Version 2: a version object whose only bucket is that rows object.
	link, err := decodeSegmentedLink(VersionKey(1), readRaw(t, d, VersionKey(1)), 1)
	if err != nil {
		t.Fatal(err)
	}
	link.Version, link.Prev = 2, DigestOf(readRaw(t, d, VersionKey(1)))
	link.Buckets = []bucketRef{{Bucket: link.Buckets[0].Bucket, segRef: segRef{SHA256: sumOf(rows), Size: int64(len(rows))}}}
	body, _ := marshalLine(link)
	putRaw(t, d, VersionKey(2), body)

	for _, c := range []struct {
		name string
		reg  *Registry
	}{{"fresh handle", Open(s, Options{})}, {"handle that cached the rows object", reg}} {
		_, err := c.reg.Read(bg, 2)
		if !errors.Is(err, ErrCorruptRegistry) {
			t.Errorf("%s: read of version 2: %v; want ErrCorruptRegistry", c.name, err)
		}
	}
}
