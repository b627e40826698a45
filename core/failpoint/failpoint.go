// Package failpoint is the crash switch of retain's protocols: Hit(name) at
// each protocol step makes the process exit right there when the
// environment variable RETAIN_FAILPOINT names that step, and does nothing
// otherwise. The crash-matrix tests run a real process (the retain binary,
// or a re-executed test binary) with the variable set, then reconcile and
// check the invariants.
//
//	RETAIN_FAILPOINT=create/after-tags retain checkpoint create nightly ./db
//
// exits with status ExitCode after the create protocol wrote its tags and
// before it publishes anything. Several names may be given, separated by
// commas. Unset, empty or naming another step, Hit is inert.
package failpoint

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Env is the environment variable naming the failpoints to trigger.
const Env = "RETAIN_FAILPOINT"

// ExitCode is the status a triggered failpoint exits with.
const ExitCode = 3

// exit is os.Exit, replaced by the package's own tests.
var exit = os.Exit

// Enabled reports whether name is one of the failpoints RETAIN_FAILPOINT
// names.
func Enabled(name string) bool {
	v := os.Getenv(Env)
	if v == "" {
		return false
	}
	for _, n := range strings.Split(v, ",") {
		if strings.TrimSpace(n) == name {
			return true
		}
	}
	return false
}

// PauseEnv names failpoints that pause instead of exiting, and PauseDir
// the folder of the handshake: at such a failpoint the process creates
// <PauseDir>/<name with / as _>.reached and waits until
// <...>.continue exists. Tests use it to hold a process mid-protocol (with
// the claim held) while another process runs.
const (
	PauseEnv = "RETAIN_FAILPOINT_PAUSE"
	PauseDir = "RETAIN_FAILPOINT_DIR"
)

// PauseFile is the handshake file of failpoint name with suffix
// ".reached" or ".continue".
func PauseFile(dir, name, suffix string) string {
	return filepath.Join(dir, strings.ReplaceAll(name, "/", "_")+suffix)
}

func pause(name string) bool {
	dir := os.Getenv(PauseDir)
	if dir == "" {
		return false
	}
	for _, n := range strings.Split(os.Getenv(PauseEnv), ",") {
		if strings.TrimSpace(n) != name {
			continue
		}
		if err := os.WriteFile(PauseFile(dir, name, ".reached"), nil, 0o644); err != nil {
			return false
		}
		for {
			if _, err := os.Stat(PauseFile(dir, name, ".continue")); err == nil {
				return true
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	return false
}

// Hit exits the process with ExitCode, after one line on stderr, if name is
// enabled; a failpoint named in PauseEnv pauses instead; otherwise Hit
// returns at once.
func Hit(name string) {
	if pause(name) {
		return
	}
	if !Enabled(name) {
		return
	}
	fmt.Fprintf(os.Stderr, "retain: failpoint %s: exiting with status %d\n", name, ExitCode)
	exit(ExitCode)
}
