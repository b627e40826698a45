package s3

import (
	"os"
	"testing"

	"github.com/retain-dev/retain/conformance"
	"github.com/retain-dev/retain/core/storage"
)

func TestMain(m *testing.M) {
	conformance.Dispatch([]storage.Adapter{Adapter})
	os.Exit(m.Run())
}
