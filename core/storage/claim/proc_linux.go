package claim

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
)

func bootID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// processStart returns the start time of pid in clock ticks since boot
// (field 22 of /proc/PID/stat), which together with the boot id names one
// process instance even after its pid is reused.
func processStart(pid int) (string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", err
	}
	// The command name (field 2) may hold spaces and ')': skip past the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return "", fmt.Errorf("unparsable /proc/%d/stat", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state); field 22 is f[19].
	if len(f) < 20 {
		return "", fmt.Errorf("short /proc/%d/stat", pid)
	}
	if f[0] == "Z" {
		return "", errProcessGone
	}
	return f[19], nil
}

var errProcessGone = errors.New("process is not running")

// processAlive reports whether pid runs, and its start time if so.
func processAlive(pid int) (bool, string, error) {
	if pid <= 0 {
		return false, "", nil
	}
	err := syscall.Kill(pid, 0)
	if errors.Is(err, syscall.ESRCH) {
		return false, "", nil
	}
	st, serr := processStart(pid)
	if errors.Is(serr, errProcessGone) || errors.Is(serr, os.ErrNotExist) {
		return false, "", nil
	}
	if serr != nil {
		return true, "", serr
	}
	return true, st, nil
}
