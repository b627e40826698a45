package daemon

import (
	"errors"
	"testing"

	"github.com/retain-dev/retain/adapters/localfs"
	"github.com/retain-dev/retain/core/retention"
	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/storagetest"
)

// TestOnlineDaemonRefusesOutagePlan: an online daemon (writers may
// commit, so it needs older_than >= 1h) resumes whatever run is open,
// including a `--confirm-write-outage` run whose window was keep-last 1
// only, and carries out its plan while writers are active: Resume never
// checks the journaled policy against the online rule (the mode is not
// even journaled).
func TestOnlineDaemonRefusesOutagePlan(t *testing.T) {
	dir, _, loc := store(t, "deletes", "branch-tag")
	drv, err := localfs.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	failing, err := storage.NewStore(bg, "localfs", &storagetest.Fail{Driver: drv, Kind: storage.ErrUnknown, Deletes: storagetest.Prefix("branch-tag.lance/")})
	if err != nil {
		t.Fatal(err)
	}
	defer failing.Close()
	rep, err := retention.Run(bg, failing.At(loc), retention.Policy{KeepLast: 1}, retention.RunOptions{ConfirmWriteOutage: true})
	if !errors.Is(err, retention.ErrRunIncomplete) {
		t.Fatalf("want an incomplete outage run: %v", err)
	}
	_, s, _ := func() (string, *storage.Store, storage.Location) {
		d, err := localfs.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		st, err := storage.NewStore(bg, "localfs", d)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return dir, st, loc
	}()
	before := manifests(t, dir, "branch-tag.lance")
	d := &Daemon{Store: s.At(loc), Config: cfg(t, "retention:\n  older_than: 336h\n")} // online
	r := d.Pass(bg)
	after := manifests(t, dir, "branch-tag.lance")
	if r.Resumed != nil && after < before {
		t.Fatalf("the online daemon carried out outage run %s's keep-last-only plan (policy %+v): branch-tag manifests %d -> %d",
			rep.OperationID, r.Resumed.Policy, before, after)
	}
}
