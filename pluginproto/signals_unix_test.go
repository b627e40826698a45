//go:build unix

package pluginproto

import (
	"bytes"
	"syscall"
	"testing"
	"time"

	"github.com/retain-dev/retain/core/storage"
)

// TestPluginOutlivesGroupSignals: SIGTERM and SIGINT sent to the plugin
// (as `kill -TERM -PGID`, systemd's stop and `timeout` send them to the
// whole group) leave it serving: a plugin ends with its host, never before
// it, so a host finishing its work on a signal still has its store.
func TestPluginOutlivesGroupSignals(t *testing.T) {
	ctx := ctxT(t, 30*time.Second)
	c := launch(t, "mem")
	pid := c.pid()
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		if err := syscall.Kill(pid, sig); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(300 * time.Millisecond)
	if processGone(pid) {
		t.Fatal("the plugin died of SIGTERM/SIGINT before its host")
	}
	if _, err := c.Put(ctx, "after-signal", bytes.NewReader([]byte("x")), storage.PutOptions{}); err != nil {
		t.Fatalf("put after the signals: %v", err)
	}
	if _, err := c.Stat(ctx, "after-signal"); err != nil {
		t.Fatalf("stat after the signals: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if !processGone(pid) {
		t.Errorf("plugin %d still running after Close", pid)
	}
}
