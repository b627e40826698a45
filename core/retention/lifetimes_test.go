package retention

import (
	"strings"
	"testing"
	"time"

	"github.com/retain-dev/retain/core/lance"
	"github.com/retain-dev/retain/core/lease"
	"github.com/retain-dev/retain/core/refs/refmeta"
)

// TestPreviewNamesLeases: the preview keeps a leased version by its lease
// and says until when, and by whose clock.
func TestPreviewNamesLeases(t *testing.T) {
	dir, _ := setup(t)
	s := open(t, dir, false)
	l, err := lease.Acquire(bg, s, lease.Request{Table: "deletes.lance", Version: 1, TTL: time.Hour}, lease.Options{Actor: "scan-7"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := Preview(bg, s, Policy{KeepLast: 1})
	if err != nil {
		t.Fatal(err)
	}
	if d := find(t, p, "deletes.lance", "main", 1); !d.Keep || !has(d.Reasons, "reader lease "+l.Tag) {
		t.Fatalf("v1: keep=%v %q", d.Keep, d.Reasons)
	}
	var note string
	for _, tp := range p.Tables {
		if tp.Table == "deletes.lance" {
			note = strings.Join(tp.Notes, "\n")
		}
	}
	want := "reader lease " + l.Tag + ` (holder "scan-7") keeps main v1 until ` + l.Expires.Format(time.RFC3339) + ", by the reaper's clock plus its margin"
	if !strings.Contains(note, want) {
		t.Fatalf("notes %q, want %q", note, want)
	}
}

// TestLifetimeNotes: every lease and expiry a plan read is described:
// live, expired, and unreadable (never removed).
func TestLifetimeNotes(t *testing.T) {
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	exp := func(d time.Duration) map[string]string {
		return map[string]string{refmeta.MetaExpires: refmeta.FormatExpiry(now.Add(d))}
	}
	tags := []lance.Tag{
		{Name: "nightly", Version: 3, Metadata: exp(time.Hour)},
		{Name: "old", Version: 2, Metadata: exp(-time.Hour)},
		{Name: "odd", Version: 2, Metadata: map[string]string{refmeta.MetaExpires: "soon"}},
		{Name: "plain", Version: 2},
		{Name: "ogcp_lease_aqz2rbnhv2gvg5ir4zwahvn6tq", Version: 1, Metadata: map[string]string{lease.MetaExpires: refmeta.FormatExpiry(now.Add(-time.Minute)), lease.MetaHolder: "r"}},
	}
	branches := []lance.Branch{{Name: "session/a", Metadata: exp(-time.Minute)}, {Name: "session/b", Metadata: exp(24 * time.Hour)}, {Name: "keep"}}
	got := strings.Join(lifetimeNotes(tags, branches, now), "\n")
	for _, want := range []string{
		"tag nightly keeps main v3 until it expires at 2026-12-04T13:00:00Z; then the daemon removes it (past its expiry_margin)",
		"tag old expired at 2026-12-04T11:00:00Z but keeps main v2 until the daemon removes it, on its first pass past the margin",
		"tag odd keeps main v2 and is never removed by expiry",
		`reader lease ogcp_lease_aqz2rbnhv2gvg5ir4zwahvn6tq (holder "r") expired at 2026-12-04T11:59:00Z but keeps main v1 until it is reaped`,
		"branch session/a expired at 2026-12-04T11:59:00Z: the daemon deletes it, on its first pass past the margin (expiry_margin), through the branch delete protocol",
		"branch session/b expires at 2026-12-05T12:00:00Z",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("notes lack %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "plain") || strings.Contains(got, "branch keep") {
		t.Errorf("a ref without a lifetime is described:\n%s", got)
	}
}
