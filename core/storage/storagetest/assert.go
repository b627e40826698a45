package storagetest

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/retain-dev/retain/core/storage"
)

// MustPut overwrites key with body through d and fails the test on error.
func MustPut(t testing.TB, d storage.Driver, key, body string) storage.Info {
	t.Helper()
	info, err := d.Put(context.Background(), key, strings.NewReader(body), storage.PutOptions{Mode: storage.PutOverwrite})
	if err != nil {
		t.Fatalf("put %q: %v", key, err)
	}
	return info
}

// WantKind fails the test unless err is a *storage.Error whose kind (the
// first in its chain, as storage.KindOf reads it) is kind; it returns it.
func WantKind(t testing.TB, what string, err error, kind storage.Kind) *storage.Error {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: got no error, want %v", what, kind)
	}
	var ce *storage.Error
	if !errors.As(err, &ce) {
		t.Fatalf("%s: error %v (%T) is not a *core.Error", what, err, err)
	}
	if ce.Kind != kind {
		t.Fatalf("%s: got kind %v (%v), want %v", what, ce.Kind, err, kind)
	}
	return ce
}
