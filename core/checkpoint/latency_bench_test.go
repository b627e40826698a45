package checkpoint

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"testing"
	"time"

	"github.com/retain-dev/retain/adapters/s3"
	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/storagetest"
	"github.com/retain-dev/retain/internal/emulator"
)

// latencyProxy forwards to target over loopback, adding d before each
// request: what a round trip to a real object store costs.
func latencyProxy(b *testing.B, target string, d time.Duration) string {
	b.Helper()
	u, err := url.Parse(target)
	if err != nil {
		b.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(d)
		rp.ServeHTTP(w, r)
	}))
	b.Cleanup(srv.Close)
	return srv.URL
}

// BenchmarkPinViewsBehindLatency: checkpoint list and reconcile on an S3
// store (gofakes3) behind a loopback proxy adding 20 ms per request, with
// one checkpoint pinning two tables. Each view now reads every distinct
// pinned manifest, as cleanup does: the requests and time it costs there.
//
//	go test -run '^$' -bench PinViewsBehindLatency -benchtime 3x ./core/checkpoint/
func BenchmarkPinViewsBehindLatency(b *testing.B) {
	e := emulator.GoFakeS3(b)
	env := e.Env()
	env["AWS_ENDPOINT_URL"] = latencyProxy(b, e.Endpoint, 20*time.Millisecond)
	emulator.IsolateAWS(b, env)
	loc := storage.Location{Scheme: "s3", Bucket: "latency", Prefix: "store"}
	d, err := s3.Open(bg, loc)
	if err != nil {
		b.Fatal(err)
	}
	cnt := storagetest.NewCounting(d)
	s, err := storage.NewStore(bg, "s3", cnt)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	s = s.At(loc)
	for _, n := range []string{"v2-appends", "branch-tag"} {
		uploadFixture(b, s, n, n+".lance")
	}
	if _, err := Create(bg, s, "nightly", "main"); err != nil {
		b.Fatal(err)
	}
	for _, op := range []struct {
		name string
		run  func() error
	}{
		{"list", func() error { _, _, err := List(bg, s); return err }},
		{"reconcile", func() error { _, err := Reconcile(bg, s); return err }},
	} {
		b.Run(op.name, func(b *testing.B) {
			before := cnt.Counts()
			for b.Loop() {
				if err := op.run(); err != nil {
					b.Fatal(err)
				}
			}
			after := cnt.Counts()
			reqs := after.Get + after.Stat + after.Put + after.Delete + after.DeleteMany + after.List -
				(before.Get + before.Stat + before.Put + before.Delete + before.DeleteMany + before.List)
			b.ReportMetric(float64(reqs)/float64(b.N), "requests/op")
			b.ReportMetric(float64(after.Get-before.Get)/float64(b.N), "gets/op")
		})
	}
}
