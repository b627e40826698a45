package emulator

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A tool installed under a folder whose parent is someone's npm project
// stays in its own folder and leaves the project as it was. It installs a
// package packed here, so the test needs npm but no registry.
func TestNPMInstallLeavesAParentProjectAlone(t *testing.T) {
	if _, err := exec.LookPath("npm"); err != nil {
		t.Skip("npm not installed")
	}
	work := t.TempDir()
	src := filepath.Join(work, "src")
	write(t, filepath.Join(src, "package.json"), `{"name":"retain-probe","version":"1.0.0","main":"index.js"}`)
	write(t, filepath.Join(src, "index.js"), "module.exports = 42;\n")
	out, err := exec.Command("npm", "pack", "--silent", "--pack-destination", work, src).Output()
	if err != nil {
		t.Fatalf("npm pack: %v", err)
	}
	tarball := filepath.Join(work, strings.TrimSpace(string(out)))

	parent := filepath.Join(work, "someones-project")
	manifest := `{"name":"someones-project","version":"1.0.0","dependencies":{}}` + "\n"
	write(t, filepath.Join(parent, "package.json"), manifest)
	tool := filepath.Join(parent, "clone", ".tools", "probe")
	if err := NPMInstall(tool, tarball); err != nil {
		t.Fatal(err)
	}
	if !exists(filepath.Join(tool, "node_modules", "retain-probe", "index.js")) {
		t.Errorf("the package is not in %s", tool)
	}
	if b, err := os.ReadFile(filepath.Join(parent, "package.json")); err != nil || !bytes.Equal(b, []byte(manifest)) {
		t.Errorf("the parent's package.json changed (%v):\n%s", err, b)
	}
	for _, p := range []string{"node_modules", "package-lock.json"} {
		if exists(filepath.Join(parent, p)) {
			t.Errorf("npm wrote %s into the parent project", p)
		}
	}
}

func write(t *testing.T, path, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}
