package latency

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// emulatorDir is where versitygw keeps its objects: in memory (/dev/shm)
// when it supports the user xattrs versitygw needs, so that at 64 requests
// in flight the harness measures retain's round trips rather than the
// emulator's fsyncs on a shared disk; on disk otherwise, or with
// RETAIN_LATENCY_DISK=1.
func emulatorDir(tb testing.TB) string {
	if os.Getenv("RETAIN_LATENCY_DISK") == "" {
		if d, err := os.MkdirTemp("/dev/shm", "retain-latency-"); err == nil {
			tb.Cleanup(func() { os.RemoveAll(d) })
			probe := filepath.Join(d, ".xattr")
			if f, err := os.Create(probe); err == nil {
				f.Close()
				if syscall.Setxattr(probe, "user.retain", []byte("1"), 0) == nil {
					os.Remove(probe)
					return d
				}
			}
		}
	}
	return tb.TempDir()
}
