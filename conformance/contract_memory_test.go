package conformance_test

import (
	"context"
	"testing"

	"github.com/retain-dev/retain/conformance"
	"github.com/retain-dev/retain/core"
	"github.com/retain-dev/retain/core/memstore"
)

func TestContractMemory(t *testing.T) {
	conformance.RunContract(t, func(t *testing.T) *core.Store {
		s, err := core.NewStore(context.Background(), "memory", memstore.New())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}
