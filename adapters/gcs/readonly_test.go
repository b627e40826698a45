package gcs

import (
	"errors"
	"strings"
	"testing"

	"github.com/fsouza/fake-gcs-server/fakestorage"

	"github.com/retain-dev/retain/core/storage"
)

// A read-only open runs no delete probe (no .retain-probe/ object is ever
// written), declares read-only, and the driver refuses every write.
func TestOpenReadOnlyWritesNothing(t *testing.T) {
	emu := startEmu(t, "robkt")
	emu.Server.CreateObject(fakestorage.Object{ObjectAttrs: fakestorage.ObjectAttrs{BucketName: "robkt", Name: "p/k"}, Content: []byte("v")})
	loc, err := storage.ParseLocation("gs://robkt/p")
	if err != nil {
		t.Fatal(err)
	}
	loc.ReadOnly = true
	d, err := Open(bg, loc)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if c := d.caps; !c.ReadOnly || c.DeleteIfVersion.Reason != "opened read-only" || c.CreateIfAbsent.Level != storage.LevelNone {
		t.Errorf("caps %+v", c)
	}
	if _, err := d.Stat(bg, "k"); err != nil {
		t.Fatal(err)
	}
	_, err = d.Put(bg, "n", strings.NewReader("x"), storage.PutOptions{})
	if !errors.Is(err, storage.ErrPermissionDenied) {
		t.Errorf("put: %v", err)
	}
	if err := d.Delete(bg, "k", storage.DeleteOptions{}); !errors.Is(err, storage.ErrPermissionDenied) {
		t.Errorf("delete: %v", err)
	}
	if _, err := d.DeleteMany(bg, []string{"k"}); !errors.Is(err, storage.ErrPermissionDenied) {
		t.Errorf("delete-many: %v", err)
	}
	objs, _, err := emu.Server.ListObjectsWithOptions("robkt", fakestorage.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 1 || objs[0].Name != "p/k" {
		var names []string
		for _, o := range objs {
			names = append(names, o.Name)
		}
		t.Errorf("bucket holds %q", names)
	}
}
