//go:build linux

package localfs

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/internal/adapterbench"
)

// TestListRefusalCrossesThePlugin: through the plugin boundary (this test
// binary serving localfs as a plugin of itself, as the retain
// binary does), a listing that meets a symlink still refuses with
// permission denied, and the host's error names the link and the next step.
func TestListRefusalCrossesThePlugin(t *testing.T) {
	root := t.TempDir()
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "x"), []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "t.lance"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "t.lance", "a"), []byte("v"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "linked.lance")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := adapterbench.Plugin("localfs")(t, storage.Location{Scheme: "file", Path: root})
	s, err := storage.NewStore(ctx, "localfs", c)
	if err != nil {
		t.Fatal(err)
	}
	for _, prefix := range []string{"", "linked.lance/"} {
		_, err = s.List(ctx, prefix, 0)
		var ce *storage.Error
		if !errors.Is(err, storage.ErrPermissionDenied) || !errors.As(err, &ce) || ce.Key != "linked.lance" ||
			!strings.Contains(err.Error(), "symbolic link") || !strings.Contains(err.Error(), "replace the link with the real folder") {
			t.Fatalf("list %q through the plugin: %v", prefix, err)
		}
	}
	if objs, err := s.List(ctx, "t.lance/", 0); err != nil || len(objs) != 1 {
		t.Fatalf("list of the other table: %v %v", objs, err)
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 1 {
		t.Fatalf("outside directory changed: %v", ents)
	}
}
