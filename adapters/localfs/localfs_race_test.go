package localfs

// Contexts, lost updates and atomic visibility under goroutines and links.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/storagetest"
)

func TestContext(t *testing.T) {
	d, _ := newT(t)
	storagetest.MustPut(t, d, "k", "v")
	ctx, cancel := context.WithCancel(bg)
	cancel()
	check := func(what string, err error, cause error) {
		t.Helper()
		storagetest.WantKind(t, what, err, storage.ErrTransient)
		if !errors.Is(err, cause) {
			t.Fatalf("%s: %v does not wrap %v", what, err, cause)
		}
	}
	_, err := d.Get(ctx, "k")
	check("get", err, context.Canceled)
	_, err = d.Put(ctx, "k2", strings.NewReader("x"), storage.PutOptions{})
	check("put", err, context.Canceled)
	check("delete", d.Delete(ctx, "k", storage.DeleteOptions{}), context.Canceled)
	_, err = d.List(ctx, storage.ListOptions{})
	check("list", err, context.Canceled)

	dctx, dcancel := context.WithDeadline(bg, time.Now().Add(-time.Second))
	defer dcancel()
	_, err = d.Stat(dctx, "k")
	check("stat", err, context.DeadlineExceeded)
	if s, _ := mustRead(t, d, "k"); s != "v" {
		t.Fatal("cancelled ops changed the object")
	}
	// A body that outlives its context: nothing is written, no temp file left.
	ctx2, cancel2 := context.WithCancel(bg)
	body := io.MultiReader(strings.NewReader("partial"), readerFunc(func(p []byte) (int, error) {
		cancel2()
		return copy(p, "more"), nil
	}), strings.NewReader(strings.Repeat("z", 1<<20)))
	_, err = d.Put(ctx2, "k3", body, storage.PutOptions{})
	check("put cancelled mid-body", err, context.Canceled)
	if got := tree(t, d.root); strings.Join(got, " ") != "k" {
		t.Fatalf("tree after a cancelled put: %v", got)
	}
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }

// --- concurrency within one process -------------------------------------------

// Goroutines (on one driver and on two drivers) incrementing a counter with
// replace-if-version lose no update.
func TestLostUpdateGoroutines(t *testing.T) {
	d, root := newT(t)
	d2 := openT(t, root, openOptions{})
	storagetest.MustPut(t, d, "ctr", "0")
	const workers, incs = 4, 40
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(dd *Driver) {
			defer wg.Done()
			for i := 0; i < incs; i++ {
				if err := increment(dd, "ctr"); err != nil {
					t.Error(err)
					return
				}
			}
		}([]*Driver{d, d2}[w%2])
	}
	wg.Wait()
	if s, _ := mustRead(t, d, "ctr"); s != fmt.Sprint(workers*incs) {
		t.Fatalf("counter = %s, want %d", s, workers*incs)
	}
}

// increment adds one to the decimal counter at key with Get +
// replace-if-version, retrying on a precondition failure.
func increment(d *Driver, key string) error {
	for {
		r, err := d.Get(bg, key)
		if err != nil {
			return err
		}
		b, err := io.ReadAll(r)
		r.Close()
		if err != nil {
			return err
		}
		var n int
		if _, err := fmt.Sscan(string(b), &n); err != nil {
			return fmt.Errorf("counter body %q: %v", b, err)
		}
		_, err = d.Put(bg, key, strings.NewReader(fmt.Sprint(n+1)), storage.PutOptions{Mode: storage.PutReplaceIfVersion, IfVersion: r.Info.Version})
		if err == nil {
			return nil
		}
		if !errors.Is(err, storage.ErrPreconditionFailed) {
			return err
		}
	}
}

// Readers racing a writer of 4 MiB bodies only ever see one whole body.
func TestAtomicVisibility(t *testing.T) {
	d, _ := newT(t)
	const size = 4 << 20
	const writes = 200
	body := func(i int) []byte { return bytes.Repeat([]byte{byte('A' + i%26)}, size) }
	if _, err := d.Put(bg, "big", bytes.NewReader(body(0)), storage.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	var reads [2]int
	for r := range reads {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			buf := make([]byte, size+1)
			for {
				select {
				case <-done:
					return
				default:
				}
				rd, err := d.Get(bg, "big")
				if err != nil {
					t.Errorf("get: %v", err)
					return
				}
				n, err := io.ReadFull(rd, buf)
				rd.Close()
				if err != io.ErrUnexpectedEOF || n != size || rd.Info.Size != size {
					t.Errorf("read %d bytes (%v), info size %d, want exactly %d", n, err, rd.Info.Size, size)
					return
				}
				c := buf[0]
				if bytes.Count(buf[:n], []byte{c}) != n {
					t.Errorf("body starting with %q is not uniform: a mix of two writes", c)
					return
				}
				reads[r]++
			}
		}(r)
	}
	for i := 1; i <= writes; i++ {
		if _, err := d.Put(bg, "big", bytes.NewReader(body(i)), storage.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	close(done)
	wg.Wait()
	t.Logf("%d writes, reads per reader %v", writes, reads)
}

// A reader holding the old file while a writer replaces it must still see
// the version that write produced: unlink and rename change ctime without a
// write, so the token must not depend on it (the conformance suite's
// linearizability check found this).
func TestVersionStableAcrossReplaceAndLink(t *testing.T) {
	root := t.TempDir()
	d := openT(t, root, openOptions{})
	ctx := context.Background()
	v1, err := d.Put(ctx, "k", strings.NewReader("one"), storage.PutOptions{Mode: storage.PutCreateIfAbsent})
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(root, "k"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	time.Sleep(20 * time.Millisecond) // past the timestamp tick
	if _, err := d.Put(ctx, "k", strings.NewReader("two"), storage.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	old, _, err := infoFd("k", int(f.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	if old.Version != v1.Version {
		t.Fatalf("the replaced file's token changed without a write: %s, written as %s", old.Version, v1.Version)
	}
}
