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
	log      []Request
	logging  bool
	epoch    time.Time
}

// Request is one request the proxy forwarded, when logging is on: its
// method, path and query, and when it started and ended since the Reset.
type Request struct {
	Method, Path string
	Start, End   time.Duration
	Status       int
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
	// Connections to the emulator are kept, however many are in flight
	// (the default keeps 2 idle and opens a new one for every request
	// beyond them): the harness's own hop costs no connection churn.
	rp.Transport = &http.Transport{Proxy: nil, MaxIdleConns: 1024, MaxIdleConnsPerHost: 1024, IdleConnTimeout: time.Minute}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.requests.Add(1)
		start := p.enter()
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		defer func() { p.leave(r, start, sw.status) }()
		time.Sleep(delay)
		rp.ServeHTTP(sw, r)
	}))
	tb.Cleanup(srv.Close)
	p.URL = srv.URL
	return p
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

func (p *Proxy) enter() time.Time {
	p.mu.Lock()
	p.inFlight++
	p.peak = max(p.peak, p.inFlight)
	p.mu.Unlock()
	return time.Now()
}

func (p *Proxy) leave(r *http.Request, start time.Time, status int) {
	end := time.Now()
	p.mu.Lock()
	p.inFlight--
	if p.logging {
		p.log = append(p.log, Request{Method: r.Method, Path: r.URL.RequestURI(),
			Start: start.Sub(p.epoch), End: end.Sub(p.epoch), Status: status})
	}
	p.mu.Unlock()
}

// Log turns the request log on or off; Requests returns it.
func (p *Proxy) Log(on bool) {
	p.mu.Lock()
	p.logging = on
	p.mu.Unlock()
}

// Requests is the log of the requests that ended since the Reset (empty
// unless Log(true)).
func (p *Proxy) Requests() []Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Request(nil), p.log...)
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
	p.log = nil
	p.epoch = time.Now()
	p.mu.Unlock()
}

// Stats returns the counts since the last Reset.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return Stats{Requests: p.requests.Load(), Peak: p.peak}
}
