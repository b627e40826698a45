package conformance

import (
	"fmt"
	"strings"

	"github.com/retain-dev/retain/core/storage"
)

// testListStartAfterNotAKey: StartAfter is a position in byte order, not a
// key that must exist: between two keys, before every key and after every
// key, at page sizes that end a page on either side of it. Callers resume
// after keys that were deleted since (a cleanup's own deletions) and after
// folder names that are no key at all.
func testListStartAfterNotAKey(t T, s *storage.Store) {
	ctx := ctxT(t)
	var all []string
	for i := 1; i <= 9; i += 2 {
		k := fmt.Sprintf("sa/%02d", i)
		mustPut(t, s, k, []byte(k), storage.PutOptions{})
		all = append(all, k)
	}
	after := func(from string) string {
		var out []string
		for _, k := range all {
			if k > from {
				out = append(out, k)
			}
		}
		return strings.Join(out, ",")
	}
	for _, from := range []string{"sa/02", "sa/04", "sa/030", "sa/", "sa/00", "sa/10", "sa/~", "sa/07~"} {
		for _, size := range []int{1, 2, 0} {
			var got []string
			opts := storage.ListOptions{Prefix: "sa/", StartAfter: from, PageSize: size}
			for pages := 0; ; pages++ {
				if pages > len(all)+1 {
					t.Fatalf("start after %q, page size %d: paging does not end (%v)", from, size, got)
				}
				page, err := s.ListPage(ctx, opts)
				if err != nil {
					t.Fatalf("start after %q, page size %d: %v", from, size, err)
				}
				for _, o := range page.Objects {
					got = append(got, o.Key)
				}
				if !page.More || len(page.Objects) == 0 {
					break
				}
				opts.StartAfter = page.Objects[len(page.Objects)-1].Key
			}
			if want := after(from); strings.Join(got, ",") != want {
				t.Fatalf("start after %q (no such key), page size %d: got %q, want %q", from, size, strings.Join(got, ","), want)
			}
		}
	}
	// Deleted since: resuming after a key that is gone.
	if err := s.Delete(ctx, "sa/05", storage.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	page, err := s.ListPage(ctx, storage.ListOptions{Prefix: "sa/", StartAfter: "sa/05"})
	if err != nil {
		t.Fatal(err)
	}
	if got := keysOf(page.Objects); got != "sa/07,sa/09" {
		t.Fatalf("start after the deleted key sa/05: got %q, want sa/07,sa/09", got)
	}
}
