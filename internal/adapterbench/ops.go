package adapterbench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"testing"

	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/claim"
	"github.com/retain-dev/retain/core/storage/storagetest"
)

// Loop runs op once per b.Loop iteration and fails the benchmark on its
// error. Where d is a *storagetest.Counting it reports req/op: the requests that
// reached d during the loop, per op (setup before Loop is not counted).
func Loop(b *testing.B, d storage.Driver, op func(ctx context.Context) error) {
	ctx := context.Background()
	c, counting := d.(*storagetest.Counting)
	var before int64
	if counting {
		before = c.Counts().Total()
	}
	for b.Loop() {
		if err := op(ctx); err != nil {
			b.Fatal(err)
		}
	}
	if counting {
		b.ReportMetric(float64(c.Counts().Total()-before)/float64(b.N), "req/op")
	}
}

// PutCreateDelete is a create-if-absent Put of 1 KiB and an unconditional
// Delete of it per op.
func PutCreateDelete(b *testing.B, d storage.Driver) {
	body := bytes.Repeat([]byte("x"), 1024)
	Loop(b, d, func(ctx context.Context) error {
		if _, err := d.Put(ctx, "bench/cas", bytes.NewReader(body), storage.PutOptions{Mode: storage.PutCreateIfAbsent}); err != nil {
			return err
		}
		return d.Delete(ctx, "bench/cas", storage.DeleteOptions{})
	})
}

// Get1KiB puts a 1 KiB object, then opens it and reads it to the end per op.
func Get1KiB(b *testing.B, d storage.Driver) {
	if _, err := d.Put(context.Background(), "bench/get", bytes.NewReader(bytes.Repeat([]byte("x"), 1024)), storage.PutOptions{}); err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 2048)
	b.SetBytes(1024)
	Loop(b, d, func(ctx context.Context) error {
		r, err := d.Get(ctx, "bench/get")
		if err != nil {
			return err
		}
		// A short ReadFull reads on to the end of the body.
		n, err := io.ReadFull(r, buf)
		r.Close()
		if err != io.ErrUnexpectedEOF || n != 1024 {
			return fmt.Errorf("read %d bytes: %v", n, err)
		}
		return nil
	})
}

// listKeys is how many keys Fill1000 puts and List1000 lists.
const listKeys = 1000

// Fill1000 puts the 1,000 one-byte objects List1000 lists, 16 at a time.
func Fill1000(b *testing.B, d storage.Driver) {
	b.Helper()
	ctx := context.Background()
	errs := make(chan error, listKeys)
	sem := make(chan struct{}, 16)
	for i := range listKeys {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			_, err := d.Put(ctx, fmt.Sprintf("bench/list/%04d", i), bytes.NewReader([]byte("x")), storage.PutOptions{})
			errs <- err
		}()
	}
	for range listKeys {
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
	}
}

// List1000 lists the 1,000 keys Fill1000 put, as one page per op, and fails
// unless the page holds them all. With last it also fails unless the page
// says no more keys follow: ListPage.More may be a false alarm, so only
// some backends can be held to that.
func List1000(b *testing.B, d storage.Driver, last bool) {
	Loop(b, d, func(ctx context.Context) error {
		page, err := d.List(ctx, storage.ListOptions{Prefix: "bench/list/", PageSize: listKeys})
		if err != nil {
			return err
		}
		if len(page.Objects) != listKeys || (last && page.More) {
			return fmt.Errorf("listed %d objects, more=%v", len(page.Objects), page.More)
		}
		return nil
	})
}

// ClaimCycle is claim.Acquire then Handle.Release per op, on a store over d,
// with a claim of the given scope.
func ClaimCycle(b *testing.B, d storage.Driver, scope storage.Scope) {
	s, err := storage.NewStore(context.Background(), "bench", d)
	if err != nil {
		b.Fatal(err)
	}
	req := claim.Request{Action: "bench", Actor: "bench@host", Scope: scope}
	Loop(b, d, func(ctx context.Context) error {
		h, err := claim.Acquire(ctx, s, req)
		if err != nil {
			return err
		}
		return h.Release(ctx)
	})
}

// cleanupManifests and cleanupManifestSize are the shape of the store
// CleanupReads reads: a table with 1,000 versions whose manifests are about
// 40 KB each, what a Lance table with many fragments keeps.
const (
	cleanupManifests    = 1000
	cleanupManifestSize = 40 << 10
	cleanupPrefix       = "bench/cleanup/_versions/"
)

// FillCleanup puts the manifests CleanupReads reads, 16 at a time.
func FillCleanup(b *testing.B, d storage.Driver) {
	b.Helper()
	ctx := context.Background()
	body := bytes.Repeat([]byte("m"), cleanupManifestSize)
	errs := make(chan error, cleanupManifests)
	sem := make(chan struct{}, 16)
	for i := range cleanupManifests {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			_, err := d.Put(ctx, fmt.Sprintf("%s%04d.manifest", cleanupPrefix, i), bytes.NewReader(body), storage.PutOptions{})
			errs <- err
		}()
	}
	for range cleanupManifests {
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
	}
}

// CleanupReads is the read pattern of a cleanup planning one table on a
// store FillCleanup filled: list the manifests (one page), read every one
// of them, and stat every one again before deciding (the plan's check that
// nothing changed under it). It goes through a storage.Store, so a driver with
// batch reads is read in batches (Store.GetMany, Store.StatMany) and one
// without falls back to a request per key.
func CleanupReads(b *testing.B, d storage.Driver) {
	s, err := storage.NewStore(context.Background(), "bench", d)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(cleanupManifests * cleanupManifestSize)
	Loop(b, d, func(ctx context.Context) error {
		page, err := s.ListPage(ctx, storage.ListOptions{Prefix: cleanupPrefix, PageSize: cleanupManifests})
		if err != nil {
			return err
		}
		if len(page.Objects) != cleanupManifests {
			return fmt.Errorf("listed %d manifests, want %d", len(page.Objects), cleanupManifests)
		}
		keys := make([]string, len(page.Objects))
		for i, o := range page.Objects {
			keys[i] = o.Key
		}
		got, err := s.GetMany(ctx, keys)
		if err != nil {
			return err
		}
		for _, g := range got {
			if g.Err != nil || len(g.Data) != cleanupManifestSize {
				return fmt.Errorf("read %d bytes of %s: %v", len(g.Data), g.Key, g.Err)
			}
		}
		stats, err := s.StatMany(ctx, keys)
		if err != nil {
			return err
		}
		for _, st := range stats {
			if st.Err != nil {
				return st.Err
			}
		}
		return nil
	})
}
