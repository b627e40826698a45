package retention

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/retain-dev/retain/adapters/localfs"
	"github.com/retain-dev/retain/core/checkpoint"
	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/storagetest"
)

// Checkpoints pinning the same versions cost the preview's pin check one
// manifest read per distinct version, not one per checkpoint. Before,
// every row's manifest was read again.
func TestPreviewPinChecksPerDistinctVersion(t *testing.T) {
	dir, _ := setup(t)
	measure := func() int64 {
		d, err := localfs.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		var n atomic.Int64 // reads of Lance manifests
		cnt := storagetest.NewHook(d).Before(func(c storagetest.Call) error {
			if c.Op == storagetest.OpGet && strings.Contains(c.Key, "/_versions/") && strings.HasSuffix(c.Key, ".manifest") {
				n.Add(1)
			}
			return nil
		})
		s, err := storage.NewStore(bg, "localfs", cnt)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if _, err := Preview(bg, s, Policy{KeepLast: 1}); err != nil {
			t.Fatal(err)
		}
		return n.Load()
	}
	one := measure()
	s := open(t, dir, false)
	for i := 0; i < 5; i++ {
		// Nothing committed since: every new checkpoint pins the same
		// versions as "nightly"... except deletes.lance moved on to v5.
		if _, err := checkpoint.Create(bg, s, fmt.Sprintf("again-%d", i), ""); err != nil {
			t.Fatal(err)
		}
	}
	six := measure()
	// The five new checkpoints pin two distinct versions (deletes v5,
	// branch-tag's head): at most two more manifest reads, whatever the
	// number of checkpoints.
	if extra := six - one; extra > 2 {
		t.Fatalf("five more checkpoints of the same versions cost %d more manifest reads (%d -> %d)", extra, one, six)
	}
}
