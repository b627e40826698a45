//go:build linux

package pluginproto

import (
	"os/exec"
	"syscall"
)

// setProcAttr has the kernel SIGKILL the plugin when the host dies, even by
// SIGKILL. (The signal follows the death of the host thread that started
// the plugin; Go keeps its threads for the life of the process, and the
// plugin's own parent watch covers every other case.)
func setProcAttr(cmd *exec.Cmd, pdeathsig bool) {
	if pdeathsig {
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	}
}
