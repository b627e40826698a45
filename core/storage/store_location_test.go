package storage_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/memstore"
)

// A store knows where it lives only when its opener says so: NewStore
// alone gives the zero Location (the claim's global scope, as a caller
// passing a zero Location got), At gives a copy aimed at loc over the same
// driver and leaves the original as it was.
func TestStoreAt(t *testing.T) {
	ctx := context.Background()
	s, err := storage.NewStore(ctx, "memstore", memstore.New())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := s.Location(); !reflect.DeepEqual(got, storage.Location{}) {
		t.Fatalf("NewStore's location = %+v, want the zero Location", got)
	}
	loc := storage.Location{Scheme: "s3", Bucket: "b", Prefix: "p"}
	at := s.At(loc)
	if got := at.Location(); !reflect.DeepEqual(got, loc) {
		t.Fatalf("At(%+v).Location() = %+v", loc, got)
	}
	if got := s.Location(); !reflect.DeepEqual(got, storage.Location{}) {
		t.Fatalf("At changed the original store's location to %+v", got)
	}
	if at.Adapter() != s.Adapter() || at.Capabilities().Limits != s.Capabilities().Limits {
		t.Fatalf("At changed the adapter or its capabilities")
	}
	if _, err := at.PutBytes(ctx, "k", []byte("x"), storage.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Stat(ctx, "k"); err != nil {
		t.Fatalf("a write through the copy is not in the original's driver: %v", err)
	}
}
