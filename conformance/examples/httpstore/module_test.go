package httpstore_test

import (
	"os"
	"os/exec"
	"sort"
	"strings"
	"testing"
)

// maxModules bounds the modules an adapter that depends on the SDK only
// compiles against: the point of the SDK module is that a vendor does not
// inherit the cloud SDKs, Lance interop or CLI dependencies of retain.
const maxModules = 25

// maxGraph bounds the requirement graph (`go list -m all`); see
// TestModuleStaysSmall for why it cannot be maxModules.
const maxGraph = 45

// goOutside runs the go command on this module alone, outside the workspace.
// Inside retain's workspace the modules it requires are not yet published,
// so there it is skipped: .ci/install-check runs it on a copy of this
// module, outside the workspace, against those modules as they will be
// published.
func goOutside(t *testing.T, args ...string) string {
	t.Helper()
	if out, err := exec.Command("go", "env", "GOWORK").Output(); err == nil && strings.TrimSpace(string(out)) != "" && strings.TrimSpace(string(out)) != "off" {
		t.Skip("inside a go.work workspace; .ci/install-check runs this outside it")
	}
	cmd := exec.Command("go", args...)
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	out, err := cmd.Output()
	if err != nil {
		stderr := ""
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("GOWORK=off go %s: %v\n%s", strings.Join(args, " "), err, stderr)
	}
	return string(out)
}

// TestModuleStaysSmall: outside the workspace this module builds from its
// own go.mod and go.sum, and what it compiles (with its tests) comes from at
// most maxModules modules, none of them retain's main module.
//
// `go list -m all` is larger (43 modules at the time of writing, against
// 253 for retain's main module): it is the requirement graph, and its floor
// is what go-plugin's and grpc's own go.mod files require (16 and 20
// entries, for their tests and grpc's xDS and Google-auth features). Go
// reads those go.mod files but never compiles their code for this build.
// The SDK asks for the oldest grpc its generated code runs on (v1.64.1,
// SupportPackageIsVersion9); grpc v1.84 would make the graph 64. The graph
// is bounded at maxGraph so that no SDK change grows it unnoticed.
func TestModuleStaysSmall(t *testing.T) {
	graph := strings.Fields(goOutside(t, "list", "-m", "-f", "{{.Path}}", "all"))
	t.Logf("go list -m all: %d modules in the requirement graph", len(graph))
	if len(graph) > maxGraph {
		t.Errorf("an adapter on pluginproto and conformance alone's requirement graph has %d modules, at most %d allowed: %v", len(graph), maxGraph, graph)
	}
	var built []string
	for _, m := range strings.Fields(goOutside(t, "list", "-deps", "-test", "-f", "{{with .Module}}{{.Path}}{{end}}", "./...")) {
		if i := sort.SearchStrings(built, m); i == len(built) || built[i] != m {
			built = append(built, "")
			copy(built[i+1:], built[i:])
			built[i] = m
		}
	}
	t.Logf("go list -deps -test ./...: %d modules compiled:\n%s", len(built), strings.Join(built, "\n"))
	if len(built) > maxModules {
		t.Fatalf("an adapter on pluginproto and conformance alone compiles against %d modules, at most %d allowed: %v", len(built), maxModules, built)
	}
	for _, m := range graph {
		if m == "github.com/retain-dev/retain" {
			t.Fatal("the adapter's module graph includes retain's main module: depend on github.com/retain-dev/retain/pluginproto and conformance only")
		}
	}
	goOutside(t, "build", "./...")
}
