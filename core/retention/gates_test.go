package retention

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retain-dev/retain/adapters/localfs"
	"github.com/retain-dev/retain/core/checkpoint/registry"
	"github.com/retain-dev/retain/core/lance"
	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/claim"
	"github.com/retain-dev/retain/core/storage/storagetest"
)

// Gates on the delete path (issue 8). Each test fails when only its gate
// is removed: it sets up the one condition the gate exists for and checks
// that nothing is deleted (or that the right thing is kept).

// runOn runs a keep-last-1 cleanup on dir and returns its error and
// whether any table file was deleted.
func runOn(t *testing.T, dir string) (error, bool) {
	t.Helper()
	before := strings.Join(tableFiles(t, dir), "\n")
	_, err := Run(bg, open(t, dir, false), Policy{KeepLast: 1}, RunOptions{ConfirmWriteOutage: true})
	return err, strings.Join(tableFiles(t, dir), "\n") != before
}

// Unreadable state is not a licence to delete: a tag, sidecar or registry
// object that exists but does not parse makes the store skip, loudly.
func TestGateUnreadableState(t *testing.T) {
	for name, c := range map[string]struct {
		key  func(dir string) string
		want error
	}{
		"tag":     {func(string) string { return "branch-tag.lance/_refs/tags/v2-tag.json" }, ErrRunRefused},
		"sidecar": {func(string) string { return "_retain/sidecars/create-bogus.json" }, ErrSidecarsPending},
		"registry": {func(dir string) string {
			return registry.VersionKey(1)
		}, registry.ErrCorruptRegistry},
		"manifest": {func(string) string { return "deletes.lance/_versions/18446744073709551613.manifest" }, lance.ErrCorruptManifest},
	} {
		t.Run(name, func(t *testing.T) {
			dir, _ := setup(t)
			p := filepath.Join(dir, c.key(dir))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte("{not json"), 0o644); err != nil {
				t.Fatal(err)
			}
			err, deleted := runOn(t, dir)
			if err == nil || deleted {
				t.Fatalf("a corrupt %s: err %v, deleted %v", name, err, deleted)
			}
			if !errors.Is(err, c.want) {
				t.Fatalf("a corrupt %s: %v (want %v)", name, err, c.want)
			}
			if name != "sidecar" && !strings.Contains(err.Error(), c.key(dir)) {
				t.Fatalf("the refusal does not name %s: %v", c.key(dir), err)
			}
		})
	}
}

// In-flight data is weighed: an unreferenced file younger than the safety
// window (a commit in flight may be writing it) is kept; an old one goes.
func TestGateInFlightFiles(t *testing.T) {
	dir, _ := setup(t)
	young := filepath.Join(dir, "deletes.lance", "data", "inflight-young.lance")
	old := filepath.Join(dir, "deletes.lance", "data", "abandoned-old.lance")
	for _, p := range []string{young, old} {
		if err := os.WriteFile(p, []byte("lance data"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	long := time.Now().Add(-8 * 24 * time.Hour)
	if err := os.Chtimes(old, long, long); err != nil {
		t.Fatal(err)
	}
	if err, _ := runOn(t, dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(young); err != nil {
		t.Fatal("a young unreferenced file was deleted: a commit in flight would lose it")
	}
	if _, err := os.Stat(old); err == nil {
		t.Fatal("an unreferenced file older than the safety window was kept (the gate keeps everything?)")
	}
}

// claimWatch fails the test if an object other than the claim is deleted
// while the claim is not held by a cleanup; it reads the claim through d.
type claimWatch struct {
	d          storage.Driver
	mu         sync.Mutex
	violations []string
	deletes    int
}

func (w *claimWatch) before(c storagetest.Call) error {
	switch c.Op {
	case storagetest.OpDelete:
		w.check(bg, c.Key)
	case storagetest.OpDeleteMany:
		w.check(bg, c.Keys...)
	}
	return nil
}

func (w *claimWatch) check(ctx context.Context, keys ...string) {
	var data []string
	for _, k := range keys {
		if k != claim.Key {
			data = append(data, k)
		}
	}
	if len(data) == 0 {
		return
	}
	r, err := w.d.Get(ctx, claim.Key)
	held := err == nil
	if held {
		b, _ := io.ReadAll(r)
		r.Close()
		held = strings.Contains(string(b), `"action": "cleanup"`)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.deletes += len(data)
	if !held {
		w.violations = append(w.violations, data[0])
	}
}

// The retention claim is held around every removal.
func TestGateClaimAroundRemovals(t *testing.T) {
	dir, _ := setup(t)
	drv, err := localfs.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	w := &claimWatch{d: drv}
	s, err := storage.NewStore(bg, "localfs", storagetest.NewHook(drv).Before(w.before))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := Run(bg, s.At(loc(dir)), Policy{KeepLast: 1}, RunOptions{ConfirmWriteOutage: true}); err != nil {
		t.Fatal(err)
	}
	if w.deletes == 0 {
		t.Fatal("nothing was deleted: the test proves nothing")
	}
	if len(w.violations) > 0 {
		t.Fatalf("%d deletion(s) without the claim, first %s", len(w.violations), w.violations[0])
	}
}
