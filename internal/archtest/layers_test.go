// Package archtest holds the tree's shape: which package may import which,
// and how large a file may grow.
package archtest

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

const mod = "github.com/retain-dev/retain/"

// layers ranks every package of the workspace by path prefix (the longest
// prefix names a package's unit). Package code may import a package of a
// lower rank, or of its own unit; anything else is an arrow pointing up.
// Tests may import more (the harnesses in internal/, a higher layer to
// build a fixture): only package code is held here.
var layers = map[string]int{
	// the storage contract, its own module
	"core/storage/redact":      0,
	"core/storage":             1,
	"core/storage/memstore":    2,
	"core/storage/claim":       2,
	"core/storage/storagetest": 2,
	// the plugin wire and the conformance suite, modules of their own
	"pluginproto/internal/pb":        0,
	"pluginproto":                    3,
	"conformance":                    4,
	"conformance/examples/httpstore": 5,
	// the adapters: on the contract alone; bundled serves them as plugins
	"adapters/localfs": 5,
	"adapters/s3":      5,
	"adapters/gcs":     5,
	"adapters/azure":   5,
	"adapters/bundled": 6,
	// the retention core, bottom up
	"core/internal":            5,
	"core/failpoint":           5,
	"core/duration":            5,
	"core/rotation":            5,
	"core/lance":               6,
	"core/authz":               6,
	"core/refs/refmeta":        6,
	"core/refs/lifecycle":      7,
	"core/checkpoint/registry": 7,
	"core/retention/runs":      7,
	"core/checkpoint":          8,
	"core/tag":                 9,
	"core/lease":               9,
	"core/branch":              9,
	"core/retention":           10,
	"core/daemon":              11,
	// the commands
	"cmd/retain/internal":      12,
	"cmd/conformance/internal": 12,
	"cmd/retain":               13,
	"cmd/conformance":          13,
	// test harnesses and tools: imported by tests only
	"internal": 14,
}

// unit is the longest prefix in layers that names pkg (relative to mod).
func unit(pkg string) (string, bool) {
	best := ""
	for p := range layers {
		if (pkg == p || strings.HasPrefix(pkg, p+"/")) && len(p) > len(best) {
			best = p
		}
	}
	return best, best != ""
}

func TestImportsPointDown(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, mod+"...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	arrows := map[string]bool{}
	var up []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		from, ok := strings.CutPrefix(f[0], mod)
		if !ok {
			continue
		}
		fu, ok := unit(from)
		if !ok {
			t.Errorf("%s is in no layer: add its folder to layers", from)
			continue
		}
		for _, imp := range f[1:] {
			to, ok := strings.CutPrefix(imp, mod)
			if !ok {
				continue
			}
			tu, ok := unit(to)
			if !ok {
				t.Errorf("%s is in no layer: add its folder to layers", to)
				continue
			}
			if fu == tu {
				continue
			}
			arrows[fu+" -> "+tu] = true
			if layers[tu] >= layers[fu] {
				up = append(up, from+" -> "+to)
			}
		}
	}
	sort.Strings(up)
	for _, a := range up {
		t.Errorf("import points up or across a layer: %s", a)
	}
	t.Logf("%d arrows between units, %d pointing up", len(arrows), len(up))
}

// Every module but the root is one a vendor or embedder requires alone:
// none of them may import the root module's packages.
func TestSmallModulesStandAlone(t *testing.T) {
	for _, m := range []string{"core/storage", "pluginproto", "conformance", "conformance/examples/httpstore"} {
		out, err := exec.Command("go", "list", "-deps", "-f", "{{with .Module}}{{.Path}}{{end}}", mod+m+"/...").Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", m, err)
		}
		for _, dep := range strings.Fields(string(out)) {
			if dep == strings.TrimSuffix(mod, "/") {
				t.Errorf("module %s builds against retain's root module", m)
				break
			}
		}
	}
}

// maxFileLines bounds a hand-written Go file: one a reader can hold.
const maxFileLines = 800

// Every hand-written Go file of the tree stays within maxFileLines
// (generated code, marked as Go marks it, is exempt).
func TestFilesStaySmall(t *testing.T) {
	out, err := exec.Command("git", "ls-files", "--cached", "--others", "--exclude-standard", "--full-name", "--", ":/*.go").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Fatal(err)
	}
	root := strings.TrimSpace(string(top))
	for _, f := range strings.Fields(string(out)) {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			continue // deleted in the working tree
		}
		if generated.Match(b) {
			continue
		}
		if n := bytes.Count(b, []byte("\n")); n > maxFileLines {
			t.Errorf("%s has %d lines, at most %d: split it by phase", f, n, maxFileLines)
		}
	}
}

// generated is Go's marker of generated code.
var generated = regexp.MustCompile(`(?m)^// Code generated .* DO NOT EDIT\.$`)
