package conformance

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/retain-dev/retain/core/storage"
)

// testListAgreesWithStat: the version and size a listing reports for a key
// are what Stat and Get report for it. Retention trusts listed versions
// (a head read once is the same object when its listed token is the same),
// so a listing that reports another token than the object's own makes
// every such check wrong.
func testListAgreesWithStat(t T, s *storage.Store) {
	if !s.Capabilities().ListAfterWrite {
		t.Skip("adapter does not declare list-after-write: a listing right after the writes may lag them")
	}
	ctx := ctxT(t)
	// Plain writes, an overwrite, and each conditional write the adapter
	// has: every way an object can come to be.
	mustPut(t, s, "la/plain", []byte("plain"), storage.PutOptions{})
	mustPut(t, s, "la/empty", nil, storage.PutOptions{})
	mustPut(t, s, "la/rewritten", []byte("first"), storage.PutOptions{})
	mustPut(t, s, "la/rewritten", []byte("second, longer"), storage.PutOptions{})
	if c, _ := s.Capabilities().Of(storage.FeatureCreateIfAbsent); c.Level != storage.LevelNone {
		mustPut(t, s, "la/created", []byte("created"), storage.PutOptions{Mode: storage.PutCreateIfAbsent})
	}
	if c, _ := s.Capabilities().Of(storage.FeatureReplaceIfVersion); c.Level != storage.LevelNone {
		v := mustPut(t, s, "la/replaced", []byte("one"), storage.PutOptions{})
		mustPut(t, s, "la/replaced", []byte("two!"), storage.PutOptions{Mode: storage.PutReplaceIfVersion, IfVersion: v.Version})
	}
	mustPut(t, s, "la/big", bytes.Repeat([]byte("z"), 300<<10), storage.PutOptions{})
	listed, err := s.List(ctx, "la/", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(listed) < 5 {
		t.Fatalf("listed %d objects under la/, wrote at least 5: %s", len(listed), keysOf(listed))
	}
	var bad []string
	for _, o := range listed {
		st, err := s.Stat(ctx, o.Key)
		if err != nil {
			t.Fatalf("stat of listed %q: %v", o.Key, err)
		}
		body, got := mustRead(t, s, o.Key)
		switch {
		case o.Version != st.Version || o.Size != st.Size:
			bad = append(bad, fmt.Sprintf("%s: listed version %q size %d, stat says %q size %d", o.Key, o.Version, o.Size, st.Version, st.Size))
		case o.Version != got.Version || o.Size != int64(len(body)):
			bad = append(bad, fmt.Sprintf("%s: listed version %q size %d, get says %q and %d bytes", o.Key, o.Version, o.Size, got.Version, len(body)))
		}
	}
	if len(bad) > 0 {
		t.Fatalf("the listing disagrees with the objects:\n%s", strings.Join(bad, "\n"))
	}
	// A write right after a listing is in the next one (list-after-write
	// within one process; the list-after-write case does it across them).
	before, err := s.List(ctx, "la/", 0)
	if err != nil {
		t.Fatal(err)
	}
	late := mustPut(t, s, "la/late", []byte("late"), storage.PutOptions{})
	again, err := s.List(ctx, "la/", 0)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, o := range again {
		found = found || (o.Key == "la/late" && o.Version == late.Version)
	}
	if !found || len(again) != len(before)+1 {
		t.Fatalf("la/late, written (version %s) right after a listing of la/, is not in the next one: %s", late.Version, keysOf(again))
	}
}
