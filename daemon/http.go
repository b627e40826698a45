package daemon

import (
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Handler serves the daemon's HTTP endpoints: /metrics (Prometheus, with
// the go_* and process_* collectors), /healthz and /readyz. Take it after
// setting Metrics (a nil Metrics is created here) and before Run.
//
// /healthz answers 200 while the process serves requests: a liveness
// probe. /readyz answers 200 once a pass has finished and succeeded (its
// retention, when due, completed and its record was written), and 503
// with the reason before the first pass and after a failed one: a
// readiness probe, so a rollout whose daemons cannot do their work (bad
// credentials, an unreachable store, a claim held elsewhere for long)
// stops there.
func (d *Daemon) Handler() http.Handler {
	if d.Metrics == nil {
		d.Metrics = NewMetrics()
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(d.Metrics.Registry, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		last := d.last.Load()
		switch {
		case last == nil:
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, "not ready: no maintenance pass has finished yet")
		case last.Err() != nil:
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, "not ready: the last pass (finished %s) failed: %v\n", last.Finished.Format(time.RFC3339), last.Err())
		default:
			fmt.Fprintf(w, "ready: the last pass finished %s\n", last.Finished.Format(time.RFC3339))
		}
	})
	return mux
}
