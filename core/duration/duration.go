// Package duration parses the durations retain's flags and daemon config
// take: Go's forms (36h, 1.5h, 90m) plus days and weeks (7d, 2w, 1w2d),
// since retention windows are counted in days.
package duration

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

const (
	Day  = 24 * time.Hour
	Week = 7 * Day
)

// Parse reads a duration: an optional sign, then one or more number+unit
// pairs with units ns, us (µs), ms, s, m, h, d (24h) and w (7d). "0" alone
// is zero, as in time.ParseDuration.
func Parse(s string) (time.Duration, error) {
	rest := s
	neg := false
	if rest != "" && (rest[0] == '-' || rest[0] == '+') {
		neg, rest = rest[0] == '-', rest[1:]
	}
	if rest == "0" {
		return 0, nil
	}
	if rest == "" {
		return 0, bad(s)
	}
	var total time.Duration
	for rest != "" {
		i := strings.IndexFunc(rest, func(r rune) bool { return !isNum(r) })
		if i <= 0 {
			return 0, bad(s) // no number, or a number with no unit
		}
		j := strings.IndexFunc(rest[i:], isNum)
		if j < 0 {
			j = len(rest) - i
		}
		num, unit := rest[:i], rest[i:i+j]
		rest = rest[i+j:]
		var d time.Duration
		switch unit {
		case "d", "w":
			f, err := strconv.ParseFloat(num, 64)
			if err != nil {
				return 0, bad(s)
			}
			v := f * float64(Day)
			if unit == "w" {
				v = f * float64(Week)
			}
			if v >= math.MaxInt64 {
				return 0, fmt.Errorf("duration %q is too long", s)
			}
			d = time.Duration(v)
		default:
			var err error
			if d, err = time.ParseDuration(num + unit); err != nil {
				return 0, bad(s)
			}
		}
		if total > math.MaxInt64-d {
			return 0, fmt.Errorf("duration %q is too long", s)
		}
		total += d
	}
	if neg {
		total = -total
	}
	return total, nil
}

func isNum(r rune) bool { return r >= '0' && r <= '9' || r == '.' }

func bad(s string) error {
	return fmt.Errorf("invalid duration %q: write a number and a unit (s, m, h, d for days, w for weeks), e.g. 7d, 2w, 1w2d or 36h", s)
}

// Value is a time.Duration flag that takes Parse's forms; it satisfies
// pflag.Value.
type Value time.Duration

func (v *Value) Set(s string) error {
	d, err := Parse(s)
	if err != nil {
		return err
	}
	*v = Value(d)
	return nil
}

// String is "0" for zero, so flag help shows no default for an unset flag.
func (v *Value) String() string {
	if *v == 0 {
		return "0"
	}
	return time.Duration(*v).String()
}

func (v *Value) Type() string { return "duration" }
