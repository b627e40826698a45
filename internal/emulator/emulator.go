// Package emulator starts the object-store emulators the adapter tests run
// against, on loopback, installing them on first use into the module's
// git-ignored .tools/ folder (CI starts from a clean machine): versitygw and
// Azurite as child processes, gofakes3 and fake-gcs-server in-process. Each
// is stopped by t.Cleanup, and child processes die with the test binary.
package emulator

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Versions the emulators are pinned to; the conformance matrix names them.
const (
	VersitygwVersion     = "v1.8.0"
	AzuriteVersion       = "3.37.0"
	GoFakeS3Version      = "v1.2.0"
	FakeGCSServerVersion = "v1.56.1"
)

// ModuleRoot is the directory holding go.mod.
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory")
		}
		dir = parent
	}
}

// ToolsDir is <module root>/.tools, created if missing.
func ToolsDir() (string, error) {
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(root, ".tools")
	return dir, os.MkdirAll(dir, 0o755)
}

var installMu sync.Mutex

// Ensure runs install unless ok says the tool is there, holding a file lock
// so that test binaries of several packages running at once install once.
// It returns the tools directory.
func Ensure(t testing.TB, name string, ok func(tools string) bool, install func(tools string) error) string {
	t.Helper()
	tools, err := ToolsDir()
	if err != nil {
		t.Fatal(err)
	}
	installMu.Lock()
	defer installMu.Unlock()
	// ok alone is not trusted outside the lock: another package's test
	// binary may be halfway through the install (npm writes package.json
	// before it has extracted the native module, and node then dies of
	// SIGBUS loading it). The marker is written only once install returned.
	done := filepath.Join(tools, name+".done")
	if _, err := os.Stat(done); err == nil && ok(tools) {
		return tools
	}
	lock, err := os.OpenFile(filepath.Join(tools, name+".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	defer unix.Flock(int(lock.Fd()), unix.LOCK_UN)
	if !ok(tools) { // under the lock nobody else installs: ok means complete
		start := time.Now()
		t.Logf("installing %s into %s (first run only)", name, tools)
		if err := install(tools); err != nil {
			t.Fatalf("installing %s: %v", name, err)
		}
		// An installer can return success having put the tool elsewhere
		// (npm under a parent project): a marker written then would make
		// every later run reinstall and fail the same way.
		if !ok(tools) {
			t.Fatalf("installing %s into %s returned success but the tool is not there", name, tools)
		}
		t.Logf("installed %s in %s", name, time.Since(start).Round(time.Second))
	}
	if err := os.WriteFile(done, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return tools
}

// NPMInstall installs npm packages (exact versions) into dir as a project
// of its own. Without a package.json in dir npm walks up to the nearest
// parent holding one and installs there, into someone else's project;
// --prefix pins it to dir whatever the working directory.
func NPMInstall(dir string, pkgs ...string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	manifest := filepath.Join(dir, "package.json")
	if !exists(manifest) {
		if err := os.WriteFile(manifest, []byte(`{"name":"retain-test-tool","private":true}`+"\n"), 0o644); err != nil {
			return err
		}
	}
	args := append([]string{"install", "--prefix", dir, "--no-audit", "--no-fund", "--loglevel=error", "--save-exact"}, pkgs...)
	return Run(dir, nil, "npm", args...)
}

// Run runs a command in dir with extra environment, returning its output's
// tail in the error.
func Run(dir string, env []string, name string, args ...string) error {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v\n%s", name, strings.Join(args, " "), err, tail(out))
	}
	return nil
}

func tail(b []byte) string {
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// FreePort returns a loopback port that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// start runs a server process until the test ends and waits until it
// accepts connections on port.
func start(t testing.TB, name string, port int, cmd *exec.Cmd) {
	t.Helper()
	setProcAttr(cmd)
	logf, err := os.CreateTemp("", name+"-*.log")
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
		logf.Close()
		os.Remove(logf.Name())
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), 200*time.Millisecond)
		if err == nil {
			c.Close()
			return
		}
		select {
		case <-exited:
			b, _ := os.ReadFile(logf.Name())
			t.Fatalf("%s exited at start:\n%s", name, tail(b))
		default:
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(logf.Name())
			t.Fatalf("%s did not listen on port %d within 60s:\n%s", name, port, tail(b))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// S3 is an S3-compatible endpoint.
type S3 struct {
	Name      string // "versitygw v1.8.0"
	Endpoint  string // http://127.0.0.1:PORT
	Region    string
	AccessKey string
	SecretKey string
}

// Env returns the standard AWS variables that point the SDK at it.
func (s *S3) Env() map[string]string {
	return map[string]string{
		"AWS_ENDPOINT_URL":      s.Endpoint,
		"AWS_REGION":            s.Region,
		"AWS_ACCESS_KEY_ID":     s.AccessKey,
		"AWS_SECRET_ACCESS_KEY": s.SecretKey,
	}
}

// Versitygw starts versitygw with its posix backend in a temporary
// directory (which must support xattrs; ext4 does).
func Versitygw(t testing.TB) *S3 {
	t.Helper()
	return VersitygwIn(t, t.TempDir())
}

// VersitygwIn is Versitygw keeping its objects in dir (the latency
// harness puts them in memory, so that the emulator's disk is not what
// it measures).
func VersitygwIn(t testing.TB, dir string) *S3 {
	t.Helper()
	tools := Ensure(t, "versitygw-"+VersitygwVersion,
		func(tools string) bool { return exists(filepath.Join(tools, "bin", "versitygw-"+VersitygwVersion)) },
		func(tools string) error {
			bin := filepath.Join(tools, "bin")
			if err := Run(tools, []string{"GOBIN=" + bin}, "go", "install", "github.com/versity/versitygw/cmd/versitygw@"+VersitygwVersion); err != nil {
				return err
			}
			return os.Rename(filepath.Join(bin, "versitygw"), filepath.Join(bin, "versitygw-"+VersitygwVersion))
		})
	port := FreePort(t)
	s := &S3{Name: "versitygw " + VersitygwVersion, Endpoint: fmt.Sprintf("http://127.0.0.1:%d", port), Region: "us-east-1",
		AccessKey: "retain-test-access", SecretKey: "retain-test-secret-key"}
	cmd := exec.CommandContext(context.Background(), filepath.Join(tools, "bin", "versitygw-"+VersitygwVersion),
		"--access", s.AccessKey, "--secret", s.SecretKey, "--port", fmt.Sprintf("127.0.0.1:%d", port), "--quiet",
		"posix", dir)
	start(t, "versitygw", port, cmd)
	return s
}

// Azure is an Azure Blob endpoint.
type Azure struct {
	Name             string
	Endpoint         string // http://127.0.0.1:PORT/devstoreaccount1
	Account          string
	Key              string
	ConnectionString string
}

// AzuriteAccount and AzuriteKey are Azurite's documented well-known
// development credentials (public, not secrets).
const (
	AzuriteAccount = "devstoreaccount1"
	AzuriteKey     = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)

// Azurite starts Azurite's blob service in memory. It needs Node and npm.
func Azurite(t testing.TB) *Azure {
	t.Helper()
	dir := "azurite-" + AzuriteVersion
	entry := func(tools string) string {
		return filepath.Join(tools, dir, "node_modules", "azurite", "dist", "src", "blob", "main.js")
	}
	tools := Ensure(t, dir,
		func(tools string) bool { return exists(entry(tools)) },
		func(tools string) error { return NPMInstall(filepath.Join(tools, dir), "azurite@"+AzuriteVersion) })
	port := FreePort(t)
	cmd := exec.Command("node", entry(tools), "--blobHost", "127.0.0.1", "--blobPort", fmt.Sprint(port),
		"--inMemoryPersistence", "--disableTelemetry", "--skipApiVersionCheck", "--silent")
	start(t, "azurite", port, cmd)
	ep := fmt.Sprintf("http://127.0.0.1:%d/%s", port, AzuriteAccount)
	return &Azure{Name: "Azurite " + AzuriteVersion, Endpoint: ep, Account: AzuriteAccount, Key: AzuriteKey,
		ConnectionString: fmt.Sprintf("DefaultEndpointsProtocol=http;AccountName=%s;AccountKey=%s;BlobEndpoint=%s;", AzuriteAccount, AzuriteKey, ep)}
}
