//go:build linux

package emulator

import (
	"os/exec"
	"syscall"
)

// setProcAttr puts the server in its own process group (so the cleanup can
// kill it and its children) and has the kernel kill it if the test dies.
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
}
