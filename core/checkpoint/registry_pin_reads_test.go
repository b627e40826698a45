package checkpoint

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/retain-dev/retain/core/checkpoint/registry"
	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/memstore"
	"github.com/retain-dev/retain/core/storage/storagetest"
)

// TestRegistryPinsReadVersionObjectsOnly: a checkpoint's registry pin is
// checked from the version object of the registry version that published
// it (registry.ReadRef), never by reading that whole version, which on a
// segmented registry costs its buckets and rows objects and a decode of
// all of them, once per live checkpoint: quadratic in the live
// checkpoints. So list reads exactly the segments the head has, and one
// version object per live checkpoint besides the head's.
func TestRegistryPinsReadVersionObjectsOnly(t *testing.T) {
	t.Setenv(registry.SpillEnv, "0")
	src, _ := countedTables(t, 2)
	var segGets, versionGets atomic.Int64
	h := storagetest.NewHook(memstore.New()).Before(func(c storagetest.Call) error {
		if c.Op == storagetest.OpGet && strings.HasPrefix(c.Key, registry.SegmentsPrefix) {
			segGets.Add(1)
		}
		if c.Op == storagetest.OpGet && strings.HasPrefix(c.Key, registry.VersionsPrefix) {
			versionGets.Add(1)
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
	// ones' buckets as they were before the deletes: a whole read of them
	// reads those, the head does not.
	const created, deleted = 6, 3
	for i := range created {
		if _, err := Create(bg, s, fmt.Sprintf("team/cp-%d", i), ""); err != nil {
			t.Fatal(err)
		}
	}
	for i := range deleted {
		if _, err := Delete(bg, s, fmt.Sprintf("team/cp-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	const n = created - deleted
	segGets.Store(0)
	if _, _, err := registry.Open(s, registry.Options{}).Head(bg); err != nil {
		t.Fatal(err)
	}
	headSegs := segGets.Swap(0)
	versionGets.Store(0)
	if _, live, err := List(bg, s); err != nil || len(live) != n {
		t.Fatalf("list: %d live, %v", len(live), err)
	}
	if got := segGets.Load(); got != headSegs {
		t.Errorf("list read %d segments, the head has %d: registry pins read old versions whole", got, headSegs)
	}
	if got := versionGets.Load(); got != n+1 {
		t.Errorf("list read %d version objects, want %d (the head and one per live checkpoint)", got, n+1)
	}
}
