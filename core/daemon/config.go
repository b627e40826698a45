// Package daemon is the maintenance daemon (`retain daemon`): one pass every
// interval reconciles the store's pins (online, no deletions) and, on the
// tail of the same pass and inside the same in-flight guard, enforces the
// retention window with a cleanup under the retention claim — on the first
// pass after start, then at most once per RetentionEvery. The retention
// stamp (in the store, _retain/maintenance/state.json) advances only when
// a retention pass completes.
package daemon

import (
	"fmt"
	"os"
	"time"

	"github.com/retain-dev/retain/core/duration"
	"github.com/retain-dev/retain/core/internal/glob"
	"github.com/retain-dev/retain/core/retention"
	"github.com/retain-dev/retain/core/storage"
)

// Duration is a time.Duration written as text in YAML and JSON: Go's
// forms ("1h", "168h") or days and weeks ("7d", "2w", "1w2d").
type Duration time.Duration

func (d Duration) MarshalJSON() ([]byte, error) {
	return []byte(`"` + time.Duration(d).String() + `"`), nil
}

func (d *Duration) UnmarshalJSON(b []byte) error {
	s := string(b)
	if len(s) < 2 || s[0] != '"' || s[len(s)-1] != '"' {
		return fmt.Errorf("a duration is written as text, e.g. \"7d\", \"1w2d\" or \"36h\", not %s", s)
	}
	v, err := duration.Parse(s[1 : len(s)-1])
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// Config is the daemon's configuration (`retain daemon --config F`, YAML
// or JSON). Unknown fields are refused.
type Config struct {
	// Enabled: false stops all background mutation — reconcile and, with
	// it, retention: the window is then not enforced. Default true.
	Enabled *bool `json:"enabled,omitempty"`
	// Interval between maintenance passes. Default 1h.
	Interval Duration `json:"interval,omitempty"`
	// Retention is the window the daemon enforces.
	Retention RetentionConfig `json:"retention"`
	// Actor recorded in the claim and the audit lines; default
	// "retain-daemon@<host>".
	Actor string `json:"actor,omitempty"`
	// Parallelism bounds the store's requests in flight, as --parallelism
	// does; 0 (the default) is what the store's adapter declares.
	Parallelism int `json:"parallelism,omitempty"`
	// MaxRPS caps the requests per second to the store, as --max-rps
	// does; 0 (the default) is no cap.
	MaxRPS float64 `json:"max_rps,omitempty"`

	// Stores are the store URIs the daemon keeps, beside those on its
	// command line.
	Stores []string `json:"stores,omitempty"`
	// Discover are URIs under which every child holding a retain registry
	// or a Lance table is a store, found again before each round.
	Discover []string `json:"discover,omitempty"`
	// Concurrency bounds the stores in a pass at once. Default 4.
	Concurrency int `json:"concurrency,omitempty"`
	// ExpiryMargin: an expired reader lease or tag is removed (before
	// each retention run) once this daemon's clock is past its expiry by
	// more than this — the clock skew expiries tolerate. Default 5m.
	ExpiryMargin Duration `json:"expiry_margin,omitempty"`
	// Checkpoints are the scheduled checkpoint series (Schedule), taken
	// in every store the daemon keeps, after the pass's reconcile and
	// before its retention.
	Checkpoints []Schedule `json:"checkpoints,omitempty"`
	// Identity names this replica (--identity; never from the file, which
	// replicas share): it orders the stores and is recorded as the host in
	// every claim the daemon takes, so a restart under the same identity
	// may finish what it left. At most one process may run under an
	// identity at a time (a StatefulSet pod name is such an identity;
	// docs/production.md).
	Identity string `json:"-"`
}

// RetentionConfig is the window and how retention may run.
type RetentionConfig struct {
	// OlderThan and KeepLast as `retain cleanup run`; at least one is
	// needed for retention to run at all.
	OlderThan Duration `json:"older_than,omitempty"`
	KeepLast  int      `json:"keep_last,omitempty"`
	// Every: retention runs at most once per this. Default 24h.
	Every Duration `json:"every,omitempty"`
	// WritersStopped: the operator guarantees no writer commits while the
	// daemon runs (a store only written in batches, say): cleanup then
	// runs as `--confirm-write-outage`. Default false: the daemon cleans
	// online, which needs OlderThan >= retention.MinOnlineAge.
	WritersStopped bool `json:"writers_stopped,omitempty"`
	// Tables and Branches replace the window for the tables and branches
	// their patterns match, in the order written (the first match wins; a
	// branch's rule wins over its table's): retention.Rule.
	Tables   []WindowRule `json:"tables,omitempty"`
	Branches []WindowRule `json:"branches,omitempty"`
}

// WindowRule is one per-table or per-branch window:
// `branches: {"session/*": {older_than: 7d}}`.
type WindowRule struct {
	Pattern   string   `json:"pattern"`
	OlderThan Duration `json:"older_than,omitempty"`
	KeepLast  int      `json:"keep_last,omitempty"`
}

func rules(ws []WindowRule) []retention.Rule {
	var out []retention.Rule
	for _, w := range ws {
		out = append(out, retention.Rule{Pattern: w.Pattern, OlderThan: time.Duration(w.OlderThan), KeepLast: w.KeepLast})
	}
	return out
}

// Defaults.
const (
	DefaultInterval       = time.Hour
	DefaultRetentionEvery = 24 * time.Hour
	DefaultConcurrency    = 4
	MaxConcurrency        = 256
)

// concurrency is the stores-in-flight bound with its default.
func (c Config) concurrency() int {
	if c.Concurrency <= 0 {
		return DefaultConcurrency
	}
	return c.Concurrency
}

// LoadConfig reads a config file; "" gives the defaults. Every error about
// a key or value names the file and line (a *ConfigError).
func LoadConfig(path string) (Config, error) {
	if path == "" {
		var c Config
		return c, c.Validate()
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return Config{}, storage.Errorf("daemon-config", path, storage.ErrInvalidArgument, "cannot read the config: %v", err)
	}
	return ParseConfig(path, b)
}

// IsEnabled reports whether background mutation is on.
func (c Config) IsEnabled() bool { return c.Enabled == nil || *c.Enabled }

// interval is the pass interval with its default.
func (c Config) interval() time.Duration {
	if c.Interval <= 0 {
		return DefaultInterval
	}
	return time.Duration(c.Interval)
}

func (c Config) every() time.Duration {
	if c.Retention.Every <= 0 {
		return DefaultRetentionEvery
	}
	return time.Duration(c.Retention.Every)
}

// RetentionOn reports whether a window is configured.
func (c Config) RetentionOn() bool { return c.Retention.OlderThan > 0 || c.Retention.KeepLast > 0 }

// Policy is the cleanup policy of the configured window.
func (c Config) Policy() retention.Policy {
	return retention.Policy{OlderThan: time.Duration(c.Retention.OlderThan), KeepLast: c.Retention.KeepLast,
		Tables: rules(c.Retention.Tables), Branches: rules(c.Retention.Branches)}
}

// Validate refuses a configuration the daemon could not honour.
func (c Config) Validate() error { return c.validate(func(string) (string, int) { return "", 0 }) }

// validate is Validate with where each key was written, so a refusal
// names the line to fix; at returns "", 0 for a key not in a file.
func (c Config) validate(at func(key string) (string, int)) error {
	bad := func(key, format string, args ...any) error {
		f, l := at(key)
		return &ConfigError{File: f, Line: l, Msg: fmt.Sprintf(format, args...)}
	}
	switch {
	case c.Interval < 0:
		return bad("interval", "interval may not be negative")
	case c.ExpiryMargin < 0:
		return bad("expiry_margin", "expiry_margin may not be negative")
	case c.Retention.Every < 0:
		return bad("retention.every", "every may not be negative")
	case c.Retention.OlderThan < 0:
		return bad("retention.older_than", "older_than may not be negative")
	case c.Parallelism < 0 || c.Parallelism > storage.MaxParallelism:
		return bad("parallelism", "parallelism must be between 1 and %d (0: the adapter's default), got %d", storage.MaxParallelism, c.Parallelism)
	case c.MaxRPS < 0:
		return bad("max_rps", "max_rps may not be negative (0: no cap), got %v", c.MaxRPS)
	case c.Concurrency < 0 || c.Concurrency > MaxConcurrency:
		return bad("concurrency", "concurrency must be between 1 and %d (0: %d), got %d", MaxConcurrency, DefaultConcurrency, c.Concurrency)
	case c.Retention.KeepLast < 0:
		return bad("retention.keep_last", "keep_last may not be negative (got %d)", c.Retention.KeepLast)
	case c.Interval > 0 && time.Duration(c.Interval) < 100*time.Millisecond:
		return bad("interval", "interval %s is too short (at least 100ms)", time.Duration(c.Interval))
	case c.RetentionOn() && !c.Retention.WritersStopped && time.Duration(c.Retention.OlderThan) < retention.MinOnlineAge:
		key := "retention.older_than"
		if c.Retention.OlderThan == 0 {
			key = "retention"
		}
		return bad(key, "retention runs online (writers may commit) and then needs older_than of at least %s (got %s): a writer may still build on a recent version; lengthen it, or set writers_stopped: true if no writer commits while the daemon runs",
			retention.MinOnlineAge, time.Duration(c.Retention.OlderThan))
	}
	if err := c.validateRules(bad); err != nil {
		return err
	}
	if err := c.validateSchedules(bad); err != nil {
		return err
	}
	if err := checkConfigActor(c.Actor); err != "" {
		return bad("actor", "actor %s", err)
	}
	if err := checkConfigActor(c.Identity); err != "" {
		return bad("identity", "identity %s", err)
	}
	return nil
}

// validateRules refuses a per-reference window retention could not run:
// one that says nothing to keep, a bad pattern, or (online) an older_than
// too short for writers still committing.
func (c Config) validateRules(bad func(key, format string, args ...any) error) error {
	for _, set := range []struct {
		key   string
		rules []WindowRule
	}{{"retention.tables", c.Retention.Tables}, {"retention.branches", c.Retention.Branches}} {
		for i, w := range set.rules {
			at := fmt.Sprintf("%s[%d]", set.key, i)
			if _, err := glob.Compile(w.Pattern); err != nil {
				return bad(at, "%s %q: %v", set.key, w.Pattern, err)
			}
			switch {
			case w.OlderThan < 0 || w.KeepLast < 0:
				return bad(at, "%s %q: older_than and keep_last may not be negative", set.key, w.Pattern)
			case w.OlderThan == 0 && w.KeepLast == 0:
				return bad(at, "%s %q sets neither older_than nor keep_last: say which versions it keeps", set.key, w.Pattern)
			case !c.RetentionOn():
				return bad(at, "%s %q replaces the window where it matches, but retention has no window (older_than and/or keep_last) for everything else: set one", set.key, w.Pattern)
			case !c.Retention.WritersStopped && time.Duration(w.OlderThan) < retention.MinOnlineAge:
				key := at + ".older_than"
				if w.OlderThan == 0 {
					key = at
				}
				return bad(key, "%s %q: retention runs online (writers may commit) and then needs older_than of at least %s in every rule (got %s): lengthen it, or set writers_stopped: true if no writer commits while the daemon runs",
					set.key, w.Pattern, retention.MinOnlineAge, time.Duration(w.OlderThan))
			}
		}
	}
	return nil
}

// validateSchedules refuses a schedule that could not run, and two whose
// names overlap: each one's rotation would judge the other's checkpoints.
func (c Config) validateSchedules(bad func(key, format string, args ...any) error) error {
	type series struct {
		pat    *glob.Pattern
		sample string
	}
	var seen []series
	for i, s := range c.Checkpoints {
		at := fmt.Sprintf("checkpoints[%d]", i)
		if key, err := s.validate(c.interval()); err != nil {
			return bad(at+"."+key, "checkpoints[%d]: %v", i, err)
		}
		match, _ := s.Match()
		pat, _ := glob.Compile(match)
		sample, _ := s.NameAt(s.Slot(time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)))
		for j, o := range seen {
			if o.pat.Match(sample) || pat.Match(o.sample) {
				return bad(at+".name", "checkpoints[%d] (%q) and checkpoints[%d] (%q) name overlapping checkpoints (%q, %q): give each series its own prefix, or each would rotate the other's",
					i, s.Name, j, c.Checkpoints[j].Name, sample, o.sample)
			}
		}
		seen = append(seen, series{pat, sample})
	}
	return nil
}
