package retention

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLostPinRefusesTheStoreEvenIsolated: a pinned version that is gone
// (its pin tag in order) is an unresolvable root: reconcile reports it and
// the whole store's cleanup is refused, naming the object and the way out,
// even with IsolateReconcile (which skips other tables' conflicts), and
// nothing is deleted.
func TestLostPinRefusesTheStoreEvenIsolated(t *testing.T) {
	dir, _ := setup(t)
	v3 := "deletes.lance/_versions/18446744073709551612.manifest"
	if err := os.Remove(filepath.Join(dir, v3)); err != nil {
		t.Fatal(err)
	}
	s := open(t, dir, false)
	before := len(tableFiles(t, dir))
	_, err := Run(bg, s, Policy{KeepLast: 1}, RunOptions{ConfirmWriteOutage: true, IsolateReconcile: true})
	if !errors.Is(err, ErrRunRefused) || !strings.Contains(err.Error(), v3) || !strings.Contains(err.Error(), "retain checkpoint drop-lost ") {
		t.Fatalf("a lost pin: %v", err)
	}
	if after := len(tableFiles(t, dir)); after != before {
		t.Fatalf("files %d -> %d after a refusal", before, after)
	}
}
