package conformance

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// caseHygiene runs last: it removes everything the run wrote, proves the
// run prefix is empty, and that every worker process it started has exited.
func caseHygiene(t T, e *Env) {
	left, err := e.s.removeAll(e.Ctx)
	if err != nil {
		t.Fatalf("removing what the run wrote: %v", err)
	}
	if len(left) > 0 {
		t.Fatalf("%d objects remain under %s after deleting them all: %v", len(left), e.s.runPrefix, left)
	}
	if e.s.pool != nil {
		pids := e.s.pool.pids()
		e.s.pool.close()
		e.s.pool = nil
		deadline := time.Now().Add(5 * time.Second)
		for _, pid := range pids {
			for alive(pid) {
				if time.Now().After(deadline) {
					t.Fatalf("worker process %d still runs after the pool closed", pid)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
	}
}

func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	if errors.Is(err, syscall.ESRCH) {
		return false
	}
	b, rerr := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if rerr != nil {
		return false
	}
	// A zombie has exited; only its parent's wait is missing.
	for i := len(b) - 1; i > 0; i-- {
		if b[i] == ')' {
			return !(i+2 < len(b) && b[i+2] == 'Z')
		}
	}
	return true
}
