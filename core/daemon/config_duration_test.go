package daemon

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The daemon config takes the same durations as the CLI's flags.
func TestConfigDurationsInDaysAndWeeks(t *testing.T) {
	p := filepath.Join(t.TempDir(), "daemon.yaml")
	os.WriteFile(p, []byte("interval: 36h\nretention:\n  older_than: 7d\n  every: 1w2d\n"), 0o644)
	c, err := LoadConfig(p)
	if err != nil {
		t.Fatal(err)
	}
	if c.interval() != 36*time.Hour || c.Policy().OlderThan != 7*24*time.Hour || c.every() != 9*24*time.Hour {
		t.Fatalf("parsed %+v", c)
	}
	os.WriteFile(p, []byte("retention:\n  older_than: 7days\n"), 0o644)
	if _, err := LoadConfig(p); err == nil {
		t.Fatal("7days parsed")
	}
}
