package main

import (
	"syscall"
	"testing"
	"time"
)

// SIGTERM again and again (`timeout` signals the child and then its group;
// an impatient operator) never kills the daemon mid-teardown: it stops as
// after one, with status 0. Before, a signal landing after its handler was
// gone killed it (status 143) before the plugin was closed.
func TestDaemonSurvivesRepeatedSIGTERM(t *testing.T) {
	db := fixtureDB(t, "v2-appends")
	d := startDaemon(t, nil, "daemon", db, "--metrics-addr", "")
	d.waitFor(t, "reconciled", 60*time.Second)
	for {
		d.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-d.done:
			if d.err != nil {
				t.Fatalf("the daemon under repeated SIGTERM: %v\n%s", d.err, d.output())
			}
			return
		case <-time.After(2 * time.Millisecond):
		}
	}
}
