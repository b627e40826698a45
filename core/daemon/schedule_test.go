package daemon

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/retain-dev/retain/core/checkpoint"
	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/claim"
)

func TestScheduleSlotsNamesAndPattern(t *testing.T) {
	at := time.Date(2026, 12, 2, 13, 47, 12, 0, time.FixedZone("CET", 3600)) // 12:47:12 UTC, a Wednesday
	for _, c := range []struct {
		s          Schedule
		slot, name string
		match      string
	}{
		{Schedule{Name: "hourly/{{.Time}}", Every: Duration(time.Hour)}, "2026-12-02T12:00:00Z", "hourly/20261202T120000Z", "hourly/*"},
		{Schedule{Name: "daily/{{.Slot.Format \"2006-01-02\"}}", Every: Duration(24 * time.Hour), Offset: Duration(2 * time.Hour)}, "2026-12-02T02:00:00Z", "daily/2026-12-02", "daily/*"},
		{Schedule{Name: "daily/{{.Slot.Format \"2006-01-02\"}}", Every: Duration(24 * time.Hour), Offset: Duration(13 * time.Hour)}, "2026-12-01T13:00:00Z", "daily/2026-12-01", "daily/*"},
		{Schedule{Name: "weekly-{{.Time}}-main", Every: Duration(7 * 24 * time.Hour)}, "2026-11-30T00:00:00Z", "weekly-20261130T000000Z-main", "weekly-*-main"},
		{Schedule{Name: "q/{{.Time}}", Every: Duration(15 * time.Minute)}, "2026-12-02T12:45:00Z", "q/20261202T124500Z", "q/*"},
	} {
		slot := c.s.Slot(at)
		name, err := c.s.NameAt(slot)
		match, merr := c.s.Match()
		if err != nil || merr != nil || slot.Format(time.RFC3339) != c.slot || name != c.name || match != c.match {
			t.Errorf("%s every %s: slot %s name %q match %q (%v %v), want %s %q %q", c.s.Name, time.Duration(c.s.Every), slot.Format(time.RFC3339), name, match, err, merr, c.slot, c.name, c.match)
		}
		if _, err := c.s.validate(time.Minute); err != nil {
			t.Errorf("%s: %v", c.s.Name, err)
		}
	}
}

// Every refusal of a schedule names the line to fix.
func TestScheduleConfigRefusals(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name, text string
		line       int
		want       string
	}{
		{"no-every.yaml", "interval: 1m\ncheckpoints:\n  - name: \"h/{{.Time}}\"\n", 3, `every is required`},
		{"no-slot.yaml", "interval: 1m\ncheckpoints:\n  - name: hourly\n    every: 1h\n", 3, `gives "hourly" to the slots of`},
		{"coarse.yaml", "interval: 1m\ncheckpoints:\n  - name: 'd/{{.Slot.Format \"2006-01-02\"}}'\n    every: 1h\n", 3, `to the slots of 2001-02-03T04:00:00Z and 2001-02-03T05:00:00Z`},
		{"repeats.yaml", "interval: 1m\ncheckpoints:\n  - name: 'h/{{.Slot.Format \"15\"}}'\n    every: 1h\n", 3, `to the slots of 2001-02-03T04:00:00Z and 2001-02-04T04:00:00Z`},
		{"bare.yaml", "interval: 1m\ncheckpoints:\n  - name: '{{.Time}}'\n    every: 1h\n", 3, `give the series a literal prefix`},
		{"colon.yaml", "interval: 1m\ncheckpoints:\n  - name: 'h/{{.Slot.Format \"15:04\"}}'\n    every: 1h\n", 3, `which is not a checkpoint name`},
		{"short.yaml", "interval: 1h\ncheckpoints:\n  - name: \"h/{{.Time}}\"\n    every: 30m\n", 4, `shorter than the pass interval 1h0m0s`},
		{"offset.yaml", "interval: 1m\ncheckpoints:\n  - name: \"h/{{.Time}}\"\n    every: 1h\n    offset: 1h\n", 5, `offset 1h0m0s must be at least 0 and less than every`},
		{"if.yaml", "interval: 1m\ncheckpoints:\n  - name: \"h/{{if .Time}}x{{end}}{{.Time}}\"\n    every: 1h\n", 3, `only plain actions`},
		{"parse.yaml", "interval: 1m\ncheckpoints:\n  - name: \"h/{{.Time\"\n    every: 1h\n", 3, `does not parse as a template`},
		{"overlap.yaml", "interval: 1m\ncheckpoints:\n  - name: \"h/{{.Time}}\"\n    every: 1h\n  - name: \"h/d/{{.Time}}\"\n    every: 24h\n", 5, `checkpoints[1] ("h/d/{{.Time}}") and checkpoints[0] ("h/{{.Time}}") name overlapping checkpoints`},
		{"keep-typo.yaml", "interval: 1m\ncheckpoints:\n  - name: \"h/{{.Time}}\"\n    every: 1h\n    keep:\n      hourl: 24\n", 6, `unknown key "hourl" (did you mean "hourly"?)`},
		{"keep-count.yaml", "interval: 1m\ncheckpoints:\n  - name: \"h/{{.Time}}\"\n    every: 1h\n    keep:\n      daily: -2\n", 6, `checkpoints[0].keep.daily must be a number of buckets`},
		{"entry-key.yaml", "interval: 1m\ncheckpoints:\n  - name: \"h/{{.Time}}\"\n    evry: 1h\n", 4, `unknown key "evry" (did you mean "every"?)`},
		{"not-list.yaml", "checkpoints:\n  name: x\n", 2, `checkpoints must be a list of schedules`},
	} {
		p := filepath.Join(dir, c.name)
		if err := os.WriteFile(p, []byte(c.text), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := LoadConfig(p)
		var ce *ConfigError
		if !errors.As(err, &ce) || !errors.Is(err, storage.ErrInvalidArgument) {
			t.Errorf("%s: %v, want a ConfigError", c.name, err)
			continue
		}
		prefix := p + ":" + strconv.Itoa(c.line) + ": "
		if ce.Line != c.line || !strings.HasPrefix(err.Error(), prefix) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %q, want %q ... %q", c.name, err, prefix, c.want)
		}
	}
	c, err := ParseConfig("ok.yaml", []byte("interval: 5m\ncheckpoints:\n  - name: \"hourly/{{.Time}}\"\n    every: 1h\n    keep: {hourly: 24, daily: unlimited, within: 2d}\n  - name: \"daily/{{.Time}}\"\n    every: 1d\n    offset: 2h\n    branch: exp\n"))
	if err != nil || len(c.Checkpoints) != 2 || c.Checkpoints[0].Keep.Daily != -1 || c.Checkpoints[0].Keep.Within != Duration(48*time.Hour) || c.Checkpoints[1].Branch != "exp" {
		t.Fatalf("a good schedule: %+v %v", c.Checkpoints, err)
	}
}

// Each slot's checkpoint is taken once: at the first pass in the slot,
// not again later in it, not again after it was deleted; a slot no pass
// ran in is not made up. The series is rotated after each create, and an
// unmatched checkpoint is never judged.
func TestScheduledCheckpointsEachSlotOnce(t *testing.T) {
	_, s, loc := store(t, "v2-appends")
	if _, err := checkpoint.Create(bg, s, "release-1", ""); err != nil {
		t.Fatal(err)
	}
	// The clock is ahead of the checkpoints' creation times, so none is
	// "from the future".
	now := time.Date(2030, 1, 1, 10, 5, 0, 0, time.UTC)
	d := &Daemon{Store: s.At(loc), Config: cfg(t, "interval: 1m\ncheckpoints:\n  - name: \"hourly/{{.Time}}\"\n    every: 1h\n    keep: {last: 2}\n"),
		Now: func() time.Time { return now }}
	pass := func(at string) *ScheduleReport {
		t.Helper()
		var err error
		if now, err = time.Parse(time.RFC3339, at); err != nil {
			t.Fatal(err)
		}
		r := d.Pass(bg)
		if r.Err() != nil || len(r.Checkpoints) != 1 {
			t.Fatalf("pass at %s: %v %+v", at, r.Err(), r.Checkpoints)
		}
		return &r.Checkpoints[0]
	}
	live := func() map[string]bool {
		t.Helper()
		_, infos, err := checkpoint.List(bg, s)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]bool{}
		for _, in := range infos {
			out[in.Name] = true
		}
		return out
	}
	if r := pass("2030-01-01T10:05:00Z"); r.Created == nil || r.Name != "hourly/20300101T100000Z" {
		t.Fatalf("first pass in a slot: %+v", r)
	}
	if r := pass("2030-01-01T10:59:59Z"); r.Created != nil || !strings.Contains(r.Taken, "holds the name") {
		t.Fatalf("a second pass in the slot: %+v", r)
	}
	// 11:00 and 12:00 pass without a daemon: 13:10 takes 13:00 only.
	if r := pass("2030-01-01T13:10:00Z"); r.Created == nil || r.Name != "hourly/20300101T130000Z" || r.Pruned != nil && r.Pruned.Removed != 0 {
		t.Fatalf("after missed slots: %+v", r)
	}
	if _, err := checkpoint.Delete(bg, s, "hourly/20300101T130000Z"); err != nil {
		t.Fatal(err)
	}
	if r := pass("2030-01-01T13:40:00Z"); r.Created != nil || !strings.Contains(r.Taken, "deleted") {
		t.Fatalf("a deleted slot's checkpoint was taken again: %+v", r)
	}
	pass("2030-01-01T14:00:00Z")
	r := pass("2030-01-01T15:00:00Z")
	if r.Created == nil || r.Pruned == nil || r.Pruned.Removed != 1 || r.Pruned.OperationID == "" {
		t.Fatalf("rotation after the 15:00 slot: %+v", r)
	}
	got := live()
	want := []string{"release-1", "hourly/20300101T140000Z", "hourly/20300101T150000Z"}
	if len(got) != len(want) {
		t.Fatalf("live %v, want %v", got, want)
	}
	for _, n := range want {
		if !got[n] {
			t.Fatalf("live %v, want %v", got, want)
		}
	}
	for _, n := range []string{"hourly/20300101T110000Z", "hourly/20300101T120000Z"} {
		if _, err := checkpoint.Show(bg, s, n, false); err == nil {
			t.Fatalf("missed slot %s was made up", n)
		}
	}
	// With nothing to remove, a pass reads one registry head and rotates
	// nothing.
	if r := pass("2030-01-01T15:30:00Z"); r.Pruned != nil || r.Created != nil {
		t.Fatalf("an idle pass: %+v", r)
	}
}

// Replicas whose clocks disagree: the one ahead takes a later slot and
// its rotation removes the earlier slot's checkpoint; the one behind,
// still in the earlier slot, must not take it a second time.
func TestScheduledSlotNotRetakenByAReplicaBehind(t *testing.T) {
	_, s, loc := store(t, "v2-appends")
	// One actor for both: the fake clocks put the slot names far from the
	// checkpoints' real creation times, so the series is told by its actor.
	c := cfg(t, "interval: 1m\nactor: scheduler\ncheckpoints:\n  - name: \"hourly/{{.Time}}\"\n    every: 1h\n    keep: {last: 1}\n")
	behind := time.Date(2030, 1, 1, 10, 5, 0, 0, time.UTC)
	ahead := behind.Add(2 * time.Hour)
	d1 := &Daemon{Store: s.At(loc), Config: c, Identity: "behind", Now: func() time.Time { return behind }}
	d2 := &Daemon{Store: s.At(loc), Config: c, Identity: "ahead", Now: func() time.Time { return ahead }}
	if r := d1.Pass(bg); r.Err() != nil || r.Checkpoints[0].Created == nil {
		t.Fatalf("behind, first: %v %+v", r.Err(), r.Checkpoints)
	}
	time.Sleep(5 * time.Millisecond)
	if r := d2.Pass(bg); r.Err() != nil || r.Checkpoints[0].Created == nil || r.Checkpoints[0].Pruned == nil || r.Checkpoints[0].Pruned.Removed != 1 {
		t.Fatalf("ahead: %v %+v", r.Err(), r.Checkpoints)
	}
	behind = behind.Add(10 * time.Minute)
	r := d1.Pass(bg)
	if r.Err() != nil || r.Checkpoints[0].Created != nil || !strings.Contains(r.Checkpoints[0].Taken, "deleted") {
		t.Fatalf("behind, again in its slot: %v %+v", r.Err(), r.Checkpoints)
	}
}

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// On the real clock, the rotation right after a create judges the new
// checkpoint as of its creation, not as "from the future": keep last 1
// removes the previous slot's checkpoint in the same pass.
func TestScheduledRotationOnTheRealClock(t *testing.T) {
	_, s, loc := store(t, "v2-appends")
	d := &Daemon{Store: s.At(loc), Config: cfg(t, "interval: 100ms\ncheckpoints:\n  - name: \"s/{{.Time}}\"\n    every: 1s\n    keep: {last: 1}\n")}
	if r := d.Pass(bg); r.Err() != nil || r.Checkpoints[0].Created == nil {
		t.Fatalf("first: %v %+v", r.Err(), r.Checkpoints)
	}
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second + 50*time.Millisecond)))
	r := d.Pass(bg)
	c := r.Checkpoints[0]
	if r.Err() != nil || c.Created == nil || c.Pruned == nil || c.Pruned.Removed != 1 || c.Pruned.Kept != 1 {
		t.Fatalf("second slot: %v %+v %+v", r.Err(), c, c.Pruned)
	}
	for _, dc := range c.Pruned.Decisions {
		if dc.Keep && (dc.Name != c.Name || len(dc.Reasons) != 1 || dc.Reasons[0] != "last") {
			t.Fatalf("kept %s for %v", dc.Name, dc.Reasons)
		}
	}
}

// Rotation judges only the series' own checkpoints: a hand-made one whose
// name the pattern matches is never removed.
func TestScheduleRotationLeavesHandMadeCheckpoints(t *testing.T) {
	_, s, loc := store(t, "v2-appends")
	if _, err := (checkpoint.Options{Actor: "alice"}).Create(bg, s, "hourly/pre-migration", ""); err != nil {
		t.Fatal(err)
	}
	d := &Daemon{Store: s.At(loc), Config: cfg(t, "interval: 100ms\ncheckpoints:\n  - name: \"hourly/{{.Time}}\"\n    every: 1s\n    keep: {last: 1}\n")}
	for i := 0; i < 2; i++ {
		if r := d.Pass(bg); r.Err() != nil {
			t.Fatal(r.Err())
		}
		time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second + 50*time.Millisecond)))
	}
	r := d.Pass(bg)
	if r.Err() != nil || r.Checkpoints[0].Pruned == nil || r.Checkpoints[0].Pruned.Removed != 1 {
		t.Fatalf("third slot: %v %+v", r.Err(), r.Checkpoints)
	}
	if _, err := checkpoint.Show(bg, s, "hourly/pre-migration", false); err != nil {
		t.Fatalf("the hand-made checkpoint was rotated: %v", err)
	}
	for _, dc := range r.Checkpoints[0].Pruned.Decisions {
		if dc.Name == "hourly/pre-migration" {
			t.Fatalf("the hand-made checkpoint was judged: %+v", dc)
		}
	}
}

// A scheduled create that finds the retention claim held is deferred, a
// claim wait, not a failed pass; the next pass in the slot takes it.
func TestScheduledCreateDeferredWhileTheClaimIsHeld(t *testing.T) {
	_, s, loc := store(t, "v2-appends")
	h, err := claim.Acquire(bg, s, claim.Request{OperationID: "cleanup-test", Action: "cleanup", Actor: "ops", Scope: storage.ScopeHost})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2030, 1, 1, 10, 5, 0, 0, time.UTC)
	d := &Daemon{Store: s.At(loc), Config: cfg(t, "interval: 1m\ncheckpoints:\n  - name: \"hourly/{{.Time}}\"\n    every: 1h\n"),
		Now: func() time.Time { return now }}
	r := d.Pass(bg)
	if r.Err() != nil || r.Checkpoints[0].Deferred == "" || r.Checkpoints[0].Error != "" || r.Checkpoints[0].Created != nil {
		t.Fatalf("while held: %v %+v", r.Err(), r.Checkpoints)
	}
	if err := h.Release(bg); err != nil {
		t.Fatal(err)
	}
	now = now.Add(10 * time.Minute)
	if r := d.Pass(bg); r.Err() != nil || r.Checkpoints[0].Created == nil {
		t.Fatalf("after release: %v %+v", r.Err(), r.Checkpoints)
	}
}
