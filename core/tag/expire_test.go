package tag

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/retain-dev/retain/adapters/localfs"
	"github.com/retain-dev/retain/core/lance"
	"github.com/retain-dev/retain/core/refs/refmeta"
	"github.com/retain-dev/retain/core/storage"
)

func expiryStore(t *testing.T) (*storage.Store, *Tags) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "db")
	if err := os.CopyFS(filepath.Join(dir, "v2-appends.lance"), os.DirFS(filepath.Join("..", "lance", "testdata", "v2-appends.lance"))); err != nil {
		t.Fatal(err)
	}
	d, err := localfs.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	s, err := storage.NewStore(context.Background(), "localfs", d)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	s = s.At(storage.Location{Scheme: "file", Path: dir})
	ds, err := lance.Open(s, "v2-appends.lance")
	if err != nil {
		t.Fatal(err)
	}
	return s, New(ds, Options{Scope: storage.ScopeHost})
}

// A tag past its expiry by more than the margin is removed by the normal
// delete; one without an expiry, one within the margin, one whose expiry
// was moved on and one whose expiry does not parse stay.
func TestReapExpiredTags(t *testing.T) {
	ctx := context.Background()
	s, tags := expiryStore(t)
	t0 := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	for name, exp := range map[string]time.Time{"session-a": t0, "session-b": t0, "forever": {}, "later": t0.Add(time.Hour)} {
		if _, err := tags.Create(ctx, name, CreateOptions{Version: 1, Expires: exp, Metadata: map[string]string{"who": "agent"}}); err != nil {
			t.Fatal(name, err)
		}
	}
	if r, err := tags.Show(ctx, "session-a"); err != nil || r.Expires == nil || !r.Expires.Equal(t0) || r.Metadata["who"] != "agent" {
		t.Fatalf("show: %+v %v", r, err)
	}
	// session-b is renewed: its expiry moves on.
	if _, err := tags.UpdateMeta(ctx, "session-b", MetaUpdate{Expires: t0.Add(2 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	// A hand-edited expiry that does not parse.
	old, _ := tags.Show(ctx, "later")
	if _, err := tags.Dataset().UpdateTagFile(ctx, old.Lance(), map[string]string{refmeta.MetaExpires: "tomorrow"}, lance.UpdateTagOptions{}); err != nil {
		t.Fatal(err)
	}
	at := func(d time.Duration) func() time.Time { return func() time.Time { return t0.Add(d) } }
	if r, err := ReapExpired(ctx, s, ReapOptions{Now: at(4 * time.Minute), Scope: storage.ScopeHost}); err != nil || r.Removed != 0 {
		t.Fatalf("within the margin: %+v %v", r, err)
	}
	r, err := ReapExpired(ctx, s, ReapOptions{Now: at(time.Hour), Scope: storage.ScopeHost})
	if err != nil || r.Removed != 1 {
		t.Fatalf("after the margin: %+v %v", r, err)
	}
	why := map[string]string{}
	for _, e := range r.Tags {
		why[e.Tag] = e.Why
	}
	if !strings.HasPrefix(why["session-a"], "removed") || !strings.HasPrefix(why["session-b"], "kept: expires") || !strings.Contains(why["later"], `"tomorrow", not a time`) || why["forever"] != "" {
		t.Fatalf("decisions: %v", why)
	}
	left, _ := tags.List(ctx, nil)
	if len(left) != 3 {
		t.Fatalf("tags left: %d, want 3", len(left))
	}
	// --no-expiry: kept until deleted, whatever the clock.
	if _, err := tags.UpdateMeta(ctx, "session-b", MetaUpdate{ClearExpiry: true}); err != nil {
		t.Fatal(err)
	}
	if r, err := ReapExpired(ctx, s, ReapOptions{Now: at(100 * time.Hour), Scope: storage.ScopeHost}); err != nil || r.Removed != 0 {
		t.Fatalf("after the expiry was cleared: %+v %v", r, err)
	}
	if _, err := tags.UpdateMeta(ctx, "session-b", MetaUpdate{Expires: t0, ClearExpiry: true}); err == nil {
		t.Fatal("set and clear the expiry at once: accepted")
	}
}
