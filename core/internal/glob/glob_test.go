package glob

import "testing"

func TestMatch(t *testing.T) {
	for _, c := range []struct {
		pat, name string
		want      bool
	}{
		{"hourly/*", "hourly/2026-12-03T10:00Z", true},
		{"hourly/*", "hourly", false},
		{"hourly/*", "daily/2026-12-03", false},
		{"*", "a/b/c", true},
		{"scratch_*", "scratch_1.lance", true},
		{"scratch_*", "x/scratch_1.lance", false},
		{"v?", "v1", true},
		{"v?", "v10", false},
		{"a.b", "aXb", false}, // '.' is literal
		{"[x]", "[x]", true},  // so are brackets
	} {
		p, err := Compile(c.pat)
		if err != nil {
			t.Fatal(err)
		}
		if got := p.Match(c.name); got != c.want {
			t.Errorf("%q ~ %q = %v, want %v", c.pat, c.name, got, c.want)
		}
	}
	if _, err := Compile(""); err == nil {
		t.Error("the empty pattern compiled")
	}
}
