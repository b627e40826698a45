//go:build linux

package localfs

import (
	"testing"

	"github.com/retain-dev/retain/conformance"
	"github.com/retain-dev/retain/core/storage"
)

// testAdapters are what this test binary serves as plugins of itself and
// opens in its worker processes (TestMain calls conformance.Dispatch): the
// real adapter and the broken ones.
func testAdapters() []storage.Adapter {
	return append([]storage.Adapter{Adapter}, brokenAdapters()...)
}

func TestSuiteLocalfsInProcess(t *testing.T) {
	conformance.RunTests(t, conformance.Config{Adapter: "localfs", InProcess: true, Adapters: testAdapters(), ReportDir: t.TempDir()})
}

func TestSuiteLocalfsPlugin(t *testing.T) {
	conformance.RunTests(t, conformance.Config{Adapter: "localfs", Adapters: testAdapters(), ReportDir: t.TempDir()})
}
