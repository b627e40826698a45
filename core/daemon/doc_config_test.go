package daemon

import (
	"os"
	"strings"
	"testing"
)

// The config in docs/daemon.md parses, schedules included, so the page
// cannot drift from what the daemon accepts.
func TestDocumentedConfigParses(t *testing.T) {
	b, err := os.ReadFile("../../docs/daemon.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i := strings.Index(doc, "```yaml\n")
	if i < 0 {
		t.Fatal("docs/daemon.md has no yaml block")
	}
	block := doc[i+len("```yaml\n"):]
	block = block[:strings.Index(block, "```")]
	c, err := ParseConfig("docs/daemon.md", []byte(block))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Checkpoints) != 2 || c.Checkpoints[1].Keep.Yearly != -1 {
		t.Fatalf("the documented schedules: %+v", c.Checkpoints)
	}
	for _, s := range c.Checkpoints {
		slot := s.Slot(c.Checkpoints[0].Slot(mustTime(t, "2026-12-03T14:20:00Z")))
		n, err := s.NameAt(slot)
		if err != nil || (n != "hourly/20261203T140000Z" && n != "daily/2026-12-03") {
			t.Errorf("%s: %q %v", s.Name, n, err)
		}
	}
}
