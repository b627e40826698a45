//go:build linux

package localfs

import (
	"testing"

	"github.com/retain-dev/retain/sdk/conformance"
	"github.com/retain-dev/retain/sdk/core"
)

// testAdapters are what this test binary serves as plugins of itself and
// opens in its worker processes (TestMain calls conformance.Dispatch): the
// real adapter and the broken ones.
func testAdapters() []core.Adapter {
	return append([]core.Adapter{Adapter}, brokenAdapters()...)
}

func TestSuiteLocalfsInProcess(t *testing.T) {
	conformance.RunTests(t, conformance.Config{Adapter: "localfs", InProcess: true, Adapters: testAdapters(), ReportDir: t.TempDir()})
}

func TestSuiteLocalfsPlugin(t *testing.T) {
	conformance.RunTests(t, conformance.Config{Adapter: "localfs", Adapters: testAdapters(), ReportDir: t.TempDir()})
}
