package testkit

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/retain-dev/retain/sdk/core"
)

// MustPut overwrites key with body through d and fails the test on error.
func MustPut(t testing.TB, d core.Driver, key, body string) core.Info {
	t.Helper()
	info, err := d.Put(context.Background(), key, strings.NewReader(body), core.PutOptions{Mode: core.PutOverwrite})
	if err != nil {
		t.Fatalf("put %q: %v", key, err)
	}
	return info
}

// WantKind fails the test unless err is a *core.Error whose kind (the
// first in its chain, as core.KindOf reads it) is kind; it returns it.
func WantKind(t testing.TB, what string, err error, kind core.Kind) *core.Error {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: got no error, want %v", what, kind)
	}
	var ce *core.Error
	if !errors.As(err, &ce) {
		t.Fatalf("%s: error %v (%T) is not a *core.Error", what, err, err)
	}
	if ce.Kind != kind {
		t.Fatalf("%s: got kind %v (%v), want %v", what, ce.Kind, err, kind)
	}
	return ce
}
