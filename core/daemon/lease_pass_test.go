package daemon

import (
	"testing"
	"time"

	"github.com/retain-dev/retain/core/branch"
	"github.com/retain-dev/retain/core/lance"
	"github.com/retain-dev/retain/core/lease"
	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/tag"
)

func versionsOf(t *testing.T, s *storage.Store) []uint64 {
	t.Helper()
	ds, err := lance.Open(s, "v2-appends.lance")
	if err != nil {
		t.Fatal(err)
	}
	vs, err := ds.Versions(bg)
	if err != nil {
		t.Fatal(err)
	}
	var out []uint64
	for _, v := range vs {
		out = append(out, v.N)
	}
	return out
}

// A leased version survives the daemon's retention while the lease lives;
// the first retention pass after its expiry (plus the margin) reaps the
// lease and then removes the version.
func TestDaemonReapsExpiredLeasesBeforeRetention(t *testing.T) {
	_, s, loc := store(t, "v2-appends") // versions 1..3
	now := time.Now().UTC()
	if _, err := lease.Acquire(bg, s, lease.Request{Table: "v2-appends.lance", Version: 1, TTL: 30 * time.Minute}, lease.Options{Now: func() time.Time { return now }}); err != nil {
		t.Fatal(err)
	}
	d := &Daemon{Store: s.At(loc), Config: cfg(t, "interval: 1m\nretention:\n  keep_last: 1\n  every: 1h\n  writers_stopped: true\n"),
		Now: func() time.Time { return now }}
	r := d.Pass(bg)
	if r.Err() != nil || r.Leases == nil || r.Leases.Removed != 0 || len(r.Leases.Leases) != 1 {
		t.Fatalf("first pass: %v %+v", r.Err(), r.Leases)
	}
	if vs := versionsOf(t, s); len(vs) != 2 || vs[0] != 1 || vs[1] != 3 {
		t.Fatalf("versions after the first pass: %v, want [1 3] (v1 leased, v3 latest)", vs)
	}
	now = now.Add(time.Hour)
	r = d.Pass(bg)
	if r.Err() != nil || r.Leases == nil || r.Leases.Removed != 1 || r.LeasesError != "" {
		t.Fatalf("pass after expiry: %v %+v %s", r.Err(), r.Leases, r.LeasesError)
	}
	if vs := versionsOf(t, s); len(vs) != 1 || vs[0] != 3 {
		t.Fatalf("versions after the lease was reaped: %v, want [3]", vs)
	}
}

// A tag created with an expiry keeps its version until the first
// retention pass after the expiry (plus the margin) removes the tag, and
// then the version.
func TestDaemonRemovesExpiredTagsBeforeRetention(t *testing.T) {
	_, s, loc := store(t, "v2-appends")
	now := time.Now().UTC()
	ds, err := lance.Open(s, "v2-appends.lance")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tag.New(ds, tag.Options{}).Create(bg, "session-1", tag.CreateOptions{Version: 1, Expires: now.Add(30 * time.Minute)}); err != nil {
		t.Fatal(err)
	}
	d := &Daemon{Store: s.At(loc), Config: cfg(t, "interval: 1m\nexpiry_margin: 1m\nretention:\n  keep_last: 1\n  every: 1h\n  writers_stopped: true\n"),
		Now: func() time.Time { return now }}
	if r := d.Pass(bg); r.Err() != nil || r.Tags == nil || r.Tags.Removed != 0 {
		t.Fatalf("first pass: %v %+v", r.Err(), r.Tags)
	}
	if vs := versionsOf(t, s); len(vs) != 2 {
		t.Fatalf("versions %v, want [1 3]", vs)
	}
	now = now.Add(time.Hour)
	if r := d.Pass(bg); r.Err() != nil || r.Tags == nil || r.Tags.Removed != 1 || r.TagsError != "" {
		t.Fatalf("after expiry: %v %+v %s", r.Err(), r.Tags, r.TagsError)
	}
	if vs := versionsOf(t, s); len(vs) != 1 || vs[0] != 3 {
		t.Fatalf("versions %v, want [3]", vs)
	}
}

// A branch created with an expiry is deleted by the first retention pass
// after it (plus the margin), through the branch delete protocol.
func TestDaemonDeletesExpiredBranches(t *testing.T) {
	_, s, loc := store(t, "branch-tag")
	now := time.Now().UTC()
	if _, err := branch.Create(bg, s, "team/x", branch.CreateOptions{Table: "branch-tag", From: "exp@4", Expires: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	d := &Daemon{Store: s.At(loc), Config: cfg(t, "interval: 1m\nretention:\n  keep_last: 100\n  every: 1h\n  writers_stopped: true\n"),
		Now: func() time.Time { return now }}
	if r := d.Pass(bg); r.Err() != nil || r.Branches == nil || r.Branches.Deleted != 0 {
		t.Fatalf("before expiry: %v %+v", r.Err(), r.Branches)
	}
	now = now.Add(2 * time.Hour)
	r := d.Pass(bg)
	if r.Err() != nil || r.Branches == nil || r.Branches.Deleted != 1 || r.BranchesError != "" {
		t.Fatalf("after expiry: %v %+v %s", r.Err(), r.Branches, r.BranchesError)
	}
	ds, _ := lance.Open(s, "branch-tag.lance")
	if _, err := ds.ReadBranch(bg, "team/x"); err == nil {
		t.Fatal("the expired branch is still there")
	}
}
