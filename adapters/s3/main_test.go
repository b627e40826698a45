package s3

import (
	"os"
	"testing"

	"github.com/retain-dev/retain/sdk/conformance"
	"github.com/retain-dev/retain/sdk/core"
)

func TestMain(m *testing.M) {
	conformance.Dispatch([]core.Adapter{Adapter})
	os.Exit(m.Run())
}
