package storagetest

import (
	"os"
	"os/exec"
)

// Child returns a command that runs this test binary again with only test
// name (a real OS process: for crashes, races and signals), the current
// environment plus env, and any further test flags (e.g. -test.timeout).
// The test tells itself it is the child by a variable in env.
func Child(name string, env []string, flags ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], append([]string{"-test.run=^" + name + "$", "-test.count=1"}, flags...)...)
	cmd.Env = append(os.Environ(), env...)
	return cmd
}
