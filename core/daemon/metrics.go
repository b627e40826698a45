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
	LastCompletedPass prometheus.Gauge       // when a pass of this process last succeeded
	ClaimHeld         prometheus.Gauge       // how long another held the claim, when the last pass found it held
	Scheduled         *prometheus.CounterVec // scheduled checkpoint slots, by result: created, taken, failed
	Rotated           prometheus.Counter     // checkpoints removed by schedules' rotation
	LeasesReaped      prometheus.Counter     // expired reader leases removed
	TagsExpired       prometheus.Counter     // expired tags removed
	BranchesExpired   prometheus.Counter     // expired branches deleted
}

// NewMetrics registers the metrics on a fresh registry, with the go_* and
// process_* collectors.
func NewMetrics() *Metrics {
	r := NewRegistry()
	m := NewStoreMetrics(r)
	m.Registry = r
	return m
}

// NewRegistry is a registry with the standard process and Go runtime
// metrics (go_*, process_*), as the default registry would have them.
func NewRegistry() *prometheus.Registry {
	r := prometheus.NewRegistry()
	r.MustRegister(collectors.NewGoCollector())
	r.MustRegister(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return r
}

// NewStoreMetrics registers one store's metrics on reg; a fleet wraps reg
// with the store's label (prometheus.WrapRegistererWith), so every series
// names its store. Registry is left nil: serve the registry reg belongs to.
func NewStoreMetrics(reg prometheus.Registerer) *Metrics {
	f := func(c prometheus.Collector) { reg.MustRegister(c) }
	m := &Metrics{
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
		LastCompletedPass: prometheus.NewGauge(prometheus.GaugeOpts{Name: "retain_last_completed_pass_timestamp_seconds", Help: "When a maintenance pass of this process last succeeded on the store (0: never); across replicas, max by (store) is the store's last completed pass."}),
		ClaimHeld:         prometheus.NewGauge(prometheus.GaugeOpts{Name: "retain_claim_held_seconds", Help: "How long the retention claim had been held by another process when the last pass found it held (0: it was free)."}),
		Scheduled: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "retain_scheduled_checkpoints_total", Help: "Scheduled checkpoint slots seen by passes, by result: created (this process took it), taken (its name was already used), failed (retried by the next pass in the slot)."},
			[]string{"result"}),
		Rotated:         prometheus.NewCounter(prometheus.CounterOpts{Name: "retain_checkpoints_rotated_total", Help: "Checkpoints removed by the schedules' rotation (keep:)."}),
		LeasesReaped:    prometheus.NewCounter(prometheus.CounterOpts{Name: "retain_leases_reaped_total", Help: "Expired reader leases removed before retention runs."}),
		TagsExpired:     prometheus.NewCounter(prometheus.CounterOpts{Name: "retain_tags_expired_total", Help: "Expired tags (tag create --expires) removed before retention runs."}),
		BranchesExpired: prometheus.NewCounter(prometheus.CounterOpts{Name: "retain_branches_expired_total", Help: "Expired branches (branch create --expires) deleted before retention runs."}),
	}
	for _, c := range []prometheus.Collector{m.LiveCheckpoints, m.PinnedVersions, m.Pins, m.OldestCheckpoint, m.BoundaryRemoved, m.BoundaryTime,
		m.VersionsRemoved, m.BytesRemoved, m.FilesRemoved, m.PassDuration, m.PassFailures, m.Passes, m.ClaimWaits, m.LastRetention, m.RetentionFailures,
		m.LastPassSuccess, m.LastPassTime, m.LastCompletedPass, m.ClaimHeld, m.Scheduled, m.Rotated, m.LeasesReaped, m.TagsExpired, m.BranchesExpired} {
		f(c)
	}
	for _, st := range []string{"missing", "conflicting", "repaired", "orphan"} {
		m.Pins.WithLabelValues(st)
	}
	for _, r := range []string{"created", "taken", "failed"} {
		m.Scheduled.WithLabelValues(r)
	}
	for _, p := range []string{"reconcile", "retention", "checkpoints"} {
		m.PassFailures.WithLabelValues(p)
	}
	return m
}
