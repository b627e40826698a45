package lease_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/retain-dev/retain/adapters/localfs"
	"github.com/retain-dev/retain/core/checkpoint"
	"github.com/retain-dev/retain/core/checkpoint/registry"
	"github.com/retain-dev/retain/core/lance"
	"github.com/retain-dev/retain/core/lease"
	"github.com/retain-dev/retain/core/retention"
	"github.com/retain-dev/retain/core/storage"
)

var bg = context.Background()

const table = "v2-appends.lance" // versions 1..3

func store(t *testing.T) (*storage.Store, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "db")
	if err := os.CopyFS(filepath.Join(dir, table), os.DirFS(filepath.Join("..", "lance", "testdata", table))); err != nil {
		t.Fatal(err)
	}
	d, err := localfs.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	s, err := storage.NewStore(bg, "localfs", d)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s.At(storage.Location{Scheme: "file", Path: dir}), dir
}

func versions(t *testing.T, s *storage.Store) []uint64 {
	t.Helper()
	ds, err := lance.Open(s, table)
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

func cleanup(t *testing.T, s *storage.Store) *retention.RunReport {
	t.Helper()
	rep, err := retention.Run(bg, s, retention.Policy{KeepLast: 1}, retention.RunOptions{ConfirmWriteOutage: true})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// A leased version survives cleanup while the lease lives, reconcile takes
// the lease tag for no conflict, the reaper keeps it until its expiry plus
// the margin, and the next cleanup after the reap removes the version.
func TestLeasedVersionSurvivesUntilReaped(t *testing.T) {
	s, _ := store(t)
	now := time.Now().UTC()
	clock := func() time.Time { return now }
	l, err := lease.Acquire(bg, s, lease.Request{Table: table, Version: 1, TTL: 30 * time.Minute}, lease.Options{Actor: "scanner", Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	if l.Version != 1 || l.Branch != "main" || l.Holder != "scanner" || !l.Expires.Equal(now.Add(30*time.Minute)) || !registry.IsLeaseTag(l.Tag) {
		t.Fatalf("lease: %+v", l)
	}
	// Reconcile passes the lease by: no conflict that would refuse cleanup.
	rep, err := checkpoint.Reconcile(bg, s)
	if err != nil || len(rep.Conflicts) != 0 {
		t.Fatalf("reconcile with a lease: %v %+v", err, rep)
	}
	cleanup(t, s)
	if got := versions(t, s); len(got) != 2 || got[0] != 1 || got[1] != 3 {
		t.Fatalf("versions after cleanup with v1 leased: %v, want [1 3]", got)
	}
	// Past expiry but within the margin: kept.
	now = now.Add(33 * time.Minute)
	r, err := lease.Reap(bg, s, lease.ReapOptions{Now: clock})
	if err != nil || r.Removed != 0 || len(r.Leases) != 1 || !strings.Contains(r.Leases[0].Why, "within the 5m0s margin") {
		t.Fatalf("reap within the margin: %v %+v", err, r)
	}
	now = now.Add(3 * time.Minute)
	if r, err := lease.Reap(bg, s, lease.ReapOptions{Now: clock, DryRun: true}); err != nil || r.Removed != 1 {
		t.Fatalf("dry-run reap: %v %+v", err, r)
	}
	if ls, _ := lease.List(bg, s, table); len(ls) != 1 {
		t.Fatal("a dry-run reap removed the lease")
	}
	if r, err := lease.Reap(bg, s, lease.ReapOptions{Now: clock}); err != nil || r.Removed != 1 || !r.Leases[0].Reaped {
		t.Fatalf("reap after the margin: %v %+v", err, r)
	}
	cleanup(t, s)
	if got := versions(t, s); len(got) != 1 || got[0] != 3 {
		t.Fatalf("versions after the lease was reaped: %v, want [3]", got)
	}
	if _, err := lease.Renew(bg, s, table, l.ID, time.Hour, lease.Options{}); !errors.Is(err, lease.ErrGone) || !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("renew a reaped lease: %v", err)
	}
}

func TestRenewAndRelease(t *testing.T) {
	s, _ := store(t)
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	l, err := lease.Acquire(bg, s, lease.Request{Table: table, TTL: time.Hour}, lease.Options{Now: clock})
	if err != nil || l.Version != 3 {
		t.Fatalf("acquire the newest: %+v %v", l, err)
	}
	now = now.Add(50 * time.Minute)
	r, err := lease.Renew(bg, s, table, l.ID, time.Hour, lease.Options{Now: clock})
	if err != nil || !r.Expires.Equal(now.Add(time.Hour)) || r.Token == l.Token {
		t.Fatalf("renew: %+v %v", r, err)
	}
	// The reaper at the old expiry plus the margin keeps the renewed lease.
	if res, err := lease.Reap(bg, s, lease.ReapOptions{Now: func() time.Time { return l.Expires.Add(10 * time.Minute) }}); err != nil || res.Removed != 0 {
		t.Fatalf("reap of a renewed lease: %+v %v", res, err)
	}
	if _, err := lease.Release(bg, s, table, l.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := lease.Release(bg, s, table, l.ID); !errors.Is(err, lease.ErrGone) {
		t.Fatalf("release twice: %v", err)
	}
	if _, err := lease.Renew(bg, s, table, "not-an-id", time.Hour, lease.Options{}); !errors.Is(err, storage.ErrInvalidArgument) {
		t.Fatalf("renew a bad id: %v", err)
	}
	for _, ttl := range []time.Duration{0, -time.Second, lease.MaxTTL + time.Second} {
		if _, err := lease.Acquire(bg, s, lease.Request{Table: table, TTL: ttl}, lease.Options{}); !errors.Is(err, storage.ErrInvalidArgument) {
			t.Errorf("ttl %s: %v", ttl, err)
		}
	}
	if ls, _ := lease.List(bg, s, table); len(ls) != 0 {
		t.Fatalf("leases left: %+v", ls)
	}
}

// A version a cleanup already removed versions past is refused, and the
// refused lease leaves no tag: a cleanup publishing that boundary may be
// deleting it now.
func TestAcquireBehindTheBoundaryRefused(t *testing.T) {
	s, _ := store(t)
	ds, err := lance.Open(s, table)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ds.CreateTag(bg, "keep-v1", 1, nil); err != nil {
		t.Fatal(err)
	}
	cleanup(t, s) // removes v2 (v1 tagged, v3 latest): boundary main v2
	if got := versions(t, s); len(got) != 2 {
		t.Fatalf("versions %v", got)
	}
	_, err = lease.Acquire(bg, s, lease.Request{Table: table, Version: 1, TTL: time.Hour}, lease.Options{})
	if !errors.Is(err, lease.ErrBehindBoundary) || !errors.Is(err, storage.ErrPreconditionFailed) {
		t.Fatalf("acquire behind the boundary: %v", err)
	}
	if ls, _ := lease.List(bg, s, table); len(ls) != 0 {
		t.Fatalf("a refused lease left its tag: %+v", ls)
	}
	if _, err := lease.Acquire(bg, s, lease.Request{Table: table, Version: 3, TTL: time.Hour}, lease.Options{}); err != nil {
		t.Fatalf("acquire ahead of the boundary: %v", err)
	}
}

// A lease whose expiry does not parse is never reaped.
func TestReapKeepsAnUnreadableLease(t *testing.T) {
	s, _ := store(t)
	l, err := lease.Acquire(bg, s, lease.Request{Table: table, TTL: time.Minute}, lease.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ds, _ := lance.Open(s, table)
	tg, err := ds.ReadTag(bg, l.Tag)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ds.UpdateTagFile(bg, tg, map[string]string{lease.MetaExpires: "soon"}, lance.UpdateTagOptions{}); err != nil {
		t.Fatal(err)
	}
	r, err := lease.Reap(bg, s, lease.ReapOptions{Now: func() time.Time { return time.Now().Add(24 * time.Hour) }})
	if err != nil || r.Removed != 0 || !strings.Contains(r.Leases[0].Why, `"soon", not a time`) {
		t.Fatalf("reap of an unreadable lease: %v %+v", err, r)
	}
}

// A lease on a branch whose delete has begun (its branch file marked or
// gone) is refused and leaves no tag: the delete's re-read of the tags
// may already have passed.
func TestAcquireOnABranchBeingDeletedRefused(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	if err := os.CopyFS(filepath.Join(dir, "branch-tag.lance"), os.DirFS(filepath.Join("..", "lance", "testdata", "branch-tag.lance"))); err != nil {
		t.Fatal(err)
	}
	d, err := localfs.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	s, err := storage.NewStore(bg, "localfs", d)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s = s.At(storage.Location{Scheme: "file", Path: dir})
	if _, err := lease.Acquire(bg, s, lease.Request{Table: "branch-tag.lance", Branch: "exp", TTL: time.Hour}, lease.Options{}); err != nil {
		t.Fatalf("a lease on a live branch: %v", err)
	}
	if err := os.Remove(filepath.Join(dir, "branch-tag.lance", "_refs", "branches", "exp.json")); err != nil {
		t.Fatal(err)
	}
	_, err = lease.Acquire(bg, s, lease.Request{Table: "branch-tag.lance", Branch: "exp", Version: 4, TTL: time.Hour}, lease.Options{})
	if !errors.Is(err, lease.ErrBranchGoing) {
		t.Fatalf("a lease on a branch being deleted: %v", err)
	}
	if ls, _ := lease.List(bg, s, "branch-tag.lance"); len(ls) != 1 {
		t.Fatalf("leases %d, want only the first", len(ls))
	}
}

// A lease tag whose id does not parse is released by its tag name.
func TestReleaseByTagName(t *testing.T) {
	s, _ := store(t)
	ds, _ := lance.Open(s, table)
	if _, err := ds.CreateTag(bg, registry.LeaseTagPrefix+"junk", 1, map[string]string{lease.MetaExpires: "2030-01-01T00:00:00Z"}); err != nil {
		t.Fatal(err)
	}
	ls, _ := lease.List(bg, s, table)
	if len(ls) != 1 || ls[0].Problem == "" {
		t.Fatalf("a bad lease: %+v", ls)
	}
	if _, err := lease.Release(bg, s, table, registry.ID(ls[0].Tag)); err != nil {
		t.Fatalf("release by tag name: %v", err)
	}
	if ls, _ := lease.List(bg, s, table); len(ls) != 0 {
		t.Fatalf("left: %+v", ls)
	}
}
