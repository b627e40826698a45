package checkpoint

import (
	"strings"
	"testing"

	"github.com/retain-dev/retain/internal/lancetest"
)

// TestRealLanceReadsPins: real Lance lists the ogcp_ tags a checkpoint
// wrote and checks them out with the row counts of the pinned versions.
func TestRealLanceReadsPins(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real Lance (Node)")
	}
	s, _, dir := localStore(t, "v2-appends", "branch-tag")
	c, err := Create(bg, s, "real", "")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"v2-appends.lance": 7, "branch-tag.lance": 6} // fixtures.json: rows at main v3
	for _, ct := range c.Tables {
		var res struct {
			Results []map[string]any `json:"results"`
		}
		lancetest.Node(t, "refs.cjs", map[string]any{"dir": dir, "table": strings.TrimSuffix(ct.Path, ".lance"), "naming": "v2",
			"ops": []map[string]any{{"op": "tags"}, {"op": "count", "ref": ct.Tag}}}, &res)
		tg, ok := res.Results[0][ct.Tag].(map[string]any)
		if !ok || tg["version"].(float64) != float64(ct.Version) {
			t.Fatalf("%s: Lance lists %v", ct.Path, res.Results[0])
		}
		if got := res.Results[1]["rows"].(float64); int(got) != want[ct.Path] {
			t.Fatalf("%s: checkout of %s has %v rows, want %d", ct.Path, ct.Tag, got, want[ct.Path])
		}
	}
	if _, err := Delete(bg, s, "real"); err != nil {
		t.Fatal(err)
	}
	for _, ct := range c.Tables {
		var res struct {
			Results []map[string]any `json:"results"`
		}
		lancetest.Node(t, "refs.cjs", map[string]any{"dir": dir, "table": strings.TrimSuffix(ct.Path, ".lance"), "naming": "v2",
			"ops": []map[string]any{{"op": "tags"}}}, &res)
		if _, ok := res.Results[0][ct.Tag]; ok {
			t.Fatalf("%s: Lance still lists %s after delete", ct.Path, ct.Tag)
		}
	}
}
