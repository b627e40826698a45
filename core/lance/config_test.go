package lance

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Lance writes older_than with humantime ("14days" for its default);
// anything Lance would refuse is not guessed at.
func TestParseHumanDuration(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"14days": 14 * 24 * time.Hour, "0s": 0, "1h 30m": 90 * time.Minute, "2weeks 1day": 15 * 24 * time.Hour,
		"1year": 31_557_600 * time.Second, "250ms": 250 * time.Millisecond,
	} {
		if got, ok := parseHumanDuration(in); !ok || got != want {
			t.Errorf("%q: %v %v, want %v", in, got, ok, want)
		}
	}
	for _, in := range []string{"", "14", "days", "1 fortnight", "-1s", "99999999999999999999s"} {
		if got, ok := parseHumanDuration(in); ok {
			t.Errorf("%q parsed as %v", in, got)
		}
	}
}

// LanceDB 0.39.0's createTable writes no config (so no auto-cleanup);
// the config map is read only from the manifest section, and a file that
// is not a manifest is refused as corrupt.
func TestParseConfig(t *testing.T) {
	names, err := filepath.Glob("testdata/update.lance/_versions/*.manifest")
	if err != nil || len(names) == 0 {
		t.Fatal(names, err)
	}
	b, err := os.ReadFile(names[0])
	if err != nil {
		t.Fatal(err)
	}
	if cfg, err := ParseConfig(b); err != nil || len(cfg) != 0 || AutoCleanupOf(cfg) != nil {
		t.Fatalf("%v %v", cfg, err)
	}
	if _, err := ParseConfig([]byte("not a manifest at all, no footer")); err == nil {
		t.Fatal("a non-manifest parsed")
	}
	a := AutoCleanupOf(map[string]string{ConfigAutoCleanupInterval: "20", ConfigAutoCleanupOlderThan: "14days", ConfigAutoCleanupRetainVersions: "3"})
	if a == nil || a.Interval != "20" || !a.OlderThanOK || a.OlderThanDuration != 14*24*time.Hour || a.RetainN != 3 {
		t.Fatalf("%+v", a)
	}
}
