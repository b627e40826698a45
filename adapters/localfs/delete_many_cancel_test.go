package localfs

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A cancelled batch delete stops deleting: retain's run cancels a table's
// deletes the moment it no longer holds the store (a failed claim check),
// and "no table deletes past that moment" holds only if the adapter checks
// the context before each key, not once per directory.
func TestDeleteManyStopsAtCancel(t *testing.T) {
	root := t.TempDir()
	d, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := os.MkdirAll(filepath.Join(root, "t.lance/data"), 0o755); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for i := range 100 {
		k := fmt.Sprintf("t.lance/data/f%03d.lance", i)
		if err := os.WriteFile(filepath.Join(root, k), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k)
	}
	// A writer holds the second key's lock: the batch waits there.
	unlock, err := d.lockKey(context.Background(), "put", keys[1])
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		d.DeleteMany(ctx, keys)
	}()
	for deadline := time.Now().Add(5 * time.Second); ; {
		if _, err := os.Lstat(filepath.Join(root, keys[0])); os.IsNotExist(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the batch never deleted its first key")
		}
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond) // the batch is waiting for keys[1]'s lock
	cancel()
	time.Sleep(20 * time.Millisecond)
	unlock()
	<-done
	var after []string
	for _, k := range keys[2:] {
		if _, err := os.Lstat(filepath.Join(root, k)); os.IsNotExist(err) {
			after = append(after, k)
		}
	}
	if len(after) > 0 {
		t.Errorf("%d of the %d keys after the cancellation were deleted anyway (first %s)", len(after), len(keys)-2, after[0])
	}
}
