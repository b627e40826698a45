//go:build !linux

package pluginproto

import "os/exec"

// setProcAttr does nothing here: there is no parent-death signal, and the
// plugin's own parent watch (see Serve) ends it when the host dies.
func setProcAttr(cmd *exec.Cmd, pdeathsig bool) {}
