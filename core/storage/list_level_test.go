package storage_test

import (
	"context"
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"testing"

	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/memstore"
	"github.com/retain-dev/retain/core/storage/storagetest"
)

// walkLevel pages through one level, returning every entry in order
// (folders marked by their trailing '/').
func walkLevel(t *testing.T, s *storage.Store, prefix, startAfter string, pageSize int) []string {
	t.Helper()
	var out []string
	opts := storage.ListOptions{Prefix: prefix, StartAfter: startAfter, PageSize: pageSize, Delimiter: storage.Delimiter}
	for range 10000 {
		page, err := s.ListPage(context.Background(), opts)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range page.Objects {
			out = append(out, o.Key)
		}
		out = append(out, page.Folders...)
		if !page.More {
			slices.Sort(out)
			return out
		}
		opts.StartAfter = page.Last()
	}
	t.Fatal("the listing did not end")
	return nil
}

// The level a driver lists natively (memstore) and the level the Store
// lists folder by folder over a driver without the delimiter are the same
// entries, on random stores, prefixes, page sizes and starting points; and
// both are what the keys say the level is.
func TestListLevelNativeAndEmulatedAgree(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	parts := []string{"a", "b", "t.lance", "t.lance0", "u", "x/y", "é"}
	for round := range 60 {
		mem := memstore.New()
		var keys []string
		for range 1 + rng.Intn(40) {
			k := parts[rng.Intn(len(parts))]
			for range rng.Intn(3) {
				k += "/" + parts[rng.Intn(len(parts))]
			}
			keys = append(keys, k)
			storagetest.MustPut(t, mem, k, "x")
		}
		native, err := storage.NewStore(context.Background(), "memory", mem)
		if err != nil {
			t.Fatal(err)
		}
		emulated, err := storage.NewStore(context.Background(), "memory", &storagetest.Caps{Driver: mem, Edit: func(c *storage.Capabilities) { c.ListDelimiter = false }})
		if err != nil {
			t.Fatal(err)
		}
		for _, prefix := range []string{"", "t.lance/", "x/", "t"} {
			want := expectedLevel(keys, prefix)
			for _, size := range []int{1, 2, 3, 1000} {
				for _, after := range []string{"", "b", "t.lance/", "a/"} {
					w := after0(want, after)
					if got := walkLevel(t, native, prefix, after, size); !slices.Equal(got, w) {
						t.Fatalf("round %d prefix %q size %d after %q: native %q, want %q", round, prefix, size, after, got, w)
					}
					if got := walkLevel(t, emulated, prefix, after, size); !slices.Equal(got, w) {
						t.Fatalf("round %d prefix %q size %d after %q: emulated %q, want %q", round, prefix, size, after, got, w)
					}
				}
			}
		}
	}
}

// expectedLevel is the level of keys under prefix, computed plainly.
func expectedLevel(keys []string, prefix string) []string {
	set := map[string]bool{}
	for _, k := range keys {
		rest, ok := strings.CutPrefix(k, prefix)
		if !ok || rest == "" {
			continue
		}
		if i := strings.Index(rest, "/"); i >= 0 {
			set[prefix+rest[:i+1]] = true
		} else {
			set[k] = true
		}
	}
	var out []string
	for e := range set {
		out = append(out, e)
	}
	slices.Sort(out)
	return out
}

// after0 keeps the entries a listing starting after after returns: greater
// than it, and not under it when it is a folder.
func after0(entries []string, after string) []string {
	var out []string
	for _, e := range entries {
		if e > after && !(strings.HasSuffix(after, "/") && strings.HasPrefix(e, after)) {
			out = append(out, e)
		}
	}
	return out
}

// lyingLevel declares the delimiter but ignores it.
type lyingLevel struct{ storage.Driver }

func (l lyingLevel) List(ctx context.Context, opts storage.ListOptions) (storage.ListPage, error) {
	opts.Delimiter = ""
	return l.Driver.List(ctx, opts)
}

// A driver that declares the delimiter and lists keys below a folder
// anyway broke the contract, and the Store says so.
func TestListLevelRefusesADriverIgnoringTheDelimiter(t *testing.T) {
	mem := memstore.New()
	storagetest.MustPut(t, mem, "t.lance/_versions/1.manifest", "x")
	s, err := storage.NewStore(context.Background(), "memory", lyingLevel{mem})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.ListPage(context.Background(), storage.ListOptions{Delimiter: "/"})
	if storage.KindOf(err) != storage.ErrUnknown || !strings.Contains(fmt.Sprint(err), "below a folder") {
		t.Fatalf("%v: want a broken-contract error naming the key below a folder", err)
	}
	if _, err := s.ListPage(context.Background(), storage.ListOptions{Delimiter: ","}); storage.KindOf(err) != storage.ErrInvalidArgument {
		t.Fatalf("delimiter ',': %v", err)
	}
}
