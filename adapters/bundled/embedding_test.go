package bundled

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// buildEmbedApp builds testdata/embedapp: an application whose main opens
// a store without the plugin dispatch line.
func buildEmbedApp(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "embedapp")
	if out, err := exec.Command("go", "build", "-o", bin, "./testdata/embedapp").CombinedOutput(); err != nil {
		t.Fatalf("go build embedapp: %v\n%s", err, out)
	}
	return bin
}

// copyFixture copies a Lance fixture into a fresh store folder: a fixture
// is never opened in place (localfs keeps its own files in a store's root).
func copyFixture(t *testing.T, name string) string {
	t.Helper()
	root := t.TempDir()
	if err := os.CopyFS(filepath.Join(root, name), os.DirFS(filepath.Join("..", "..", "core", "lance", "testdata", name))); err != nil {
		t.Fatal(err)
	}
	return root
}

// runCounting runs bin until it exits (or limit passes, then kills it) and
// counts the distinct processes running bin meanwhile, by polling /proc.
func runCounting(t *testing.T, bin string, limit time.Duration, env ...string) (out, errOut string, err error, took time.Duration, procs int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	seen := map[int]bool{}
	var mu sync.Mutex
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			entries, _ := os.ReadDir("/proc")
			for _, e := range entries {
				pid, perr := strconv.Atoi(e.Name())
				if perr != nil {
					continue
				}
				// A launched plugin may run from a memfd image; argv[0]
				// still names bin. Only processes that exec'd bin as a
				// plugin count (with the application itself, below): a
				// fork caught before its exec still shows the
				// application's command line, and one whose exec failed
				// and was retried (ETXTBSY) never ran bin at all.
				cl, rerr := os.ReadFile("/proc/" + e.Name() + "/cmdline")
				if rerr == nil && strings.HasPrefix(string(cl), bin+"\x00"+PluginCommand+"\x00") {
					mu.Lock()
					seen[pid] = true
					mu.Unlock()
				}
			}
			select {
			case <-done:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	start := time.Now()
	err = cmd.Run()
	took = time.Since(start)
	close(done)
	wg.Wait()
	return stdout.String(), stderr.String(), err, took, 1 + len(seen)
}

// An application that opens a store through the plugin path without
// dispatching the plugin subcommand fails at once, naming both fixes,
// after starting one child at most; it used to re-execute itself as the
// adapter in a chain of processes until the 30 s handshake timeout.
func TestPluginPathWithoutDispatchFailsFast(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("counts processes through /proc")
	}
	bin := buildEmbedApp(t)
	store := copyFixture(t, "update.lance")
	out, errOut, err, took, procs := runCounting(t, bin, 15*time.Second,
		"EMBEDAPP_MODE=plugin", "EMBEDAPP_STORE="+store)
	if err == nil {
		t.Fatalf("plugin path without dispatch succeeded: %s", out)
	}
	if took > 5*time.Second {
		t.Fatalf("took %v (want well under 5 s); %d processes ran %s; stderr:\n%s", took, procs, bin, errOut)
	}
	if procs > 2 {
		t.Fatalf("%d processes ran %s (want the application and at most one child); stderr:\n%s", procs, bin, errOut)
	}
	for _, want := range []string{"does not dispatch", `os.Args[1] == bundled.PluginCommand`, "bundled.OpenInProcess"} {
		if !strings.Contains(errOut, want) {
			t.Fatalf("error does not say %q:\n%s", want, errOut)
		}
	}
}

// The same application opening its store with OpenInProcess works, and
// starts no child.
func TestOpenInProcessFromApplication(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("counts processes through /proc")
	}
	bin := buildEmbedApp(t)
	store := copyFixture(t, "update.lance")
	out, errOut, err, _, procs := runCounting(t, bin, 15*time.Second,
		"EMBEDAPP_MODE=inprocess", "EMBEDAPP_STORE="+store)
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	if out != "opened, 0 checkpoints\n" {
		t.Fatalf("output %q, stderr:\n%s", out, errOut)
	}
	if procs > 1 {
		t.Fatalf("%d processes ran %s, want 1", procs, bin)
	}
}
