package checkpoint

import (
	"errors"
	"testing"

	"github.com/retain-dev/retain/core/checkpoint/registry"
	"github.com/retain-dev/retain/core/storage"
)

// Protocol refusals match their sentinel and its storage kind, through the
// error type they share with the registry.
func TestRefusalKinds(t *testing.T) {
	for sentinel, kind := range kindOf {
		err := errorf("op", "k", sentinel, "why")
		if !errors.Is(err, sentinel) || !errors.Is(err, kind) {
			t.Errorf("%v: does not match its sentinel and kind %s", sentinel, kind)
		}
	}
	err := refusal("create", "n", registry.ErrNameTaken, "taken", nil)
	if !errors.Is(err, storage.ErrAlreadyExists) || errors.Is(err, storage.ErrNotFound) {
		t.Errorf("a registry sentinel keeps the registry's kind: %v", err)
	}
}
