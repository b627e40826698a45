package daemon

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/retain-dev/retain/core/storage"
)

// Every refusal of a config names the file and the line to fix.
func TestConfigErrorsNameFileAndLine(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name, text string
		line       int
		want       string
	}{
		{"typo.yaml", "# daemon\ninterval: 1h\nintervl: 2h\n", 3, `unknown key "intervl" (did you mean "interval"?)`},
		{"nested-typo.yaml", "interval: 1h\nretention:\n  keep_last: 3\n  olderthan: 2h\n", 4, `unknown key "olderthan" (did you mean "older_than"?)`},
		{"wrong-level.yaml", "interval: 1h\nkeep_last: 3\n", 2, `key "keep_last" belongs under "retention"`},
		{"unknown.yaml", "interval: 1h\n\ncolour: blue\n", 3, `unknown key "colour": the keys at the top level are enabled, interval, retention, actor, parallelism, max_rps`},
		{"max-rps.yaml", "interval: 1h\nmax_rps: lots\n", 2, `max_rps must be a number`},
		{"parallelism.yaml", "interval: 1h\n\nparallelism: 1000\n", 3, `parallelism must be between 1 and 256`},
		{"dup.yaml", "interval: 1h\nenabled: true\ninterval: 2h\n", 3, `key "interval" again (first on line 1)`},
		{"bad-duration.yaml", "retention:\n  writers_stopped: true\n  older_than: 7 days\n", 3, `retention.older_than: invalid duration "7 days"`},
		{"number-duration.yaml", "interval: 10\n", 1, `interval is a duration written as text`},
		{"bad-int.yaml", "retention:\n  keep_last: many\n", 2, `retention.keep_last must be a whole number, not the value "many"`},
		{"bad-bool.yaml", "\n\nenabled: sometimes\n", 3, `enabled must be true or false`},
		{"negative.yaml", "retention:\n  writers_stopped: true\n\n  keep_last: -1\n", 4, `keep_last may not be negative`},
		{"too-short.yaml", "retention:\n  keep_last: 2\ninterval: 1ms\n", 3, `interval 1ms is too short`},
		{"online.yaml", "interval: 1h\nretention:\n  keep_last: 2\n  older_than: 10m\n", 4, `needs older_than of at least 1h`},
		{"online-no-age.yaml", "interval: 1h\nretention:\n  keep_last: 2\n", 2, `needs older_than of at least 1h`},
		{"not-a-map.yaml", "retention: [1, 2]\n", 1, `"retention" must be a mapping of keys (older_than, keep_last, every, writers_stopped, tables, branches), not a list`},
		{"syntax.yaml", "interval: 1h\nretention:\n\tkeep_last: 2\n", 3, `the config does not parse: found character that cannot start any token`},
		{"actor.yaml", "interval: 1h\nactor: \"ops\\nforged\"\n", 2, `actor has a non-printable character`},
		{"typo.json", "{\n  \"interval\": \"1h\",\n  \"retention\": {\"keep_lats\": 2}\n}\n", 3, `unknown key "keep_lats" (did you mean "keep_last"?)`},
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
}

// A good config still parses, JSON as well as YAML; empty is the defaults.
func TestConfigParsesYAMLAndJSON(t *testing.T) {
	want := Config{Interval: Duration(2 * 3600e9), Actor: "ops", Parallelism: 64, MaxRPS: 250, Retention: RetentionConfig{KeepLast: 3, OlderThan: Duration(336 * 3600e9), WritersStopped: true}}
	for name, text := range map[string]string{
		"c.yaml": "interval: 2h\nactor: ops\nparallelism: 64\nmax_rps: 250\nretention:\n  keep_last: 3\n  older_than: 14d\n  writers_stopped: true\n  every:\n",
		"c.json": `{"interval": "2h", "actor": "ops", "parallelism": 64, "max_rps": 250, "retention": {"keep_last": 3, "older_than": "2w", "writers_stopped": true}}`,
	} {
		c, err := ParseConfig(name, []byte(text))
		if err != nil || c.Interval != want.Interval || c.Actor != want.Actor || c.Parallelism != want.Parallelism || c.MaxRPS != want.MaxRPS || !reflect.DeepEqual(c.Retention, want.Retention) || c.Enabled != nil {
			t.Fatalf("%s: %+v %v", name, c, err)
		}
	}
	for _, text := range []string{"", "# nothing\n", "retention:\n"} {
		if c, err := ParseConfig("e.yaml", []byte(text)); err != nil || c.RetentionOn() || !c.IsEnabled() {
			t.Fatalf("%q: %+v %v", text, c, err)
		}
	}
	if c, err := ParseConfig("d.yaml", []byte("enabled: false\n")); err != nil || c.IsEnabled() {
		t.Fatalf("enabled: false: %+v %v", c, err)
	}
}
