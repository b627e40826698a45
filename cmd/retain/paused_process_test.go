package main

import (
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/retain-dev/retain/core/failpoint"
)

// pausedProc is the retain binary held at a failpoint (RETAIN_FAILPOINT_PAUSE):
// a real process, mid-protocol, for a test to signal, kill or let go on.
type pausedProc struct {
	cmd     *exec.Cmd
	out     *strings.Builder // stdout and stderr
	dir, fp string
}

// startPaused runs `retain args...` until it reaches failpoint fp.
func startPaused(t *testing.T, fp string, args ...string) *pausedProc {
	t.Helper()
	p := &pausedProc{cmd: exec.Command(bin, args...), out: &strings.Builder{}, dir: t.TempDir(), fp: fp}
	p.cmd.Env = append(os.Environ(), failpoint.PauseEnv+"="+fp, failpoint.PauseDir+"="+p.dir)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := os.Stat(failpoint.PauseFile(p.dir, fp, ".reached")); err == nil {
			return p
		}
		if time.Now().After(deadline) {
			p.cmd.Process.Kill()
			t.Fatalf("retain %s never reached failpoint %s: %s", strings.Join(args, " "), fp, p.out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// interruptAndResume sends SIGINT to the paused process, lets it take the
// signal, then lets it go on past the failpoint and waits for it.
func (p *pausedProc) interruptAndResume(t *testing.T) error {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // the signal is taken before it goes on
	if err := os.WriteFile(failpoint.PauseFile(p.dir, p.fp, ".continue"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return p.cmd.Wait()
}
