// Package latency is the harness for measuring retain at object-store
// latency: a loopback proxy that adds a fixed delay to every request in
// front of an emulator and counts the requests and how many were in flight
// at once, and the stores benchmarks open through it. A benchmark reports
// wall time in units of the injected round trip ("rtt/op"), so its numbers
// read the same on any machine: 50 rtt at 20 ms is one second on S3.
package latency

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Proxy forwards to one target over loopback, sleeping Delay before each
// request.
type Proxy struct {
	URL   string
	Delay time.Duration

	requests atomic.Int64
	mu       sync.Mutex
	inFlight int
	peak     int
}

// NewProxy starts a proxy to target, closed when tb ends.
func NewProxy(tb testing.TB, target string, delay time.Duration) *Proxy {
	tb.Helper()
	u, err := url.Parse(target)
	if err != nil {
		tb.Fatal(err)
	}
	p := &Proxy{Delay: delay}
	rp := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.requests.Add(1)
		p.enter()
		defer p.leave()
		time.Sleep(delay)
		rp.ServeHTTP(w, r)
	}))
	tb.Cleanup(srv.Close)
	p.URL = srv.URL
	return p
}

func (p *Proxy) enter() {
	p.mu.Lock()
	p.inFlight++
	p.peak = max(p.peak, p.inFlight)
	p.mu.Unlock()
}

func (p *Proxy) leave() {
	p.mu.Lock()
	p.inFlight--
	p.mu.Unlock()
}

// Stats is what crossed the proxy since a Reset.
type Stats struct {
	Requests int64
	// Peak is the most requests in flight at once.
	Peak int
}

// Reset starts counting afresh.
func (p *Proxy) Reset() {
	p.requests.Store(0)
	p.mu.Lock()
	p.peak = p.inFlight
	p.mu.Unlock()
}

// Stats returns the counts since the last Reset.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return Stats{Requests: p.requests.Load(), Peak: p.peak}
}
