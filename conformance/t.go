package conformance

import (
	"fmt"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"
)

// T is what a case needs of its runner. *testing.T satisfies it, so the same
// case code runs under `go test` and under the conformance CLI.
type T interface {
	Helper()
	Logf(format string, args ...any)
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Skip(args ...any)
	Skipf(format string, args ...any)
	Cleanup(func())
}

// caseT runs one case outside `go test`: Fatal and Skip end the case's
// goroutine as testing.T does.
type caseT struct {
	mu       sync.Mutex
	failed   bool
	skipped  bool
	reason   string
	logs     []string
	cleanups []func()
}

func (c *caseT) Helper() {}

func (c *caseT) Logf(format string, args ...any) {
	c.mu.Lock()
	c.logs = append(c.logs, fmt.Sprintf(format, args...))
	c.mu.Unlock()
}

func (c *caseT) Fatal(args ...any) { c.fail(fmt.Sprint(args...)) }

func (c *caseT) Fatalf(format string, args ...any) { c.fail(fmt.Sprintf(format, args...)) }

func (c *caseT) fail(msg string) {
	c.mu.Lock()
	c.failed = true
	if c.reason == "" {
		c.reason = msg
	}
	c.mu.Unlock()
	runtime.Goexit()
}

func (c *caseT) Skip(args ...any) { c.skip(fmt.Sprint(args...)) }

func (c *caseT) Skipf(format string, args ...any) { c.skip(fmt.Sprintf(format, args...)) }

func (c *caseT) skip(msg string) {
	c.mu.Lock()
	c.skipped = true
	c.reason = msg
	c.mu.Unlock()
	runtime.Goexit()
}

func (c *caseT) Cleanup(f func()) {
	c.mu.Lock()
	c.cleanups = append(c.cleanups, f)
	c.mu.Unlock()
}

// run calls f in its own goroutine so Fatal can end it, then runs cleanups
// in reverse. A panic is a failure, not a crash of the whole suite.
func (c *caseT) run(f func(T)) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() {
			if r := recover(); r != nil {
				c.mu.Lock()
				c.failed = true
				c.reason = fmt.Sprintf("panic: %v", r)
				c.mu.Unlock()
			}
		}()
		f(c)
	}()
	<-done
	for i := len(c.cleanups) - 1; i >= 0; i-- {
		func() {
			defer func() { recover() }()
			c.cleanups[i]()
		}()
	}
}

// Latency collects durations of one kind of operation in a case.
type Latency struct {
	mu sync.Mutex
	d  []time.Duration
}

// Add records one duration.
func (l *Latency) Add(d time.Duration) {
	l.mu.Lock()
	l.d = append(l.d, d)
	l.mu.Unlock()
}

// Percentiles returns p50 and p99 (zero when nothing was recorded).
func (l *Latency) Percentiles() (p50, p99 time.Duration, n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.d) == 0 {
		return 0, 0, 0
	}
	s := append([]time.Duration(nil), l.d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	at := func(q float64) time.Duration { return s[min(len(s)-1, int(q*float64(len(s))))] }
	return at(0.50), at(0.99), len(s)
}

func indent(s string) string { return strings.ReplaceAll(s, "\n", "\n    ") }
