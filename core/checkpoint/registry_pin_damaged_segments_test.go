package checkpoint

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/retain-dev/retain/core/checkpoint/registry"
	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/memstore"
	"github.com/retain-dev/retain/core/storage/storagetest"
)

// A live checkpoint's registry pin keeps the registry version that
// published it, its logical record should the head be lost. When that
// version no longer reads (a segment only it used is gone), the pin keeps
// nothing usable: registry recover must republish the checkpoint, as it
// did when it read the publishing version whole. A check of the version
// object alone (ReadRef) takes the damaged version for a sound one.
func TestRecoverRepublishesPinOfUnreadableVersion(t *testing.T) {
	t.Setenv(registry.SpillEnv, "0")
	src, _ := countedTables(t, 2)
	var headSegs map[string]bool
	h := storagetest.NewHook(memstore.New()).Before(func(c storagetest.Call) error {
		if headSegs != nil && c.Op == storagetest.OpGet && strings.HasPrefix(c.Key, registry.SegmentsPrefix) {
			headSegs[c.Key] = true
		}
		return nil
	})
	s, err := storage.NewStore(bg, "memstore", h)
	if err != nil {
		t.Fatal(err)
	}
	s = s.At(storage.Location{Scheme: "mem", Bucket: "pins"})
	objs, err := src.List(bg, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		b, _, err := src.ReadAll(bg, o.Key)
		if err == nil {
			_, err = s.PutBytes(bg, o.Key, b, storage.PutOptions{})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	// The versions that published the live checkpoints hold the deleted
	// ones' buckets as they were before the deletes; the head does not.
	for i := range 6 {
		if _, err := Create(bg, s, fmt.Sprintf("team/cp-%d", i), ""); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		if _, err := Delete(bg, s, fmt.Sprintf("team/cp-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	reg := registry.Open(s, registry.Options{})
	headSegs = map[string]bool{}
	_, head, err := reg.Head(bg)
	if err != nil {
		t.Fatal(err)
	}
	segs, err := s.List(bg, registry.SegmentsPrefix, 0)
	if err != nil {
		t.Fatal(err)
	}
	gone := 0
	for _, o := range segs {
		if !headSegs[o.Key] {
			if err := s.Delete(bg, o.Key, storage.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			gone++
		}
	}
	headSegs = nil
	var damaged *registry.Checkpoint
	for _, cp := range head.Live() {
		if _, err := reg.Read(bg, cp.RegistryVersion); errors.Is(err, registry.ErrCorruptRegistry) {
			damaged = &cp
			break
		}
	}
	if damaged == nil {
		t.Skipf("deleting the %d segments the head does not use left every publishing version readable", gone)
	}
	rep, err := Recover(bg, s, RecoverOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.RegistryVersion == 0 {
		t.Errorf("checkpoint %s's registry pin keeps version %d, which no longer reads, and recover republished nothing",
			damaged.Name, damaged.RegistryVersion)
	}
}
