package checkpoint

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/retain-dev/retain/adapters/localfs"
	"github.com/retain-dev/retain/core/checkpoint/registry"
	"github.com/retain-dev/retain/core/lance"
	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/claim"
	"github.com/retain-dev/retain/core/storage/memstore"
)

var bg = context.Background()

const fixtures = "../lance/testdata"

// copyFixtures copies real-Lance fixtures into dir as <name>.lance.
func copyFixtures(t testing.TB, dir string, names ...string) {
	t.Helper()
	for _, n := range names {
		if err := os.CopyFS(filepath.Join(dir, n+".lance"), os.DirFS(filepath.Join(fixtures, n+".lance"))); err != nil {
			t.Fatal(err)
		}
	}
}

// localStore is a localfs store at <tmp>/db holding copies of the fixtures.
func localStore(t testing.TB, names ...string) (*storage.Store, storage.Location, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "db")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	copyFixtures(t, dir, names...)
	loc := storage.Location{Scheme: "file", Path: dir}
	return openLocal(t, dir).At(loc), loc, dir
}

func openLocal(t testing.TB, dir string) *storage.Store {
	t.Helper()
	d, err := localfs.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	s, err := storage.NewStore(bg, "localfs", d)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// memStore is a memstore holding the fixtures' files.
func memStore(t testing.TB, names ...string) (*storage.Store, storage.Location) {
	t.Helper()
	s, err := storage.NewStore(bg, "memstore", memstore.New())
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		root := filepath.Join(fixtures, n+".lance")
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			_, err = s.PutBytes(bg, n+".lance/"+filepath.ToSlash(rel), b, storage.PutOptions{})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	loc := storage.Location{Scheme: "mem", Bucket: "test"}
	return s.At(loc), loc
}

func tags(t testing.TB, s *storage.Store, root string) map[string]lance.Tag {
	t.Helper()
	ds, err := lance.Open(s, root)
	if err != nil {
		t.Fatal(err)
	}
	ts, err := ds.ListTags(bg)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]lance.Tag{}
	for _, tg := range ts {
		out[tg.Name] = tg
	}
	return out
}

func pinTags(t testing.TB, s *storage.Store, root string) map[string]lance.Tag {
	out := map[string]lance.Tag{}
	for n, tg := range tags(t, s, root) {
		if registry.IsReservedTag(n) {
			out[n] = tg
		}
	}
	return out
}

func head(t testing.TB, s *storage.Store) (registry.Version, *registry.Snapshot) {
	t.Helper()
	v, snap, err := registry.Open(s, registry.Options{}).Head(bg)
	if err != nil {
		t.Fatal(err)
	}
	return v, snap
}

func noSidecars(t testing.TB, s *storage.Store) {
	t.Helper()
	keys, err := listSidecars(bg, s)
	if err != nil || len(keys) != 0 {
		t.Fatalf("sidecars: %v %v", keys, err)
	}
}

// clearDeadClaim takes over (and releases) a claim left by a process
// that exited, as an operator would with `retain claim takeover`.
func clearDeadClaim(t testing.TB, s *storage.Store) {
	t.Helper()
	p, _, err := claim.Read(bg, s)
	if errors.Is(err, storage.ErrNotFound) {
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	h, err := claim.Takeover(bg, s, claim.TakeoverRequest{Request: claim.Request{Action: "takeover", Scope: storage.ScopeHost},
		Token: p.OwnerToken, Reason: "test: the process exited"})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Release(bg); err != nil {
		t.Fatal(err)
	}
}
