package lance

import (
	"context"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"

	"google.golang.org/protobuf/encoding/protowire"
)

// Config keys of Lance's commit-time cleanup (lance dataset/cleanup.rs
// auto_cleanup_hook). Lance runs it only when the interval key is set.
const (
	ConfigAutoCleanupInterval       = "lance.auto_cleanup.interval"
	ConfigAutoCleanupOlderThan      = "lance.auto_cleanup.older_than"
	ConfigAutoCleanupRetainVersions = "lance.auto_cleanup.retain_versions"
)

// ReadConfig returns the table config map of version v (Manifest field 16,
// which every commit carries forward), empty when the version has none.
func (d *Dataset) ReadConfig(ctx context.Context, v Version) (map[string]string, error) {
	b, _, err := d.readManifestBytes(ctx, v.Key)
	if err != nil {
		return nil, err
	}
	cfg, err := ParseConfig(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", v.Key, err)
	}
	return cfg, nil
}

// ParseConfig returns the config map of a manifest file's bytes. It checks
// only the footer and the Manifest section it reads; ParseManifest is the
// full check.
func ParseConfig(b []byte) (map[string]string, error) {
	if len(b) < footerLen+4 || string(b[len(b)-4:]) != manifestMagic {
		return nil, corrupt("not a manifest: %d bytes without the %q footer", len(b), manifestMagic)
	}
	body := len(b) - footerLen
	msg, err := section(b[:body], int64(binary.LittleEndian.Uint64(b[body:])), "manifest")
	if err != nil {
		return nil, err
	}
	cfg := map[string]string{}
	err = walk(msg, "Manifest", func(num protowire.Number, f field) error {
		if num != 16 {
			return nil
		}
		e, err := f.bytes()
		if err != nil {
			return err
		}
		var k, v string
		err = walk(e, "config entry", func(num protowire.Number, f field) error {
			switch num {
			case 1, 2:
				s, err := f.bytes()
				if num == 1 {
					k = string(s)
				} else {
					v = string(s)
				}
				return err
			}
			return nil
		})
		cfg[k] = v
		return err
	})
	if err != nil {
		return nil, err
	}
	return cfg, nil
}

// AutoCleanup is Lance's commit-time cleanup as a table's config asks for
// it: on every Interval-th version Lance removes versions committed more
// than OlderThan ago and beyond the newest RetainVersions. Verified against
// Lance 12 (LanceDB 0.39.0): when a tagged version (a retain pin) is among
// those it would remove, it removes nothing at all and logs "tagged
// version(s) have been marked for cleanup"; the commit itself succeeds.
type AutoCleanup struct {
	Interval       string `json:"interval"`
	OlderThan      string `json:"older_than,omitempty"`
	RetainVersions string `json:"retain_versions,omitempty"`
	// OlderThanDuration is OlderThan parsed; valid only when OlderThanOK.
	OlderThanDuration time.Duration `json:"-"`
	OlderThanOK       bool          `json:"-"`
	// RetainN is RetainVersions parsed, 0 when absent or not a number.
	RetainN uint64 `json:"-"`
}

// AutoCleanupOf returns the auto-cleanup a config sets, nil when it sets
// none (no interval key: Lance's hook does nothing).
func AutoCleanupOf(cfg map[string]string) *AutoCleanup {
	iv, ok := cfg[ConfigAutoCleanupInterval]
	if !ok {
		return nil
	}
	a := &AutoCleanup{Interval: iv, OlderThan: cfg[ConfigAutoCleanupOlderThan], RetainVersions: cfg[ConfigAutoCleanupRetainVersions]}
	if a.OlderThan != "" {
		a.OlderThanDuration, a.OlderThanOK = parseHumanDuration(a.OlderThan)
	}
	if a.RetainVersions != "" {
		a.RetainN, _ = strconv.ParseUint(a.RetainVersions, 10, 64)
	}
	return a
}

// humanUnits are the units of the humantime crate, which Lance parses
// lance.auto_cleanup.older_than with (and writes it with: "14days").
var humanUnits = map[string]time.Duration{
	"nsec": time.Nanosecond, "ns": time.Nanosecond,
	"usec": time.Microsecond, "us": time.Microsecond,
	"msec": time.Millisecond, "ms": time.Millisecond,
	"seconds": time.Second, "second": time.Second, "sec": time.Second, "s": time.Second,
	"minutes": time.Minute, "minute": time.Minute, "min": time.Minute, "mins": time.Minute, "m": time.Minute,
	"hours": time.Hour, "hour": time.Hour, "hr": time.Hour, "hrs": time.Hour, "h": time.Hour,
	"days": 24 * time.Hour, "day": 24 * time.Hour, "d": 24 * time.Hour,
	"weeks": 7 * 24 * time.Hour, "week": 7 * 24 * time.Hour, "w": 7 * 24 * time.Hour,
	"months": 2_630_016 * time.Second, "month": 2_630_016 * time.Second, "M": 2_630_016 * time.Second,
	"years": 31_557_600 * time.Second, "year": 31_557_600 * time.Second, "y": 31_557_600 * time.Second,
}

// parseHumanDuration parses "14days", "1h 30m", "0s"; false for anything
// else (Lance would refuse it too, and its cleanup then never runs).
func parseHumanDuration(s string) (time.Duration, bool) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, false
	}
	var total time.Duration
	for s != "" {
		i := strings.IndexFunc(s, func(r rune) bool { return !unicode.IsDigit(r) })
		if i <= 0 {
			return 0, false
		}
		n, err := strconv.ParseInt(s[:i], 10, 64)
		if err != nil {
			return 0, false
		}
		s = s[i:]
		j := strings.IndexFunc(s, func(r rune) bool { return !unicode.IsLetter(r) })
		if j < 0 {
			j = len(s)
		}
		unit, ok := humanUnits[s[:j]]
		if !ok || n > int64(1<<63-1)/int64(unit) {
			return 0, false
		}
		total += time.Duration(n) * unit
		s = strings.TrimLeft(s[j:], " ")
	}
	return total, true
}
