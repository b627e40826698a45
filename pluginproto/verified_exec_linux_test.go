//go:build linux

package pluginproto

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retain-dev/retain/core/storage"
)

// The swap-race test runs two copies of this test binary that differ only
// in a trailer after the ELF image (which the loader ignores): the
// verified one, whose digest the host expects, and an unverified one.
// Every process started from an unverified copy appends its pid to the
// file named by envRanUnverified, whatever happens to it afterwards, so a
// run the host never hears of still shows.
const (
	trailerVerified   = "\nretain swap-race trailer: verified  \n"
	trailerUnverified = "\nretain swap-race trailer: UNVERIFIED\n"
	envRanUnverified  = "RETAIN_PLUGINPROTO_TEST_RAN_UNVERIFIED"
)

func init() {
	path := os.Getenv(envRanUnverified)
	if path == "" {
		return
	}
	// /proc/self/exe is the image actually running, wherever it came from.
	f, err := os.Open("/proc/self/exe")
	if err != nil {
		fmt.Fprintln(os.Stderr, "swap-race plugin: cannot read its own image:", err)
		os.Exit(5)
	}
	st, err := f.Stat()
	tail := make([]byte, len(trailerUnverified))
	if err == nil {
		_, err = f.ReadAt(tail, st.Size()-int64(len(tail)))
	}
	f.Close()
	if err != nil {
		fmt.Fprintln(os.Stderr, "swap-race plugin: cannot read its own image:", err)
		os.Exit(5)
	}
	if string(tail) == trailerVerified {
		return
	}
	// Unverified, or a torn mixture: either way not the verified bytes.
	rf, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err == nil {
		fmt.Fprintf(rf, "%d %q\n", os.Getpid(), tail)
		rf.Close()
	}
	os.Exit(6)
}

// writeVariant writes this test binary plus trailer to path.
func writeVariant(t *testing.T, path, trailer string) string {
	t.Helper()
	src, err := os.Open(testExe())
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	if _, err := io.Copy(io.MultiWriter(dst, h), src); err != nil {
		t.Fatal(err)
	}
	io.WriteString(io.MultiWriter(dst, h), trailer)
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// TestSwapRaceNeverRunsUnverified launches the plugin with the verified
// binary's digest while another goroutine swaps the file at its path
// between the verified and the unverified binary as fast as it can, either
// by renaming the other over it or by rewriting its trailer in place. Each
// launch must either run the verified bytes or refuse with the digest of
// what it read; the unverified binary must never start. Both images are
// raced: the memfd, and the copy on disk other systems use.
func TestSwapRaceNeverRunsUnverified(t *testing.T) {
	for _, tc := range []struct {
		image, how string
		launches   int
	}{
		{"memfd", "rename", 50}, {"memfd", "rewrite", 50},
		{"copy", "rename", 20}, {"copy", "rewrite", 20},
	} {
		t.Run(tc.image+"/"+tc.how, func(t *testing.T) {
			swapRace(t, tc.how, tc.image == "copy", tc.launches)
		})
	}
}

func swapRace(t *testing.T, how string, noMemfd bool, n int) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	bad := filepath.Join(dir, "bad")
	plugin := filepath.Join(dir, "plugin")
	ran := filepath.Join(dir, "ran-unverified")
	goodSum := writeVariant(t, good, trailerVerified)
	badSum := writeVariant(t, bad, trailerUnverified)
	if err := os.Link(good, plugin); err != nil {
		t.Fatal(err)
	}
	if how == "rewrite" {
		// Its own inode: rewriting it must not touch good or bad.
		os.Remove(plugin)
		writeVariant(t, plugin, trailerVerified)
	}
	st, err := os.Stat(plugin)
	if err != nil {
		t.Fatal(err)
	}
	trailerAt := st.Size() - int64(len(trailerVerified))

	var stop atomic.Bool
	var swaps atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tmp := plugin + ".tmp"
		for i := 0; !stop.Load(); i++ {
			src, trailer := good, trailerVerified
			if i%2 == 0 {
				src, trailer = bad, trailerUnverified
			}
			switch how {
			case "rename":
				os.Remove(tmp)
				if os.Link(src, tmp) != nil || os.Rename(tmp, plugin) != nil {
					continue
				}
			case "rewrite":
				// Fails with ETXTBSY while a process runs the file
				// itself: that is the old, racy launch path at work.
				f, err := os.OpenFile(plugin, os.O_WRONLY, 0)
				if err != nil {
					continue
				}
				_, err = f.WriteAt([]byte(trailer), trailerAt)
				f.Close()
				if err != nil {
					continue
				}
			}
			swaps.Add(1)
		}
	}()
	defer func() { stop.Store(true); wg.Wait() }()

	ok, refused, failed := 0, 0, 0
	for i := range n {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cfg := testConfig("mem")
		cfg.Path = plugin
		cfg.SHA256 = goodSum
		cfg.noMemfd = noMemfd
		cfg.Env = append(cfg.Env, envRanUnverified+"="+ran)
		c, err := Launch(ctx, cfg)
		cancel()
		if err == nil {
			if _, err := c.Stat(context.Background(), "a"); !isKind(err, storage.ErrNotFound) {
				t.Errorf("launch %d: stat on a verified plugin: %v", i, err)
			}
			c.Close()
			ok++
			continue
		}
		ce, isCore := err.(*storage.Error)
		if !isCore || ce.Kind != storage.ErrPermissionDenied {
			if failed++; failed <= 3 {
				t.Errorf("launch %d: neither ran nor refused: %v", i, err)
			}
			continue
		}
		if !strings.Contains(ce.Msg, "expected "+goodSum) {
			t.Fatalf("launch %d: refusal %q does not name the expected digest", i, ce.Msg)
		}
		if !strings.Contains(ce.Msg, "actual "+badSum) {
			t.Logf("launch %d: refusal names neither binary's digest as actual (a torn read?): %s", i, ce.Msg)
		}
		refused++
	}
	stop.Store(true)
	wg.Wait()
	b, _ := os.ReadFile(ran)
	if len(b) > 0 {
		t.Fatalf("the unverified binary ran %d times in %d launches with the verified digest:\n%s",
			bytes.Count(b, []byte("\n")), n, b)
	}
	t.Logf("%s: %d launches ran the verified binary, %d were refused, %d failed otherwise, %d swaps", how, ok, refused, failed, swaps.Load())
	if ok == 0 || refused == 0 {
		t.Errorf("the swaps did not race the launches (%d ran, %d refused): the test proves nothing", ok, refused)
	}
}

func isKind(err error, k storage.Kind) bool {
	ce, ok := err.(*storage.Error)
	return ok && ce.Kind == k
}

// TestVerifiedImage: with a digest the plugin runs from a sealed memfd, or
// from a private copy that is gone from disk once the plugin has started;
// no image is left in the temporary directory after a launch or a refusal.
func TestVerifiedImage(t *testing.T) {
	sum := sha256File(t, testExe())
	for _, image := range []string{"memfd", "copy"} {
		t.Run(image, func(t *testing.T) {
			tmp := t.TempDir()
			t.Setenv("TMPDIR", tmp)
			c := launch(t, "mem", func(cfg *LaunchConfig) {
				cfg.SHA256 = sum
				cfg.noMemfd = image == "copy"
			})
			exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", c.pid()))
			if err != nil {
				t.Fatal(err)
			}
			switch image {
			case "memfd":
				if !strings.HasPrefix(exe, "/memfd:retain-plugin:") {
					t.Fatalf("the plugin runs %s, not a memfd", exe)
				}
			case "copy":
				if !strings.HasPrefix(exe, tmp+"/retain-plugin-") || !strings.HasSuffix(exe, " (deleted)") {
					t.Fatalf("the plugin runs %s, not a removed private copy", exe)
				}
			}
			if _, err := c.Stat(context.Background(), "a"); !isKind(err, storage.ErrNotFound) {
				t.Fatal(err)
			}
			// The plugin closed the descriptor of its image it inherited.
			fds, _ := filepath.Glob(fmt.Sprintf("/proc/%d/fd/*", c.pid()))
			for _, fd := range fds {
				if l, _ := os.Readlink(fd); strings.HasPrefix(l, "/memfd:retain-plugin:") {
					t.Errorf("the plugin still holds its image open as %s", fd)
				}
			}
			wrong := sha256.Sum256(nil)
			_, err = Launch(context.Background(), func() LaunchConfig {
				cfg := testConfig("mem")
				cfg.SHA256 = hex.EncodeToString(wrong[:])
				cfg.noMemfd = image == "copy"
				return cfg
			}())
			wantKind(t, err, storage.ErrPermissionDenied)
			if left, _ := filepath.Glob(filepath.Join(tmp, "retain-plugin-*")); len(left) > 0 {
				t.Fatalf("left in TMPDIR: %v", left)
			}
		})
	}
}
