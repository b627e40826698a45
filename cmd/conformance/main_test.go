package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/retain-dev/retain/cmd/conformance/internal/supportmatrix"
)

var bin, acme string

// TestMain builds the conformance binary and the example vendor adapter
// once: the CLI is tested as users run it, as separate processes.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "conformance-cli-")
	if err != nil {
		panic(err)
	}
	bin, acme = filepath.Join(dir, "conformance"), filepath.Join(dir, "acme-adapter")
	for out, pkg := range map[string]string{bin: ".", acme: "./testdata/acme-adapter"} {
		if b, err := exec.Command("go", "build", "-o", out, pkg).CombinedOutput(); err != nil {
			panic(string(b))
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func runCLI(t *testing.T, env []string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

func digest(t *testing.T, path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func TestRunLocalfsWritesReports(t *testing.T) {
	dir := t.TempDir()
	jsonPath, junitPath := filepath.Join(dir, "r.json"), filepath.Join(dir, "r.xml")
	out, errs, code := runCLI(t, nil, "run", "--adapter", "localfs", "--rounds", "40", "--json", jsonPath, "--junit", junitPath)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	for _, want := range []string{"create-if-absent-race", "PASS", "sha256:", "protocol v1", "0 failed"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	var rep struct {
		Adapter       string
		AdapterSHA256 string `json:"adapter_sha256"`
		Protocol      string
		Capabilities  struct {
			CreateIfAbsent struct{ Level string } `json:"create_if_absent"`
		}
		Cases []struct{ Name, Result string }
	}
	b, _ := os.ReadFile(jsonPath)
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.AdapterSHA256 != digest(t, bin) || rep.Protocol != "v1" || rep.Capabilities.CreateIfAbsent.Level != "native" || len(rep.Cases) < 20 {
		t.Fatalf("JSON report: %+v", rep)
	}
	var ju struct {
		Tests    int `xml:"tests,attr"`
		Failures int `xml:"failures,attr"`
	}
	b, _ = os.ReadFile(junitPath)
	if err := xml.Unmarshal(b, &ju); err != nil || ju.Tests != len(rep.Cases) || ju.Failures != 0 {
		t.Fatalf("JUnit report: %+v %v", ju, err)
	}
}

func TestUsageErrorsExit2(t *testing.T) {
	for _, args := range [][]string{
		{"run"},
		{"run", "--adapter", "nosuch"},
		{"run", "--adapter", "localfs", "--run", "("},
		{"run", "--adapter", "/bin/true"}, // a path needs --sha256
		{"bogus"},
	} {
		_, errs, code := runCLI(t, nil, args...)
		if code != 2 {
			t.Errorf("%v: exit %d, want 2 (%s)", args, code, errs)
		}
	}
}

func TestVendorBinary(t *testing.T) {
	store := "file://" + t.TempDir()
	sum := digest(t, acme)
	out, errs, code := runCLI(t, nil, "run", "--adapter", acme, "--sha256", sum, "--store", store, "--rounds", "30")
	if code != 0 {
		t.Fatalf("vendor binary: exit %d\n%s\n%s", code, out, errs)
	}
	if !strings.Contains(out, "sha256:"+sum) {
		t.Fatalf("report does not name the binary's digest:\n%s", out)
	}

	wrong := strings.Repeat("0", 64)
	_, errs, code = runCLI(t, nil, "run", "--adapter", acme, "--sha256", wrong, "--store", store)
	if code != 2 || !strings.Contains(errs, wrong) || !strings.Contains(errs, sum) {
		t.Fatalf("checksum mismatch: exit %d, want 2 naming expected and actual digests:\n%s", code, errs)
	}
}

func TestLyingVendorBinaryExit1(t *testing.T) {
	out, errs, code := runCLI(t, []string{"ACME_BROKEN=plain-create"}, "run", "--adapter", acme, "--sha256", digest(t, acme),
		"--store", "file://"+t.TempDir(), "--run", "capability-honesty|create-if-absent-race", "--rounds", "20")
	if code != 1 {
		t.Fatalf("a lying adapter: exit %d, want 1\n%s\n%s", code, out, errs)
	}
	if !strings.Contains(out, "FAIL") {
		t.Fatalf("no failed case in:\n%s", out)
	}
}

// The README's support matrix is generated from the committed JSON reports
// in docs/matrix: it must be what `conformance matrix` renders from them.
func TestReadmeMatrixIsGenerated(t *testing.T) {
	files, _ := filepath.Glob("../../docs/matrix/*.json")
	if len(files) == 0 {
		t.Fatal("no reports in docs/matrix")
	}
	out, errs, code := runCLI(t, nil, append([]string{"matrix"}, files...)...)
	if code != 0 {
		t.Fatalf("matrix: %d %s", code, errs)
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	want, err := supportmatrix.ReplaceMatrix(string(readme), out)
	if err != nil {
		t.Fatal(err)
	}
	if want != string(readme) {
		t.Fatal("README.md's matrix is stale: run `go run ./cmd/conformance matrix --update README.md docs/matrix/*.json`")
	}
}
