//go:build !linux

package emulator

import (
	"os/exec"
	"syscall"
)

// setProcAttr puts the server in its own process group; outside Linux
// there is no parent-death signal, so a killed test may leave it running.
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}
