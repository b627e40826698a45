package daemon

import (
	"os"
	"path/filepath"
	"testing"
)

// TestOncePassKeepsRecord: `retain daemon --once` (a cron job)
// calls Pass on a fresh Daemon without Run, so the record in the store is
// never loaded: a failed pass overwrites _retain/maintenance/state.json
// without the last completed retention (and its operation), and the
// failure count restarts at 1 on every failing pass.
func TestOncePassKeepsRecord(t *testing.T) {
	dir, s, loc := store(t, "deletes")
	c := cfg(t, "retention:\n  keep_last: 1\n  writers_stopped: true\n")
	if r := (&Daemon{Store: s.At(loc), Config: c}).Pass(bg); !r.RetentionCompleted {
		t.Fatalf("first --once: %+v", r)
	}
	// Make the next retention fail: a corrupt manifest refuses the store.
	key := filepath.Join(dir, "deletes.lance", "_versions", "18446744073709551610.manifest")
	if err := os.WriteFile(key, []byte("not a manifest"), 0o644); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if r := (&Daemon{Store: s.At(loc), Config: c}).Pass(bg); r.RetentionCompleted {
			t.Fatalf("failing --once completed: %+v", r)
		}
	}
	st, err := ReadState(bg, s)
	if err != nil {
		t.Fatal(err)
	}
	if st.LastRetention == nil || st.LastRetentionOperation == "" || st.RetentionFailures != 2 {
		t.Fatalf("after a completed and two failed --once passes the record says last retention %v (op %q), failures %d",
			st.LastRetention, st.LastRetentionOperation, st.RetentionFailures)
	}
}
