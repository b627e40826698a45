package bundled

import (
	"context"
	"testing"

	"github.com/retain-dev/retain/core/storage"
)

// Every in-process opener aims the store at the location it opened, so the
// operations that scope their claim by it (a file store: the host scope)
// get it from the store. A read-only open keeps ReadOnly in it.
func TestInProcessOpenersSetLocation(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	want, err := storage.ParseLocation(dir)
	if err != nil {
		t.Fatal(err)
	}
	opens := map[string]func() (*storage.Store, error){
		"OpenInProcess":         func() (*storage.Store, error) { return OpenInProcess(ctx, dir) },
		"OpenReadOnlyInProcess": func() (*storage.Store, error) { return OpenReadOnlyInProcess(ctx, dir) },
		"OpenLocationInProcess": func() (*storage.Store, error) { return OpenLocationInProcess(ctx, want) },
	}
	for name, open := range opens {
		s, err := open()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got := s.Location()
		s.Close()
		if got.Scheme != "file" || got.Path != want.Path || got.String() != want.String() {
			t.Errorf("%s: Location() = %+v, want %+v", name, got, want)
		}
		if ro := name == "OpenReadOnlyInProcess"; got.ReadOnly != ro {
			t.Errorf("%s: Location().ReadOnly = %v, want %v", name, got.ReadOnly, ro)
		}
	}
}
