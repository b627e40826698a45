// Package rotation decides which items of a timestamped series a keep
// policy keeps. The rules are restic's `forget --keep-*` rules, so an
// operator who knows restic knows these:
//
//   - Last n keeps the n newest items.
//   - Hourly, Daily, Weekly, Monthly and Yearly n walk the calendar buckets
//     (hours :00–:59, days, ISO weeks Monday–Sunday, months, years) that
//     hold at least one item, newest first, and keep the newest item of
//     each of the first n. -1 means every bucket.
//   - Within d keeps every item newer than the newest item minus d, and
//     WithinHourly … WithinYearly d keep the newest item of every bucket
//     in that range.
//   - While a counted rule still has buckets left when it reaches the
//     oldest item, the oldest item is kept too ("oldest daily"): a short
//     history is kept whole rather than cut at its start.
//   - The rules are ORed: an item any rule keeps is kept, with every
//     reason that kept it.
//
// Where retain differs from restic:
//
//   - Buckets are UTC, not the local time zone, so two hosts decide alike.
//   - An item newer than now (another host's clock ran ahead) is always
//     kept and takes no bucket; restic lets it use one.
//   - Durations are retain's (d is 24h, w is 7d), and a keep-within
//     duration must be whole hours: restic's "1m" is a month, retain's
//     would be a minute, so a sub-hour span is refused rather than read
//     as one that keeps almost nothing (a month is 30d or 31d here).
//   - An empty policy is an error rather than a no-op.
package rotation

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
)

// Unlimited is the count that keeps one item of every bucket.
const Unlimited = -1

// Policy is a set of keep rules. The zero Policy keeps nothing and is
// refused by Apply: use Empty to tell.
type Policy struct {
	Last    int `json:"last,omitempty" yaml:"last"`
	Hourly  int `json:"hourly,omitempty" yaml:"hourly"`
	Daily   int `json:"daily,omitempty" yaml:"daily"`
	Weekly  int `json:"weekly,omitempty" yaml:"weekly"`
	Monthly int `json:"monthly,omitempty" yaml:"monthly"`
	Yearly  int `json:"yearly,omitempty" yaml:"yearly"`

	Within        time.Duration `json:"within,omitempty" yaml:"within"`
	WithinHourly  time.Duration `json:"within_hourly,omitempty" yaml:"within_hourly"`
	WithinDaily   time.Duration `json:"within_daily,omitempty" yaml:"within_daily"`
	WithinWeekly  time.Duration `json:"within_weekly,omitempty" yaml:"within_weekly"`
	WithinMonthly time.Duration `json:"within_monthly,omitempty" yaml:"within_monthly"`
	WithinYearly  time.Duration `json:"within_yearly,omitempty" yaml:"within_yearly"`
}

// ErrEmptyPolicy is Validate's error for a policy with no rule: applying
// it would remove every item.
var ErrEmptyPolicy = errors.New("the keep policy has no rule, so it would remove everything: give at least one --keep-* rule")

// Empty reports whether p has no rule.
func (p Policy) Empty() bool { return p == Policy{} }

// Validate refuses an empty policy, counts below -1 and negative durations.
func (p Policy) Validate() error {
	if p.Empty() {
		return ErrEmptyPolicy
	}
	for _, c := range p.counts() {
		if c.n < Unlimited {
			return fmt.Errorf("keep-%s %d: a count is a number of buckets, or -1 for all", c.name, c.n)
		}
	}
	for _, w := range p.withins() {
		if w.d < 0 {
			return fmt.Errorf("keep-%s %s: a duration cannot be negative", w.flag, w.d)
		}
		if w.d%time.Hour != 0 {
			return fmt.Errorf("keep-%s %s: a keep-within span is whole hours (h, d, w); in restic 1m is a month, here write 30d", w.flag, w.d)
		}
	}
	return nil
}

// String is the policy in words, e.g. "keep 24 hourly, 7 daily, within 2d".
func (p Policy) String() string {
	var parts []string
	for _, c := range p.counts() {
		switch {
		case c.n == Unlimited:
			parts = append(parts, "every "+c.name)
		case c.n > 0:
			parts = append(parts, fmt.Sprintf("%d %s", c.n, c.name))
		}
	}
	for _, w := range p.withins() {
		if w.d > 0 {
			parts = append(parts, w.reason(w.d))
		}
	}
	if len(parts) == 0 {
		return "keep nothing"
	}
	return "keep " + strings.Join(parts, ", ")
}

// Item is one member of the series.
type Item struct {
	// ID tells items apart; it breaks ties between equal times (the
	// greater ID counts as the newer), so decisions are deterministic.
	ID   string
	Time time.Time
}

// Decision is Apply's verdict on one item.
type Decision struct {
	Item
	Keep bool
	// Reasons name every rule that kept the item ("daily", "oldest
	// monthly", "within 2d", "daily within 7d", "newer than now"); empty
	// for a removed item.
	Reasons []string
}

type bucketFunc func(t time.Time, nr int) int

func hourOf(t time.Time, _ int) int {
	return t.Year()*1_000_000 + int(t.Month())*10_000 + t.Day()*100 + t.Hour()
}
func dayOf(t time.Time, _ int) int { return t.Year()*10_000 + int(t.Month())*100 + t.Day() }
func weekOf(t time.Time, _ int) int {
	y, w := t.ISOWeek()
	return y*100 + w
}
func monthOf(t time.Time, _ int) int { return t.Year()*100 + int(t.Month()) }
func yearOf(t time.Time, _ int) int  { return t.Year() }
func itemOf(_ time.Time, nr int) int { return nr }

type countRule struct {
	name   string
	n      int
	bucket bucketFunc
}

func (p Policy) counts() []countRule {
	return []countRule{
		{"last", p.Last, itemOf},
		{"hourly", p.Hourly, hourOf},
		{"daily", p.Daily, dayOf},
		{"weekly", p.Weekly, weekOf},
		{"monthly", p.Monthly, monthOf},
		{"yearly", p.Yearly, yearOf},
	}
}

type withinRule struct {
	flag   string
	d      time.Duration
	bucket bucketFunc // nil: every item in range
	reason func(time.Duration) string
}

func (p Policy) withins() []withinRule {
	of := func(name string) func(time.Duration) string {
		return func(d time.Duration) string { return name + " within " + FormatDuration(d) }
	}
	return []withinRule{
		{"within", p.Within, nil, func(d time.Duration) string { return "within " + FormatDuration(d) }},
		{"within-hourly", p.WithinHourly, hourOf, of("hourly")},
		{"within-daily", p.WithinDaily, dayOf, of("daily")},
		{"within-weekly", p.WithinWeekly, weekOf, of("weekly")},
		{"within-monthly", p.WithinMonthly, monthOf, of("monthly")},
		{"within-yearly", p.WithinYearly, yearOf, of("yearly")},
	}
}

// NewerThanNow is the reason an item from the future is kept.
const NewerThanNow = "newer than now"

// Sort orders items newest first, the order Apply decides in and returns.
func Sort(items []Item) {
	sort.SliceStable(items, func(i, j int) bool {
		if !items[i].Time.Equal(items[j].Time) {
			return items[i].Time.After(items[j].Time)
		}
		return items[i].ID > items[j].ID
	})
}

// Apply decides every item under p, judging "the future" by now, and
// returns the decisions newest first. It refuses an invalid policy.
func Apply(items []Item, p Policy, now time.Time) ([]Decision, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	list := make([]Item, len(items))
	for i, it := range items {
		it.Time = it.Time.UTC()
		list[i] = it
	}
	Sort(list)
	out := make([]Decision, 0, len(list))
	// Items from the future are kept and set aside, so a skewed clock
	// elsewhere cannot use up a bucket of the real history.
	for len(list) > 0 && list[0].Time.After(now) {
		out = append(out, Decision{Item: list[0], Keep: true, Reasons: []string{NewerThanNow}})
		list = list[1:]
	}
	if len(list) == 0 {
		return out, nil
	}
	latest := list[0].Time
	counts := p.counts()
	left := make([]int, len(counts))
	last := make([]int, len(counts))
	for i, c := range counts {
		left[i], last[i] = c.n, -1
	}
	withins := p.withins()
	lastWithin := make([]int, len(withins))
	for i := range lastWithin {
		lastWithin[i] = -1
	}
	for nr, cur := range list {
		d := Decision{Item: cur}
		oldest := nr == len(list)-1
		for i, c := range counts {
			if left[i] == 0 {
				continue
			}
			v := c.bucket(cur.Time, nr)
			if v == last[i] && !oldest {
				continue
			}
			reason := c.name
			if v == last[i] {
				reason = "oldest " + c.name
			}
			d.Reasons = append(d.Reasons, reason)
			last[i] = v
			if left[i] > 0 {
				left[i]--
			}
		}
		for i, w := range withins {
			if w.d <= 0 || !cur.Time.After(latest.Add(-w.d)) {
				continue
			}
			if w.bucket == nil {
				d.Reasons = append(d.Reasons, w.reason(w.d))
				continue
			}
			v := w.bucket(cur.Time, nr)
			if v == lastWithin[i] && !oldest {
				continue
			}
			reason := w.reason(w.d)
			if v == lastWithin[i] {
				reason = "oldest " + reason
			}
			d.Reasons = append(d.Reasons, reason)
			lastWithin[i] = v
		}
		d.Keep = len(d.Reasons) > 0
		out = append(out, d)
	}
	return out, nil
}

// FormatDuration prints d in retain's duration forms, whole days as "7d".
func FormatDuration(d time.Duration) string {
	const day = 24 * time.Hour
	if d > 0 && d%day == 0 {
		return fmt.Sprintf("%dd", d/day)
	}
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
