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
// retention, when due, completed and its record was written; a failed
// reconcile alone does not fail a pass) or found the claim held by
// another process (waiting for it is normal between replicas), and 503
// with the reason before the first pass and after a failed one: a
// readiness probe, so a rollout whose daemons cannot do their work (bad
// credentials, an unreachable store) stops there. The first pass runs
// retention, which may take long: give the pod a startup probe on
// /readyz with room for it. A pass that hangs keeps the last answer;
// alert on retain_last_pass_timestamp_seconds for that.
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
		case last.Err() != nil && last.ClaimHolder != "" && last.StateError == "":
			fmt.Fprintf(w, "ready: the last pass (finished %s) waited for the retention claim, held by %s\n", last.Finished.Format(time.RFC3339), last.ClaimHolder)
		case last.Err() != nil:
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, "not ready: the last pass (finished %s) failed: %v\n", last.Finished.Format(time.RFC3339), last.Err())
		default:
			fmt.Fprintf(w, "ready: the last pass finished %s\n", last.Finished.Format(time.RFC3339))
		}
	})
	return mux
}
