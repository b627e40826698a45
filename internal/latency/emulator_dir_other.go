//go:build !linux

package latency

import "testing"

// emulatorDir is where versitygw keeps its objects: on disk here.
func emulatorDir(tb testing.TB) string { return tb.TempDir() }
