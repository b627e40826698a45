package faultadapter

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// Pkg is the import path of the plugin binary's main package.
const Pkg = "github.com/retain-dev/retain/internal/faultadapter/cmd/faultadapter"

var (
	buildOnce sync.Once
	buildDir  string
	buildBin  string
	buildErr  string
)

const dirPrefix = "retain-faultadapter-"

// Build builds the faultadapter plugin binary once per test binary and
// returns its path, for tests in any package (`--adapter` of the retain
// CLI, pluginproto.Launch). It needs the go command on PATH. The binary
// lives in a temporary directory named for this process; Cleanup removes
// it, and a later Build removes those of processes that have exited.
func Build(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		reapStale()
		dir, err := os.MkdirTemp("", dirPrefix+strconv.Itoa(os.Getpid())+"-")
		if err != nil {
			buildErr = err.Error()
			return
		}
		buildDir = dir
		bin := filepath.Join(dir, "faultadapter")
		if out, err := exec.Command("go", "build", "-o", bin, Pkg).CombinedOutput(); err != nil {
			buildErr = "go build " + Pkg + ": " + err.Error() + "\n" + string(out)
			return
		}
		buildBin = bin
	})
	if buildErr != "" {
		t.Fatal(buildErr)
	}
	return buildBin
}

// Cleanup removes the binary Build made; for TestMain, after m.Run.
func Cleanup() {
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
}

// reapStale removes build directories left by test processes that have
// exited without Cleanup.
func reapStale() {
	matches, _ := filepath.Glob(filepath.Join(os.TempDir(), dirPrefix+"*"))
	for _, m := range matches {
		rest := strings.TrimPrefix(filepath.Base(m), dirPrefix)
		pid, err := strconv.Atoi(rest[:max(strings.IndexByte(rest, '-'), 0)])
		if err != nil || pid <= 0 || pid == os.Getpid() {
			continue
		}
		if err := syscall.Kill(pid, 0); err == syscall.ESRCH {
			os.RemoveAll(m)
		}
	}
}
