package agent

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/plumbline/plumbline/internal/agent/spool"
)

// metrics are the agent's own counters, exposed on web.listen_address.
type metrics struct {
	reg           *prometheus.Registry
	sent          prometheus.Counter
	acked         prometheus.Counter
	rejected      prometheus.Counter
	sendErrors    prometheus.Counter
	refused       prometheus.Counter
	lastReport    prometheus.Gauge
	connected     prometheus.Gauge
	revoked       prometheus.Gauge
	probeRuns     *prometheus.CounterVec // kind, result
	probeSkips    *prometheus.CounterVec // kind, reason
	snapshots     *prometheus.CounterVec // trigger
	geometryError prometheus.Counter
	spoolErrors   prometheus.Counter
	filtered      *prometheus.GaugeVec // reason
	unmatched     *prometheus.GaugeVec // schedule, mount_point
	policyUpdates prometheus.Counter
	policyErrors  prometheus.Counter
}

func newMetrics(sp *spool.Spool) *metrics {
	const ns = "plumbline_agent_"
	m := &metrics{
		reg:           prometheus.NewRegistry(),
		sent:          prometheus.NewCounter(prometheus.CounterOpts{Name: ns + "records_sent_total", Help: "Records sent in Report calls (resends included)."}),
		acked:         prometheus.NewCounter(prometheus.CounterOpts{Name: ns + "records_acked_total", Help: "Records the server acknowledged (stored or duplicate)."}),
		rejected:      prometheus.NewCounter(prometheus.CounterOpts{Name: ns + "records_rejected_total", Help: "Records the server rejected (settled, dropped from the spool)."}),
		sendErrors:    prometheus.NewCounter(prometheus.CounterOpts{Name: ns + "send_errors_total", Help: "Failed Hello and Report calls."}),
		refused:       prometheus.NewCounter(prometheus.CounterOpts{Name: ns + "reports_refused_total", Help: "Report calls the server refused before reading them, with a retry hint (at capacity, or this agent over its rate); the records stay in the spool and are sent again."}),
		lastReport:    prometheus.NewGauge(prometheus.GaugeOpts{Name: ns + "last_report_success_timestamp_seconds", Help: "When the last Report call succeeded (Unix time)."}),
		connected:     prometheus.NewGauge(prometheus.GaugeOpts{Name: ns + "connected", Help: "1 while a session with the server (after Hello) is up."}),
		probeRuns:     prometheus.NewCounterVec(prometheus.CounterOpts{Name: ns + "probe_runs_total", Help: "Probe runs by kind and result: completed, stopped, skipped, error."}, []string{"kind", "result"}),
		probeSkips:    prometheus.NewCounterVec(prometheus.CounterOpts{Name: ns + "probe_skips_total", Help: "Probe runs skipped or stopped early, by reason (the probe's stopped_reason, or lock-timeout)."}, []string{"kind", "reason"}),
		snapshots:     prometheus.NewCounterVec(prometheus.CounterOpts{Name: ns + "geometry_snapshots_total", Help: "Geometry snapshots spooled, by trigger: start, changed, interval, resync (the server held another snapshot)."}, []string{"trigger"}),
		geometryError: prometheus.NewCounter(prometheus.CounterOpts{Name: ns + "geometry_errors_total", Help: "Failed geometry discoveries."}),
		spoolErrors:   prometheus.NewCounter(prometheus.CounterOpts{Name: ns + "spool_errors_total", Help: "Failed spool appends, reads and acks."}),
		filtered: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: ns + "volumes_filtered", Help: "Mounted file systems the last geometry discovery left out (not volumes, never probed), by reason: excluded, in-memory, no-block-device, unknown-device, duplicate."},
			[]string{"reason"}),
		unmatched: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: ns + "schedule_unmatched", Help: "1 when the probe schedule (its index in probes and its mount_point glob) matches no volume of the last geometry discovery: nothing is probed for it."},
			[]string{"schedule", "mount_point"}),
	}
	m.revoked = prometheus.NewGauge(prometheus.GaugeOpts{Name: ns + "revoked", Help: "1 while the server refuses this agent because its enrollment was revoked: enroll the host again (agent enroll) and restart the agent."})
	m.policyUpdates = prometheus.NewCounter(prometheus.CounterOpts{Name: ns + "policy_updates_total", Help: "Central policies applied (at start from the cache, in Hello answers and WatchPolicy answers)."})
	m.policyErrors = prometheus.NewCounter(prometheus.CounterOpts{Name: ns + "policy_errors_total", Help: "Central policies refused (they did not parse or validate); the agent kept the configuration it had."})
	stat := func(f func(spool.Stats) float64) func() float64 { return func() float64 { return f(sp.Stats()) } }
	m.reg.MustRegister(m.policyUpdates, m.policyErrors, m.sent, m.acked, m.rejected, m.sendErrors, m.refused, m.lastReport, m.connected, m.revoked, m.probeRuns, m.probeSkips, m.snapshots, m.geometryError, m.spoolErrors, m.filtered, m.unmatched,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: ns + "spool_bytes", Help: "Bytes in spool segment files."}, stat(func(s spool.Stats) float64 { return float64(s.Bytes) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: ns + "spool_records", Help: "Unacknowledged records in the spool."}, stat(func(s spool.Stats) float64 { return float64(s.Records) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: ns + "spool_dropped_records_total", Help: "Unacknowledged records dropped by the spool size cap."}, stat(func(s spool.Stats) float64 { return float64(s.Dropped) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: ns + "spool_corrupt_records_total", Help: "Corrupt spool regions (bad checksum, torn tail) skipped."}, stat(func(s spool.Stats) float64 { return float64(s.Corrupt) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: ns + "spool_next_sequence", Help: "The sequence number the next record gets."}, stat(func(s spool.Stats) float64 { return float64(s.NextSequence) })),
	)
	return m
}

// countRun counts a probe run by result (completed, stopped, skipped,
// error) and, for one that did not complete, by reason.
func (m *metrics) countRun(kind, result, reason string) {
	m.probeRuns.WithLabelValues(kind, result).Inc()
	if reason != "" {
		m.probeSkips.WithLabelValues(kind, reason).Inc()
	}
}

// registerMaintenance exposes whether a maintenance window is open, read
// at scrape time from the effective configuration.
func (a *Agent) registerMaintenance() {
	a.metrics.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "plumbline_agent_maintenance_active",
		Help: "1 while a maintenance window of the effective configuration is open: no probe starts, running ones stop (stop reason maintenance)."},
		func() float64 {
			if name, _ := a.eff.Load().windows.Active(a.o.Now()); name != "" {
				return 1
			}
			return 0
		}))
}

// Handler serves /healthz and /metrics.
func (a *Agent) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Write([]byte("ok\n"))
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(a.metrics.reg, promhttp.HandlerOpts{}))
	return mux
}
