// Package lancetest runs real Lance — the npm package @lancedb/lancedb,
// which ships Lance's native module — as the judge of retain's Lance code.
// It installs pinned versions into the module's .tools folder on first use
// and runs the Node scripts next to this file, which take one JSON argument
// and print one JSON result.
package lancetest

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/retain-dev/retain/internal/emulator"
)

// Pinned versions of the oracle. LanceDB 0.39.0 embeds Lance 12.
const (
	LanceDBVersion = "0.39.0"
	ArrowVersion   = "18.1.0"
)

// Dir returns the directory holding node_modules with LanceDB installed,
// installing it if needed (npm install with exact versions: `npm ci` with a
// lock file fails on LanceDB's missing other-platform packages).
func Dir(t testing.TB) string {
	t.Helper()
	name := "lancedb-" + LanceDBVersion
	tools := emulator.Ensure(t, name,
		func(tools string) bool {
			_, err := os.Stat(filepath.Join(tools, name, "node_modules", "@lancedb", "lancedb", "package.json"))
			return err == nil
		},
		func(tools string) error {
			return emulator.NPMInstall(filepath.Join(tools, name), "@lancedb/lancedb@"+LanceDBVersion, "apache-arrow@"+ArrowVersion)
		})
	return filepath.Join(tools, name)
}

// ScriptDir is the directory of the Node scripts (this package's folder).
func ScriptDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(file)
}

// Node runs `node <script> <json(arg)>` with LanceDB resolvable and decodes
// its stdout JSON into out (if out is not nil). The script's stderr is
// included in the failure message.
func Node(t testing.TB, script string, arg any, out any) {
	t.Helper()
	dir := Dir(t)
	in, err := json.Marshal(arg)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("node", filepath.Join(ScriptDir(), script), string(in))
	cmd.Env = append(os.Environ(), "NODE_PATH="+filepath.Join(dir, "node_modules"), "AWS_EC2_METADATA_DISABLED=true")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node %s %s: %v\nstderr:\n%s\nstdout:\n%s", script, in, err, stderr.String(), stdout.String())
	}
	if out != nil {
		if err := json.Unmarshal(stdout.Bytes(), out); err != nil {
			t.Fatalf("node %s: output is not JSON (%v):\n%s", script, err, stdout.String())
		}
	}
}
