package lance

import (
	"os"
	"testing"

	"github.com/retain-dev/retain/adapters/localfs"
	"github.com/retain-dev/retain/internal/adapterbench"
)

// TestMain lets the cleanup benchmark's child reach localfs through the
// plugin boundary: this test binary serves it as a plugin of itself.
func TestMain(m *testing.M) {
	adapterbench.Dispatch(localfs.Adapter)
	os.Exit(m.Run())
}
