package storage_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/retain-dev/retain/core/storage"
)

// A URI fragment is refused, never silently dropped; '#' in a plain path
// is a character of the path, and %23 in a URI is one too.
func TestParseLocationRefusesFragment(t *testing.T) {
	for _, bad := range []string{"file:///data/x#frag", "file:///data/x#", "s3://b/p#v2", "s3://b/p?region=x#y", "gs://b#"} {
		_, err := storage.ParseLocation(bad)
		if !errors.Is(err, storage.ErrInvalidArgument) || !strings.Contains(err.Error(), "fragment") {
			t.Errorf("%q: want invalid argument naming the fragment, got %v", bad, err)
		}
	}
	if loc, err := storage.ParseLocation("/data/x#1"); err != nil || loc.Path != "/data/x#1" {
		t.Errorf("plain path with '#': %+v %v", loc, err)
	}
	if loc, err := storage.ParseLocation("s3://b/a%23b"); err != nil || loc.Prefix != "a#b" {
		t.Errorf("%%23: %+v %v", loc, err)
	}
}
