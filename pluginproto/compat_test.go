package pluginproto

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/retain-dev/retain/core/storage"
)

// EnvCompatOldSDK names the sdk module directory of an earlier build (a git
// worktree of a previous commit: `git worktree add /tmp/oldsdk <commit>`,
// then RETAIN_COMPAT_OLD_SDK=/tmp/oldsdk/sdk). TestCompatWithOldSDK then
// builds its plugin and a host from it and proves both directions across
// real processes. Unset, the test skips: it compiles another tree.
const envCompatOldSDK = "RETAIN_COMPAT_OLD_SDK"

// oldHostMain is a host built from the old SDK: it launches the plugin at
// os.Args[1] (a pluginproto test binary, in the mode of os.Args[2]) and
// drives every kind of call; it prints "ok" when all answered right.
const oldHostMain = `package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/pluginproto"
)

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pluginproto.Launch(ctx, pluginproto.LaunchConfig{
		Adapter: "testmem", Path: os.Args[1], Env: []string{"RETAIN_PLUGINPROTO_TEST_PLUGIN=" + os.Args[2]},
		Location: core.Location{Scheme: "testmem"}, Logger: hclog.NewNullLogger(),
	})
	if err != nil {
		fail(err)
	}
	defer c.Close()
	s, err := core.NewStore(ctx, "testmem", c)
	if err != nil {
		fail(err)
	}
	body := bytes.Repeat([]byte("o"), 3<<20)
	if _, err := s.PutBytes(ctx, "old/a", body, core.PutOptions{Mode: core.PutCreateIfAbsent}); err != nil {
		fail(err)
	}
	got, _, err := s.ReadAll(ctx, "old/a")
	if err != nil || !bytes.Equal(got, body) {
		fail(fmt.Errorf("read back %d bytes: %v", len(got), err))
	}
	if _, err := s.Stat(ctx, "old/missing"); !errors.Is(err, core.ErrNotFound) {
		fail(fmt.Errorf("stat of a missing key: %v", err))
	}
	if page, err := s.ListPage(ctx, core.ListOptions{Prefix: "old/"}); err != nil || len(page.Objects) != 1 {
		fail(fmt.Errorf("list: %+v, %v", page, err))
	}
	if res, err := s.DeleteMany(ctx, []string{"old/a"}); err != nil || res[0].Err != nil {
		fail(fmt.Errorf("delete-many: %+v, %v", res, err))
	}
	r, err := c.Get(ctx, "old/a")
	if !errors.Is(err, core.ErrNotFound) {
		if r != nil {
			io.Copy(io.Discard, r)
		}
		fail(fmt.Errorf("get after delete: %v", err))
	}
	fmt.Println("ok")
}

func fail(err error) { fmt.Fprintln(os.Stderr, "old host:", err); os.Exit(1) }
`

// A host from this tree drives a plugin built from the old SDK (which knows
// nothing of batch reads or the session: the store falls back to single
// unary calls), and a host built from the old SDK drives a plugin from this
// tree (which offers batches and a session the old host never asks for).
func TestCompatWithOldSDK(t *testing.T) {
	old := os.Getenv(envCompatOldSDK)
	if old == "" {
		t.Skipf("set %s to the sdk directory of an earlier build (git worktree add /tmp/oldsdk HEAD~1; %s=/tmp/oldsdk/sdk)", envCompatOldSDK, envCompatOldSDK)
	}
	if _, err := os.Stat(filepath.Join(old, "pluginproto", "batch.go")); err == nil {
		t.Fatalf("%s=%s already has batch reads: point it at an SDK from before them", envCompatOldSDK, old)
	}
	dir := t.TempDir()
	build := func(args ...string) {
		t.Helper()
		cmd := exec.Command("go", args...)
		cmd.Dir = old
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %s in %s: %v\n%s", strings.Join(args, " "), old, err, out)
		}
	}
	oldPlugin := filepath.Join(dir, "old-pluginproto.test")
	build("test", "-c", "-o", oldPlugin, "./pluginproto/")
	hostDir := filepath.Join(old, "internal", "compathost")
	if err := os.MkdirAll(hostDir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(hostDir) })
	if err := os.WriteFile(filepath.Join(hostDir, "main.go"), []byte(oldHostMain), 0o644); err != nil {
		t.Fatal(err)
	}
	oldHost := filepath.Join(dir, "old-host")
	build("build", "-o", oldHost, "./internal/compathost/")

	t.Run("new host, old plugin", func(t *testing.T) {
		c := launch(t, "mem", func(cfg *LaunchConfig) { cfg.Path = oldPlugin })
		if c.batch || c.sess != nil {
			t.Fatalf("the old plugin's OpenResponse read as offering batch reads (%v) or a session (%v)", c.batch, c.sess != nil)
		}
		// Unary calls, including one the driver fails by kind.
		if _, err := c.Stat(context.Background(), "nothing/here"); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("stat of a missing key through the old plugin: %v", err)
		}
		s, cd := counted(t, c)
		keys := batchFixture(t, s, 0, 10, 2<<20)
		before := cd.Counts()
		checkBatch(t, s, keys)
		if n := cd.Counts().BatchRead - before.BatchRead; n != 0 {
			t.Errorf("%d batch requests sent to an old plugin", n)
		}
	})
	t.Run("old host, new plugin", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, oldHost, testExe(), "mem").CombinedOutput()
		if err != nil || !bytes.Equal(bytes.TrimSpace(out), []byte("ok")) {
			t.Fatalf("the old host driving this tree's plugin: %v\n%s", err, out)
		}
	})
	// And this tree's plugin still offers batches to this tree's host.
	c := launch(t, "mem")
	if !c.batch || c.sess == nil {
		t.Fatalf("this tree's plugin does not offer batch reads (%v) or a session (%v)", c.batch, c.sess != nil)
	}
}
