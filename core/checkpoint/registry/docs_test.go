package registry

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// The example in docs/checkpoints.md is a real snapshot: compacted, it
// decodes, re-encodes to the same bytes, and its Ref and pin tag names are
// the ones the page prints.
func TestDocsExample(t *testing.T) {
	doc, err := os.ReadFile("../../../docs/checkpoints.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	start := strings.Index(text, "```json\n")
	if start < 0 {
		t.Fatal("no JSON example in docs/checkpoints.md")
	}
	block := text[start+len("```json\n"):]
	block = block[:strings.Index(block, "```")]
	var buf bytes.Buffer
	if err := json.Compact(&buf, []byte(block)); err != nil {
		t.Fatal(err)
	}
	buf.WriteByte('\n')
	s, err := decode(VersionKey(1), buf.Bytes(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if again := encodeT(t, redraft(s)); !bytes.Equal(again, buf.Bytes()) {
		t.Fatalf("the example is not in canonical form:\n%s\n%s", buf.Bytes(), again)
	}
	want := []string{s.Ref().String()}
	c := s.Live()[0]
	reg, err := RegistryPinTag(c.ID, RegistryTarget(s.Ref()))
	if err != nil {
		t.Fatal(err)
	}
	tables, err := c.TablePinTags()
	if err != nil {
		t.Fatal(err)
	}
	want = append(append(want, reg), tables...)
	flat := strings.Join(strings.Fields(text), " ")
	for _, w := range want {
		if !strings.Contains(flat, w) {
			t.Errorf("docs/checkpoints.md does not show %s", w)
		}
	}
}
