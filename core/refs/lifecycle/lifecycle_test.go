package lifecycle

import (
	"testing"
	"time"

	"github.com/retain-dev/retain/core/refs/refmeta"
)

// The branch's expiry survives every lifecycle transition (a delete that
// marks the branch deleting and is rolled back to ready keeps it), and
// Parse accepts it; other reserved keys are still dropped.
func TestMetaKeepsTheExpiry(t *testing.T) {
	in := map[string]string{"who": "agent", refmeta.MetaExpires: "2030-01-01T00:00:00Z", "retain.other": "x"}
	for _, st := range []State{Creating, Ready, Deleting} {
		m := Meta(in, st, "op-1", &Owner{Host: "h", PID: 1}, Source{Branch: "", Version: 2}, time.Now())
		if m[refmeta.MetaExpires] != in[refmeta.MetaExpires] || m["who"] != "agent" || m["retain.other"] != "" {
			t.Fatalf("%s: %v", st, m)
		}
		if _, err := Parse(m); err != nil {
			t.Fatalf("%s: %v", st, err)
		}
	}
}
