package daemon

import (
	"fmt"
	"strings"
	"text/template"
	"text/template/parse"
	"time"

	"github.com/retain-dev/retain/core/checkpoint/registry"
	"github.com/retain-dev/retain/core/internal/glob"
	"github.com/retain-dev/retain/core/rotation"
)

// Schedule is one series of scheduled checkpoints (`checkpoints:` in the
// config): a checkpoint of every table in each slot of Every, named by
// the slot, rotated by Keep.
//
// Time is cut into slots of Every in UTC (plus Offset), as time.Truncate
// cuts it (from year 1, a Monday): hourly slots start on the hour, daily
// ones at 00:00 UTC, weekly ones on Monday 00:00 UTC. A pass takes the checkpoint of the slot it
// runs in unless that slot's name was ever used; so a slot whose tick was
// missed (the daemon was down, the claim held) is taken at the next pass
// inside it, a slot is never taken twice (even after its checkpoint was
// deleted), and two replicas racing for a slot create one checkpoint —
// the registry's name reservation decides. A slot no pass ran in is not
// made up later: a checkpoint captures the tables as they are now, and
// naming today's data by yesterday's slot would lie.
type Schedule struct {
	// Name is a text/template of the checkpoint name: {{.Time}} is the
	// slot's start in UTC as 20060102T150405Z, {{.Slot}} the time.Time for
	// other layouts ({{.Slot.Format "2006-01-02"}}). Only plain actions
	// are allowed, so the names of a series are matched by the name with
	// each action read as * (its rotation's --match).
	Name string `json:"name"`
	// Every is the slot length: at least 1s, a whole number of seconds,
	// and not shorter than the pass interval.
	Every Duration `json:"every"`
	// Offset shifts the slots (every: 24h, offset: 2h takes the daily
	// checkpoint from 02:00 UTC); 0 <= Offset < Every.
	Offset Duration `json:"offset,omitempty"`
	// Branch the checkpoint captures; "" is main.
	Branch string `json:"branch,omitempty"`
	// Keep rotates the series after each checkpoint it takes, as
	// `retain checkpoint prune --match <Name with * for each action>`;
	// empty keeps every checkpoint until someone deletes it.
	Keep KeepConfig `json:"keep,omitempty"`
}

// KeepConfig is a schedule's rotation: restic's --keep-* rules
// (rotation.Policy).
type KeepConfig struct {
	Last          int      `json:"last,omitempty"`
	Hourly        int      `json:"hourly,omitempty"`
	Daily         int      `json:"daily,omitempty"`
	Weekly        int      `json:"weekly,omitempty"`
	Monthly       int      `json:"monthly,omitempty"`
	Yearly        int      `json:"yearly,omitempty"`
	Within        Duration `json:"within,omitempty"`
	WithinHourly  Duration `json:"within_hourly,omitempty"`
	WithinDaily   Duration `json:"within_daily,omitempty"`
	WithinWeekly  Duration `json:"within_weekly,omitempty"`
	WithinMonthly Duration `json:"within_monthly,omitempty"`
	WithinYearly  Duration `json:"within_yearly,omitempty"`
}

// Policy is the rotation policy of k.
func (k KeepConfig) Policy() rotation.Policy {
	return rotation.Policy{Last: k.Last, Hourly: k.Hourly, Daily: k.Daily, Weekly: k.Weekly, Monthly: k.Monthly, Yearly: k.Yearly,
		Within: time.Duration(k.Within), WithinHourly: time.Duration(k.WithinHourly), WithinDaily: time.Duration(k.WithinDaily),
		WithinWeekly: time.Duration(k.WithinWeekly), WithinMonthly: time.Duration(k.WithinMonthly), WithinYearly: time.Duration(k.WithinYearly)}
}

// SlotTimeLayout is how {{.Time}} writes a slot's start: ISO 8601's basic
// form, which a checkpoint name may hold (no ':').
const SlotTimeLayout = "20060102T150405Z"

// slotData is what a schedule's name template sees.
type slotData struct {
	Time string
	Slot time.Time
}

// Slot is the start of the slot now falls in.
func (s Schedule) Slot(now time.Time) time.Time {
	off := time.Duration(s.Offset)
	return now.UTC().Add(-off).Truncate(time.Duration(s.Every)).Add(off)
}

// NameAt is the checkpoint name of the slot starting at slot.
func (s Schedule) NameAt(slot time.Time) (string, error) {
	t, err := s.template()
	if err != nil {
		return "", err
	}
	var b strings.Builder
	if err := t.Execute(&b, slotData{Time: slot.UTC().Format(SlotTimeLayout), Slot: slot.UTC()}); err != nil {
		return "", fmt.Errorf("name %q: %v", s.Name, err)
	}
	return b.String(), nil
}

func (s Schedule) template() (*template.Template, error) {
	t, err := template.New("name").Option("missingkey=error").Parse(s.Name)
	if err != nil {
		return nil, fmt.Errorf("name %q does not parse as a template: %v", s.Name, strings.TrimPrefix(err.Error(), "template: name:"))
	}
	return t, nil
}

// Match is the --match pattern of the series: the name with each action
// read as *.
func (s Schedule) Match() (string, error) {
	t, err := s.template()
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, n := range t.Tree.Root.Nodes {
		switch n := n.(type) {
		case *parse.TextNode:
			b.Write(n.Text)
		case *parse.ActionNode:
			b.WriteString("*")
		default:
			return "", fmt.Errorf("name %q: only plain actions such as {{.Time}} or {{.Slot.Format \"2006-01-02\"}} are allowed, not %s", s.Name, n.String())
		}
	}
	return b.String(), nil
}

// validate is why s cannot run under pass interval, or nil.
func (s Schedule) validate(interval time.Duration) (key string, err error) {
	every := time.Duration(s.Every)
	switch {
	case strings.TrimSpace(s.Name) == "":
		return "name", fmt.Errorf("name is required: a template such as \"hourly/{{.Time}}\"")
	case every <= 0:
		return "every", fmt.Errorf("every is required: the slot length, e.g. 1h or 1d")
	case every < time.Second || every%time.Second != 0:
		return "every", fmt.Errorf("every %s must be a whole number of seconds, at least 1s", every)
	case every < interval:
		return "every", fmt.Errorf("every %s is shorter than the pass interval %s: passes would miss slots; set interval to at most %s (a quarter of it takes each checkpoint near its slot's start)", every, interval, every)
	case s.Offset < 0 || time.Duration(s.Offset) >= every:
		return "offset", fmt.Errorf("offset %s must be at least 0 and less than every (%s)", time.Duration(s.Offset), every)
	}
	match, err := s.Match()
	if err != nil {
		return "name", err
	}
	if strings.HasPrefix(match, "*") {
		return "name", fmt.Errorf("name %q begins with the slot: give the series a literal prefix (e.g. \"hourly/{{.Time}}\"), so that its rotation judges only its own checkpoints", s.Name)
	}
	pat, err := glob.Compile(match)
	if err != nil {
		return "name", err
	}
	// Two slots far apart, and two neighbours: each name valid, matched by
	// the series' pattern, and apart from its neighbour's.
	base := s.Slot(time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC))
	for _, slot := range []time.Time{base, base.Add(every), s.Slot(time.Date(2099, 12, 31, 23, 59, 59, 0, time.UTC))} {
		n, err := s.NameAt(slot)
		if err != nil {
			return "name", err
		}
		if err := registry.ValidateName(n); err != nil {
			return "name", fmt.Errorf("name %q gives %q, which is not a checkpoint name: %v", s.Name, n, err)
		}
		if !pat.Match(n) {
			return "name", fmt.Errorf("name %q gives %q, which its pattern %q does not match", s.Name, n, match)
		}
	}
	// Names must differ across neighbours and across days, weeks, months,
	// years and a century: a name that repeats ("h/{{.Slot.Format \"15\"}}")
	// would find its slot taken from the second day on and stop.
	seen := map[string]time.Time{}
	for _, d := range []time.Duration{0, every, 24 * time.Hour, 7 * 24 * time.Hour, 31 * 24 * time.Hour, 366 * 24 * time.Hour, 100 * 366 * 24 * time.Hour} {
		slot := s.Slot(base.Add(d))
		n, _ := s.NameAt(slot)
		if prev, ok := seen[n]; ok && !prev.Equal(slot) {
			return "name", fmt.Errorf("name %q gives %q to the slots of %s and %s: write the whole slot in it ({{.Time}})", s.Name, n, prev.Format(time.RFC3339), slot.Format(time.RFC3339))
		}
		seen[n] = slot
	}
	if err := s.Keep.Policy().Validate(); err != nil && err != rotation.ErrEmptyPolicy {
		return "keep", err
	}
	return "", nil
}

// InSeries reports whether a checkpoint named name and created at created
// is one this series could have taken: its name is the name of the slot
// it was created in, or of a neighbour (a create that straddled a slot's
// end, a replica's clock a little off). Rotation judges only these, so a
// hand-made "hourly/pre-migration" that the pattern matches is left alone.
func (s Schedule) InSeries(name string, created time.Time) bool {
	slot := s.Slot(created)
	for _, sl := range []time.Time{slot, slot.Add(-time.Duration(s.Every)), slot.Add(time.Duration(s.Every))} {
		if n, err := s.NameAt(sl); err == nil && n == name {
			return true
		}
	}
	return false
}
