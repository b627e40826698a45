package conformance_test

import (
	"os"
	"testing"

	"github.com/retain-dev/retain/sdk/conformance"
	"github.com/retain-dev/retain/sdk/core"
	"github.com/retain-dev/retain/sdk/memstore"
)

// The suite on the reference driver. The cross-process cases need a store
// that processes share: they run on localfs (adapters/localfs), on every
// emulator, and on the example adapter (sdk/examples).
var adapters = []core.Adapter{memstore.Adapter}

func TestMain(m *testing.M) {
	conformance.Dispatch(adapters)
	os.Exit(m.Run())
}

func TestSuiteMemoryInProcess(t *testing.T) {
	conformance.RunTests(t, conformance.Config{Adapter: "memory", InProcess: true, Adapters: adapters})
}
