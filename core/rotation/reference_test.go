package rotation

import (
	"fmt"
	"math/rand"
	"slices"
	"sort"
	"testing"
	"time"
)

// reference is a second, independent statement of the keep rules: it
// groups items into buckets with a map instead of walking them, so a
// mistake in Apply's walk (a bucket counted twice, the oldest rule firing
// at the wrong time) shows up as a disagreement.
func reference(items []Item, p Policy, now time.Time) map[string][]string {
	list := append([]Item(nil), items...)
	for i := range list {
		list[i].Time = list[i].Time.UTC()
	}
	sort.Slice(list, func(i, j int) bool {
		if list[i].Time.Equal(list[j].Time) {
			return list[i].ID > list[j].ID
		}
		return list[i].Time.After(list[j].Time)
	})
	reasons := map[string][]string{}
	for _, it := range list {
		reasons[it.ID] = nil
	}
	var past []Item
	for _, it := range list {
		if it.Time.After(now) {
			reasons[it.ID] = append(reasons[it.ID], NewerThanNow)
		} else {
			past = append(past, it)
		}
	}
	if len(past) == 0 {
		return reasons
	}
	oldest := past[len(past)-1].ID
	// groups returns each bucket's members, buckets ordered by their
	// newest member.
	groups := func(in []Item, key func(time.Time, int) int) [][]Item {
		idx := map[int]int{}
		var out [][]Item
		for nr, it := range in {
			k := key(it.Time, nr)
			if j, ok := idx[k]; ok {
				out[j] = append(out[j], it)
				continue
			}
			idx[k] = len(out)
			out = append(out, []Item{it})
		}
		return out
	}
	type rule struct {
		name string
		n    int
		key  func(time.Time, int) int
	}
	for _, r := range []rule{
		{"last", p.Last, func(_ time.Time, nr int) int { return nr }},
		{"hourly", p.Hourly, func(t time.Time, _ int) int { return int(t.Unix() / 3600) }},
		{"daily", p.Daily, func(t time.Time, _ int) int { return int(t.Unix() / 86400) }},
		{"weekly", p.Weekly, func(t time.Time, _ int) int { y, w := t.ISOWeek(); return y*100 + w }},
		{"monthly", p.Monthly, func(t time.Time, _ int) int { return t.Year()*12 + int(t.Month()) }},
		{"yearly", p.Yearly, func(t time.Time, _ int) int { return t.Year() }},
	} {
		if r.n == 0 {
			continue
		}
		g := groups(past, r.key)
		n := r.n
		if n == Unlimited || n > len(g) {
			n = len(g)
		}
		for _, b := range g[:n] {
			reasons[b[0].ID] = append(reasons[b[0].ID], r.name)
		}
		if r.n == Unlimited || len(g) < r.n {
			if last := g[len(g)-1]; len(last) > 1 {
				reasons[oldest] = append(reasons[oldest], "oldest "+r.name)
			}
		}
	}
	latest := past[0].Time
	type wrule struct {
		name string
		d    time.Duration
		key  func(time.Time, int) int
	}
	for _, r := range []wrule{
		{"hourly", p.WithinHourly, func(t time.Time, _ int) int { return int(t.Unix() / 3600) }},
		{"daily", p.WithinDaily, func(t time.Time, _ int) int { return int(t.Unix() / 86400) }},
		{"weekly", p.WithinWeekly, func(t time.Time, _ int) int { y, w := t.ISOWeek(); return y*100 + w }},
		{"monthly", p.WithinMonthly, func(t time.Time, _ int) int { return t.Year()*12 + int(t.Month()) }},
		{"yearly", p.WithinYearly, func(t time.Time, _ int) int { return t.Year() }},
	} {
		if r.d == 0 {
			continue
		}
		var in []Item
		for _, it := range past {
			if it.Time.After(latest.Add(-r.d)) {
				in = append(in, it)
			}
		}
		if len(in) == 0 {
			continue
		}
		why := r.name + " within " + FormatDuration(r.d)
		g := groups(in, r.key)
		for _, b := range g {
			reasons[b[0].ID] = append(reasons[b[0].ID], why)
		}
		if last := g[len(g)-1]; len(last) > 1 && last[len(last)-1].ID == oldest {
			reasons[oldest] = append(reasons[oldest], "oldest "+why)
		}
	}
	if p.Within > 0 {
		for _, it := range past {
			if it.Time.After(latest.Add(-p.Within)) {
				reasons[it.ID] = append(reasons[it.ID], "within "+FormatDuration(p.Within))
			}
		}
	}
	return reasons
}

func randomSeries(r *rand.Rand) ([]Item, time.Time) {
	base := time.Date(2015+r.Intn(10), time.Month(1+r.Intn(12)), 1+r.Intn(28), r.Intn(24), r.Intn(60), 0, 0, time.UTC)
	steps := []time.Duration{time.Minute, 17 * time.Minute, time.Hour, 6 * time.Hour, 24 * time.Hour, 7 * 24 * time.Hour, 30 * 24 * time.Hour}
	step := steps[r.Intn(len(steps))]
	n := r.Intn(80)
	items := make([]Item, n)
	t := base
	for i := range items {
		switch r.Intn(10) {
		case 0: // same instant as the previous item: ties
		case 1:
			t = t.Add(time.Duration(r.Int63n(int64(step)*40 + 1)))
		default:
			t = t.Add(time.Duration(r.Int63n(int64(step)*2 + 1)))
		}
		items[i] = Item{ID: fmt.Sprintf("cp-%03d", r.Intn(1000)*100+i), Time: t}
	}
	r.Shuffle(len(items), func(i, j int) { items[i], items[j] = items[j], items[i] })
	// Now is mostly after the series, sometimes inside it (future items).
	now := t.Add(time.Hour)
	if n > 0 && r.Intn(5) == 0 {
		now = items[r.Intn(n)].Time
	}
	return items, now
}

func randomPolicy(r *rand.Rand) Policy {
	count := func() int {
		switch r.Intn(6) {
		case 0:
			return Unlimited
		case 1, 2:
			return 1 + r.Intn(30)
		default:
			return 0
		}
	}
	within := func() time.Duration {
		if r.Intn(5) > 0 {
			return 0
		}
		return time.Duration(1+r.Intn(24*400)) * time.Hour
	}
	for {
		p := Policy{
			Last: count(), Hourly: count(), Daily: count(), Weekly: count(), Monthly: count(), Yearly: count(),
			Within: within(), WithinHourly: within(), WithinDaily: within(), WithinWeekly: within(),
			WithinMonthly: within(), WithinYearly: within(),
		}
		if !p.Empty() {
			return p
		}
	}
}

func TestApplyAgreesWithReference(t *testing.T) {
	r := rand.New(rand.NewSource(19))
	const cases = 3000
	for c := 0; c < cases; c++ {
		items, now := randomSeries(r)
		p := randomPolicy(r)
		got, err := Apply(items, p, now)
		if err != nil {
			t.Fatal(err)
		}
		want := reference(items, p, now)
		if len(got) != len(items) {
			t.Fatalf("case %d: %d decisions for %d items", c, len(got), len(items))
		}
		for _, d := range got {
			w := slices.Clone(want[d.ID])
			g := slices.Clone(d.Reasons)
			slices.Sort(w)
			slices.Sort(g)
			if !slices.Equal(g, w) || d.Keep != (len(w) > 0) {
				t.Fatalf("case %d (%s, now %s): %s at %s: Apply kept=%v %q, reference %q\nitems: %v",
					c, p, now.Format(time.RFC3339), d.ID, d.Time.Format(time.RFC3339), d.Keep, g, w, items)
			}
		}
		for i := 1; i < len(got); i++ {
			if got[i].Time.After(got[i-1].Time) {
				t.Fatalf("case %d: decisions are not newest first at %d", c, i)
			}
		}
	}
}
