//go:build linux

package conformance

import (
	"os/exec"
	"syscall"
)

// dieWithParent has the kernel kill a worker when the runner dies, so a
// killed run leaves no workers holding the store.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
