package checkpoint

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retain-dev/retain/adapters/localfs"
	"github.com/retain-dev/retain/core/storage"
)

// landsLate is a driver on which one table's pin tag write fails at once
// (ErrNotFound: its version vanished) and another's lands on the store
// only after a delay, even when the caller gave up on it first (a request
// already sent is not recalled by a cancelled context).
type landsLate struct {
	storage.Driver
	fail, late string // table folders
	wg         sync.WaitGroup
}

func (d *landsLate) Put(ctx context.Context, key string, body io.Reader, opts storage.PutOptions) (storage.Info, error) {
	if !strings.Contains(key, "/_refs/tags/ogcp_") {
		return d.Driver.Put(ctx, key, body, opts)
	}
	switch {
	case strings.HasPrefix(key, d.fail+"/"):
		return storage.Info{}, storage.Errorf("put", key, storage.ErrNotFound, "the version vanished")
	case strings.HasPrefix(key, d.late+"/"):
		b, err := io.ReadAll(body)
		if err != nil {
			return storage.Info{}, err
		}
		select {
		case <-ctx.Done():
			d.wg.Add(1)
			go func() {
				defer d.wg.Done()
				time.Sleep(30 * time.Millisecond)
				d.Driver.Put(context.Background(), key, bytes.NewReader(b), opts)
			}()
			return storage.Info{}, ctx.Err()
		case <-time.After(30 * time.Millisecond):
			return d.Driver.Put(ctx, key, bytes.NewReader(b), opts)
		}
	}
	return d.Driver.Put(ctx, key, body, opts)
}

// TestCreateTagFailureWaitsForEveryTag: one table's pin cannot be written,
// so create rolls back. It must not roll back while another table's tag
// write is still on its way: cancelling that write does not stop it from
// landing, after the rollback deleted its tag and the sidecar, as a pin
// nothing explains. Every tag write finishes before the rollback.
func TestCreateTagFailureWaitsForEveryTag(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	for _, name := range []string{"a", "b", "c"} {
		if err := os.CopyFS(filepath.Join(dir, name+".lance"), os.DirFS(filepath.Join(fixtures, "v2-appends.lance"))); err != nil {
			t.Fatal(err)
		}
	}
	ld, err := localfs.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	d := &landsLate{Driver: ld, fail: "c.lance", late: "b.lance"}
	s, err := storage.NewStore(bg, "localfs", d)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	s = s.At(storage.Location{Scheme: "file", Path: dir})
	if _, err := (Options{Retries: 1}).Create(bg, s, "a", ""); err == nil {
		t.Fatal("create published although a pin could not be written")
	}
	d.wg.Wait() // a write that was given up on has landed by now
	for _, root := range []string{"a.lance", "b.lance", "c.lance"} {
		if tags := pinTags(t, s, root); len(tags) != 0 {
			t.Fatalf("%s keeps pins after the rollback: %v", root, tags)
		}
	}
	noSidecars(t, s)
}
