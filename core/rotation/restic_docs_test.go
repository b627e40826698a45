package rotation

import (
	"fmt"
	"testing"
	"time"
)

// The examples in restic's "Removing snapshots according to a policy"
// (doc/060_forget.rst), as fixed cases.

func kept(t *testing.T, ds []Decision) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, d := range ds {
		if d.Keep {
			out[d.ID] = d.Reasons
		}
	}
	return out
}

// "Suppose you have only made one backup every Sunday for 12 weeks ...
// forget --keep-daily 4 will keep the last four snapshots".
func TestResticDocsTwelveSundaysKeepDaily4(t *testing.T) {
	var items []Item
	first := time.Date(2019, 9, 1, 11, 0, 0, 0, time.UTC)
	for i := 0; i < 12; i++ {
		at := first.AddDate(0, 0, 7*i)
		items = append(items, Item{ID: at.Format("2006-01-02"), Time: at})
	}
	ds, err := Apply(items, Policy{Daily: 4}, time.Date(2019, 11, 18, 0, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	k := kept(t, ds)
	want := []string{"2019-10-27", "2019-11-03", "2019-11-10", "2019-11-17"}
	if len(k) != len(want) {
		t.Fatalf("kept %v, want %v", k, want)
	}
	for _, id := range want {
		if r := k[id]; len(r) != 1 || r[0] != "daily" {
			t.Errorf("%s: reasons %q, want [daily]", id, r)
		}
	}
}

// "suppose you make one backup every day for 100 years. Then forget
// --keep-daily 7 --keep-weekly 5 --keep-monthly 12 --keep-yearly 75 would
// keep the most recent 7 daily snapshots and 4 last-day-of-the-week ones
// (since the 7 dailies already include 1 weekly). Additionally, 12 or 11
// last-day-of-the-month snapshots ... And finally 75 or 74
// last-day-of-the-year snapshots".
func TestResticDocsHundredYearsOfDailies(t *testing.T) {
	// The newest backup is a Sunday that ends a year, so the 7 dailies
	// hold exactly one weekly, one monthly and one yearly, as the docs
	// count.
	start := time.Date(1924, 1, 1, 23, 0, 0, 0, time.UTC)
	end := start.AddDate(100, 0, 0)
	var items []Item
	for at := start; at.Before(end); at = at.AddDate(0, 0, 1) {
		items = append(items, Item{ID: at.Format("2006-01-02"), Time: at})
	}
	ds, err := Apply(items, Policy{Daily: 7, Weekly: 5, Monthly: 12, Yearly: 75}, end)
	if err != nil {
		t.Fatal(err)
	}
	// Reasons come in rule order, so the first one says which rule kept
	// the item beyond the rules before it: the docs' "additionally".
	added := map[string]int{}
	for _, d := range ds {
		if d.Keep {
			added[d.Reasons[0]]++
		}
		for _, r := range d.Reasons {
			// Every kept item is the last day of its period (the series
			// is long, so no rule reaches the oldest item), except the
			// newest, which stands for its unfinished year.
			next := d.Time.AddDate(0, 0, 1)
			var last bool
			switch r {
			case "daily":
				last = true
			case "weekly":
				last = next.Weekday() == time.Monday
			case "monthly":
				last = next.Day() == 1
			case "yearly":
				last = next.YearDay() == 1
			default:
				t.Fatalf("%s: unexpected reason %q", d.ID, r)
			}
			if !last && d.ID != "2023-12-31" {
				t.Errorf("%s kept as %s but is not the last day of its period", d.ID, r)
			}
		}
	}
	if added["daily"] != 7 || added["weekly"] != 4 || (added["monthly"] != 11 && added["monthly"] != 12) || (added["yearly"] != 74 && added["yearly"] != 75) {
		t.Errorf("kept by each rule beyond the rules before it: %v; want 7 daily, 4 weekly, 11 or 12 monthly, 74 or 75 yearly", added)
	}
	if n := len(kept(t, ds)); n < 7+4+11+74 || n > 7+4+12+75 {
		t.Errorf("kept %d", n)
	}
}

// "If what you want is to keep daily snapshots for the last week, weekly
// for the last month, monthly for the last year ... specify
// --keep-within-daily 7d --keep-within-weekly 1m --keep-within-monthly 1y"
// — with irregular backups (retain spells a month 30d and a year 365d).
func TestResticDocsKeepWithinIrregular(t *testing.T) {
	latest := time.Date(2026, 11, 30, 20, 0, 0, 0, time.UTC)
	var items []Item
	// Several a day for the last 10 days, then every third day for two
	// years.
	for h := 0; h < 10*24; h += 5 {
		at := latest.Add(-time.Duration(h) * time.Hour)
		items = append(items, Item{ID: at.Format(time.RFC3339), Time: at})
	}
	for d := 12; d < 730; d += 3 {
		at := latest.AddDate(0, 0, -d)
		items = append(items, Item{ID: at.Format(time.RFC3339), Time: at})
	}
	day := 24 * time.Hour
	ds, err := Apply(items, Policy{WithinDaily: 7 * day, WithinWeekly: 30 * day, WithinMonthly: 365 * day}, latest)
	if err != nil {
		t.Fatal(err)
	}
	days := map[string]bool{}
	for _, d := range ds {
		age := latest.Sub(d.Time)
		if d.Keep && age >= 365*day {
			t.Errorf("%s (%s old) kept past every window: %q", d.ID, age, d.Reasons)
		}
		if d.Keep && age < 7*day {
			key := d.Time.Format("2006-01-02")
			if days[key] {
				t.Errorf("two kept on %s within the daily window", key)
			}
			days[key] = true
		}
	}
	if len(days) < 7 {
		t.Errorf("kept %d days of the last week, want 7 or 8: %v", len(days), days)
	}
}

func TestApplyRefusesAnEmptyPolicy(t *testing.T) {
	if _, err := Apply([]Item{{ID: "a", Time: time.Now()}}, Policy{}, time.Now()); err != ErrEmptyPolicy {
		t.Fatalf("err = %v, want ErrEmptyPolicy", err)
	}
	if _, err := Apply(nil, Policy{Daily: -2}, time.Now()); err == nil {
		t.Fatal("a count of -2 was accepted")
	}
}

func TestPolicyString(t *testing.T) {
	p := Policy{Hourly: 24, Daily: 7, Yearly: Unlimited, Within: 48 * time.Hour, WithinDaily: 90 * time.Minute}
	if got, want := p.String(), "keep 24 hourly, 7 daily, every yearly, within 2d, daily within 1h30m"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	_ = fmt.Sprint(p)
}

// A keep-within span is whole hours: restic's "1m" (a month) must not be
// read as a minute that keeps almost nothing; negative spans are refused.
func TestWithinSpanMustBeWholeHours(t *testing.T) {
	for _, p := range []Policy{{Within: time.Minute}, {WithinDaily: 90 * time.Minute}, {Within: -time.Hour}, {Last: -2}} {
		if err := p.Validate(); err == nil {
			t.Errorf("%+v accepted", p)
		}
	}
	if err := (Policy{Within: 30 * 24 * time.Hour, WithinHourly: 36 * time.Hour}).Validate(); err != nil {
		t.Fatal(err)
	}
}

// Buckets are UTC whatever zone the times are in: 23:30 and 00:30 in
// UTC+2 are the same UTC day, so keep-daily 1 keeps only the newer.
func TestBucketsAreUTC(t *testing.T) {
	z := time.FixedZone("UTC+2", 2*3600)
	items := []Item{
		{ID: "a", Time: time.Date(2026, 3, 1, 23, 30, 0, 0, z)}, // 21:30 UTC Mar 1
		{ID: "b", Time: time.Date(2026, 3, 2, 0, 30, 0, 0, z)},  // 22:30 UTC Mar 1
	}
	ds, err := Apply(items, Policy{Daily: 1}, time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ds {
		if d.Keep != (d.Item.ID == "b") {
			t.Fatalf("%s kept %v: %+v", d.Item.ID, d.Keep, ds)
		}
	}
}

// keep-within is exclusive at its edge, as restic's: an item exactly D
// older than the newest is not within D.
func TestWithinEdgeExclusive(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	items := []Item{{ID: "new", Time: t0}, {ID: "edge", Time: t0.Add(-2 * time.Hour)}, {ID: "in", Time: t0.Add(-2*time.Hour + time.Second)}}
	ds, err := Apply(items, Policy{Within: 2 * time.Hour}, t0.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ds {
		if d.Keep != (d.Item.ID != "edge") {
			t.Fatalf("%s kept %v", d.Item.ID, d.Keep)
		}
	}
}
