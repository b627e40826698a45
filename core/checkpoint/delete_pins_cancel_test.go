package checkpoint

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/retain-dev/retain/adapters/localfs"
	"github.com/retain-dev/retain/core/checkpoint/registry"
	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/storagetest"
)

// A cancel while the pin tags go (Ctrl-C after the commit) leaves a
// report that names every tag deleted and every tag left, exactly: the
// deletes run side by side, and none not started is counted as done.
func TestDeletePinsReportsACancelExactly(t *testing.T) {
	s, loc, dir := localStore(t, "v2-appends", "branch-tag", "v1-naming")
	c, err := Create(bg, s, "nightly", "")
	if err != nil {
		t.Fatal(err)
	}
	_, snap, err := registry.Open(s, registry.Options{}).Head(bg)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := snap.ByID(c.ID)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(bg)
	var once sync.Once
	d, err := localfs.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	h := storagetest.NewHook(d).After(func(c storagetest.Call, err error) error {
		if c.Op == storagetest.OpDelete {
			once.Do(cancel)
		}
		return err
	})
	hs, err := storage.NewStore(bg, "localfs", h)
	if err != nil {
		t.Fatal(err)
	}
	defer hs.Close()
	deleted, errs := deletePins(ctx, hs.At(loc), cp, nil)
	if len(deleted) == 0 {
		t.Fatalf("the first tag, deleted before the cancel, is not reported: %v", errs)
	}
	for _, k := range deleted {
		root, name, _ := strings.Cut(k, ":")
		if _, err := os.Stat(filepath.Join(dir, root, "_refs", "tags", name+".json")); !os.IsNotExist(err) {
			t.Errorf("%s reported deleted, still there (%v)", k, err)
		}
	}
	left := 0
	for _, root := range []string{registry.RegistryPath, "v2-appends.lance", "branch-tag.lance", "v1-naming.lance"} {
		ents, _ := os.ReadDir(filepath.Join(dir, root, "_refs", "tags"))
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), registry.PinTagPrefix(c.ID)) {
				left++
				if !strings.Contains(strings.Join(errs, "\n"), root+": "+strings.TrimSuffix(e.Name(), ".json")) {
					t.Errorf("%s/%s is left and not reported: %v", root, e.Name(), errs)
				}
			}
		}
	}
	if left == 0 {
		t.Fatal("the cancel left no tag: the test proves nothing")
	}
}
