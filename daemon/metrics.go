package daemon

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Metrics are the daemon's Prometheus metrics, on their own registry (so
// two daemons in one test process do not collide).
type Metrics struct {
	Registry *prometheus.Registry

	LiveCheckpoints   prometheus.Gauge
	PinnedVersions    prometheus.Gauge
	Pins              *prometheus.GaugeVec // by state: missing, conflicting, repaired, orphan
	OldestCheckpoint  prometheus.Gauge
	BoundaryRemoved   *prometheus.GaugeVec // newest removed version, by table and branch
	BoundaryTime      *prometheus.GaugeVec // by table
	VersionsRemoved   prometheus.Counter
	BytesRemoved      prometheus.Counter
	FilesRemoved      prometheus.Counter
	PassDuration      prometheus.Histogram
	PassFailures      *prometheus.CounterVec // by part: reconcile, retention
	Passes            prometheus.Counter
	ClaimWaits        prometheus.Counter
	LastRetention     prometheus.Gauge
	RetentionFailures prometheus.Gauge
	LastPassSuccess   prometheus.Gauge // 1 when the last pass's Err was nil
	LastPassTime      prometheus.Gauge
}

// NewMetrics registers the metrics on a fresh registry.
func NewMetrics() *Metrics {
	r := prometheus.NewRegistry()
	f := func(c prometheus.Collector) { r.MustRegister(c) }
	m := &Metrics{Registry: r,
		LiveCheckpoints: prometheus.NewGauge(prometheus.GaugeOpts{Name: "retain_checkpoints_live", Help: "Live checkpoints in the registry."}),
		PinnedVersions:  prometheus.NewGauge(prometheus.GaugeOpts{Name: "retain_pinned_versions", Help: "Table versions pinned by live checkpoints."}),
		Pins: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "retain_pins", Help: "Pins found by the last pass: missing or conflicting (live checkpoints' pins not in order), repaired and orphan (reclaimed) by its reconcile."},
			[]string{"state"}),
		OldestCheckpoint: prometheus.NewGauge(prometheus.GaugeOpts{Name: "retain_oldest_checkpoint_age_seconds", Help: "Age of the oldest live checkpoint (0 with none)."}),
		BoundaryRemoved: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "retain_gc_boundary_version", Help: "Per table and branch, the newest version a cleanup removed (the gc boundary)."},
			[]string{"table", "branch"}),
		BoundaryTime: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "retain_gc_boundary_timestamp_seconds", Help: "Per table, when its gc boundary was published."},
			[]string{"table"}),
		VersionsRemoved: prometheus.NewCounter(prometheus.CounterOpts{Name: "retain_versions_removed_total", Help: "Table versions removed by retention."}),
		BytesRemoved:    prometheus.NewCounter(prometheus.CounterOpts{Name: "retain_bytes_removed_total", Help: "Bytes removed by retention."}),
		FilesRemoved:    prometheus.NewCounter(prometheus.CounterOpts{Name: "retain_files_removed_total", Help: "Objects removed by retention."}),
		PassDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "retain_pass_duration_seconds", Help: "Duration of maintenance passes.",
			Buckets: prometheus.ExponentialBuckets(0.01, 4, 10)}),
		PassFailures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "retain_pass_failures_total", Help: "Failed parts of maintenance passes."},
			[]string{"part"}),
		Passes:            prometheus.NewCounter(prometheus.CounterOpts{Name: "retain_passes_total", Help: "Maintenance passes run."}),
		ClaimWaits:        prometheus.NewCounter(prometheus.CounterOpts{Name: "retain_claim_waits_total", Help: "Passes (or parts) skipped because another process held the retention claim."}),
		LastRetention:     prometheus.NewGauge(prometheus.GaugeOpts{Name: "retain_retention_last_success_timestamp_seconds", Help: "When the last retention pass completed (0: never)."}),
		RetentionFailures: prometheus.NewGauge(prometheus.GaugeOpts{Name: "retain_retention_failures", Help: "Failed retention passes since the last completed one."}),
		LastPassSuccess:   prometheus.NewGauge(prometheus.GaugeOpts{Name: "retain_last_pass_success", Help: "1 if the last maintenance pass succeeded (its retention, when due, completed and its record was written), 0 if it failed or none has finished yet."}),
		LastPassTime:      prometheus.NewGauge(prometheus.GaugeOpts{Name: "retain_last_pass_timestamp_seconds", Help: "When the last maintenance pass finished (0: none yet)."}),
	}
	// The standard process and Go runtime metrics (go_*, process_*), as
	// the default registry would have them.
	f(collectors.NewGoCollector())
	f(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for _, c := range []prometheus.Collector{m.LiveCheckpoints, m.PinnedVersions, m.Pins, m.OldestCheckpoint, m.BoundaryRemoved, m.BoundaryTime,
		m.VersionsRemoved, m.BytesRemoved, m.FilesRemoved, m.PassDuration, m.PassFailures, m.Passes, m.ClaimWaits, m.LastRetention, m.RetentionFailures,
		m.LastPassSuccess, m.LastPassTime} {
		f(c)
	}
	for _, st := range []string{"missing", "conflicting", "repaired", "orphan"} {
		m.Pins.WithLabelValues(st)
	}
	for _, p := range []string{"reconcile", "retention"} {
		m.PassFailures.WithLabelValues(p)
	}
	return m
}
