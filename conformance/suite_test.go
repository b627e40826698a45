package conformance_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/retain-dev/retain/conformance"
	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/memstore"
)

// The suite on the reference driver. The cross-process cases need a store
// that processes share: they run on localfs (adapters/localfs), on every
// emulator, and on the example adapter (conformance/examples).
var adapters = []storage.Adapter{memstore.Adapter}

// noDispatch makes TestMain leave out Dispatch, as a vendor's TestMain
// that forgot the call does.
const noDispatch = "RETAIN_CONFORMANCE_TEST_NO_DISPATCH"

func TestMain(m *testing.M) {
	if os.Getenv(noDispatch) == "" {
		conformance.Dispatch(adapters)
	}
	os.Exit(m.Run())
}

// A test binary whose TestMain does not call Dispatch gets an error naming
// the call, at once, rather than launching copies of itself (each of which
// would run the suite again) until a timeout.
func TestRunWithoutDispatchNamesTheFix(t *testing.T) {
	t.Setenv(noDispatch, "1") // the plugin child inherits it
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, err := conformance.Run(ctx, conformance.Config{Adapter: "memory", Adapters: adapters, Run: "^contract/"})
	if !errors.Is(err, storage.ErrInvalidArgument) || !strings.Contains(err.Error(), "conformance.Dispatch") {
		t.Fatalf("Run without Dispatch: %v; want invalid argument naming conformance.Dispatch", err)
	}
}

func TestSuiteMemoryInProcess(t *testing.T) {
	conformance.RunTests(t, conformance.Config{Adapter: "memory", InProcess: true, Adapters: adapters})
}
