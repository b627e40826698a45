package s3

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"testing"
)

// throttleProxy is a loopback reverse proxy in front of an emulator that
// answers some requests itself the way S3 throttles, in S3's wire format,
// and forwards the rest. It keeps the client's Host header, so SigV4
// signatures stay valid.
type throttleProxy struct {
	URL string
	// next: how many of the coming requests to throttle; always: throttle
	// every request.
	next   atomic.Int64
	always atomic.Bool
	// status and code of the throttle answer (503 SlowDown by default).
	status atomic.Int32
	code   atomic.Value
	// seen counts every request, throttled the ones answered here.
	seen, throttled atomic.Int64
}

func newThrottleProxy(t testing.TB, endpoint string) *throttleProxy {
	t.Helper()
	target, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	p := &throttleProxy{}
	p.status.Store(http.StatusServiceUnavailable)
	p.code.Store("SlowDown")
	rp := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.seen.Add(1)
		if p.always.Load() || p.next.Add(-1) >= 0 {
			p.throttled.Add(1)
			io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/xml")
			w.Header().Set("x-amz-request-id", "THROTTLEPROXY")
			w.WriteHeader(int(p.status.Load()))
			if r.Method != http.MethodHead {
				io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?>`+"\n"+
					`<Error><Code>`+p.code.Load().(string)+`</Code><Message>Please reduce your request rate.</Message>`+
					`<RequestId>THROTTLEPROXY</RequestId><HostId>throttle-proxy</HostId></Error>`)
			}
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	p.URL = srv.URL
	return p
}

// throttleNext throttles the next n requests and resets the counters.
func (p *throttleProxy) throttleNext(n int) {
	p.seen.Store(0)
	p.throttled.Store(0)
	p.next.Store(int64(n))
}

// answer sets the throttle answer: status and S3 error code.
func (p *throttleProxy) answer(status int, code string) {
	p.status.Store(int32(status))
	p.code.Store(code)
}
