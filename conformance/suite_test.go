package conformance_test

import (
	"os"
	"testing"

	"github.com/retain-dev/retain/adapters/localfs"
	"github.com/retain-dev/retain/conformance"
	"github.com/retain-dev/retain/core"
	"github.com/retain-dev/retain/core/memstore"
)

// adapters are what this test binary serves as plugins of itself and
// opens in its worker processes: the real ones and the broken ones.
func adapters() []core.Adapter {
	return append([]core.Adapter{memstore.Adapter, localfs.Adapter}, brokenAdapters()...)
}

func TestMain(m *testing.M) {
	conformance.Dispatch(adapters())
	os.Exit(m.Run())
}

func TestSuiteMemoryInProcess(t *testing.T) {
	conformance.RunTests(t, conformance.Config{Adapter: "memory", InProcess: true, Adapters: adapters()})
}

func TestSuiteLocalfsInProcess(t *testing.T) {
	conformance.RunTests(t, conformance.Config{Adapter: "localfs", InProcess: true, Adapters: adapters(), ReportDir: t.TempDir()})
}

func TestSuiteLocalfsPlugin(t *testing.T) {
	conformance.RunTests(t, conformance.Config{Adapter: "localfs", Adapters: adapters(), ReportDir: t.TempDir()})
}
