package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/retain-dev/retain/internal/lancetest"
)

// docBlock is one fenced block of a doc page.
type docBlock struct {
	lang, text string
	line       int
}

func docBlocks(t *testing.T, path string) []docBlock {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []docBlock
	var cur *docBlock
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		l := sc.Text()
		if strings.HasPrefix(l, "```") {
			if cur == nil {
				cur = &docBlock{lang: strings.TrimPrefix(l, "```"), line: n}
			} else {
				out = append(out, *cur)
				cur = nil
			}
			continue
		}
		if cur != nil {
			cur.text += l + "\n"
		}
	}
	return out
}

// TestDayTwoPageRuns runs docs/day-two.md: every sh and js block, in page
// order, against a real store built by real LanceDB (the page's
// /data/lance and /backup/lance are temporary folders, `retain` is the
// binary under test), each command required to succeed; its go block is
// the body of the Example go test runs.
func TestDayTwoPageRuns(t *testing.T) {
	t.Parallel() // a process-bound test: it waits on retain, Lance and emulators, not the CPU
	page := filepath.Join("..", "..", "docs", "day-two.md")
	blocks := docBlocks(t, page)
	tmp := t.TempDir()
	store, backup := filepath.Join(tmp, "data", "lance"), filepath.Join(tmp, "backup", "lance")
	if err := os.MkdirAll(filepath.Dir(backup), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(store, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tb := range []struct{ name, naming string }{{"events", "v1"}, {"users", "v2"}} {
		lanceRun(t, store, tb.name, tb.naming, nil, map[string]any{"op": "create", "rows": 3},
			map[string]any{"op": "add", "rows": 1}, map[string]any{"op": "add", "rows": 1})
	}
	paths := strings.NewReplacer("/data/lance", store, "/backup/lance", backup)
	env := append(os.Environ(), "PATH="+filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"),
		"NODE_PATH="+filepath.Join(lancetest.Dir(t), "node_modules"))
	ran := map[string]int{}
	for _, b := range blocks {
		var cmd *exec.Cmd
		switch b.lang {
		case "sh":
			cmd = exec.Command("sh", "-e", "-x", "-c", paths.Replace(b.text))
		case "js":
			script := filepath.Join(tmp, "block.cjs")
			if err := os.WriteFile(script, []byte("(async () => {\n"+paths.Replace(b.text)+"\n})().catch((e) => { console.error(e); process.exit(1); });\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			cmd = exec.Command("node", script)
		case "go":
			ex, err := os.ReadFile(filepath.Join("..", "..", "adapters", "bundled", "example_test.go"))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(ex), b.text) {
				t.Errorf("%s:%d: the go block is not the body of ExampleOpenInProcess (adapters/bundled/example_test.go)", page, b.line)
			}
			ran[b.lang]++
			continue
		default:
			continue
		}
		cmd.Env, cmd.Dir = env, tmp
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s:%d: the %s block failed: %v\n%s", page, b.line, b.lang, err, out)
		}
		ran[b.lang]++
	}
	t.Logf("ran %v blocks of %s", ran, page)
	if ran["sh"] < 8 || ran["js"] < 3 || ran["go"] != 1 {
		t.Fatalf("ran %v blocks: the page or the scan changed", ran)
	}
}
