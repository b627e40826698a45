package duration

import (
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"7d":     7 * Day,
		"2w":     14 * Day,
		"1w2d":   9 * Day,
		"1w12h":  Week + 12*time.Hour,
		"1.5d":   36 * time.Hour,
		"36h":    36 * time.Hour,
		"1.5h":   90 * time.Minute,
		"1h30m":  90 * time.Minute,
		"168h":   Week,
		"500ms":  500 * time.Millisecond,
		"0":      0,
		"0d":     0,
		"-1d":    -Day,
		"+2h":    2 * time.Hour,
		"1d1h1m": Day + time.Hour + time.Minute,
	} {
		got, err := Parse(in)
		if err != nil || got != want {
			t.Errorf("Parse(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
}

func TestParseRefuses(t *testing.T) {
	for _, in := range []string{"", "d", "7", "7x", "7days", "1..5d", "1.2.3h", "w2", "-", "7d ", " 7d", "1d-2h", "100000000w", "300000d"} {
		if d, err := Parse(in); err == nil {
			t.Errorf("Parse(%q) = %v, want an error", in, d)
		} else if !strings.Contains(err.Error(), "duration") {
			t.Errorf("Parse(%q): %v does not say what was wrong", in, err)
		}
	}
}

func TestValue(t *testing.T) {
	var v Value
	if err := v.Set("2w"); err != nil || time.Duration(v) != 14*Day || v.String() != "336h0m0s" || new(Value).String() != "0" || v.Type() != "duration" {
		t.Fatalf("Set(2w): %v %v", err, v.String())
	}
	if err := v.Set("soon"); err == nil || time.Duration(v) != 14*Day {
		t.Fatalf("Set(soon) changed the value or passed: %v %v", err, v.String())
	}
}
