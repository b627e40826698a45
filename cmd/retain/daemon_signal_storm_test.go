package main

import (
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// syncBuffer is a strings.Builder safe to read while a process writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// SIGTERM again and again (`timeout` signals the child and then its group;
// an impatient operator) never kills the daemon mid-teardown: it stops as
// after one, with status 0. Before, a signal landing after its handler was
// gone killed it (status 143) before the plugin was closed.
func TestDaemonSurvivesRepeatedSIGTERM(t *testing.T) {
	db := fixtureDB(t, "v2-appends")
	cmd := exec.Command(bin, "daemon", db, "--metrics-addr", "")
	var logs syncBuffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(logs.String(), "reconciled") {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("the daemon never finished its first pass: %s", logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	for {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("the daemon under repeated SIGTERM: %v\n%s", err, logs.String())
			}
			return
		case <-time.After(2 * time.Millisecond):
		}
	}
}
