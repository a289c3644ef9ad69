package members

import "github.com/prometheus/client_golang/prometheus"

var (
	lastSuccessDesc = prometheus.NewDesc("plumbline_server_members_last_success_timestamp_seconds",
		"When this replica's member judge last finished a pass without error (Unix seconds); 0 when none has (it runs on the elected replica only).", nil, nil)
	intervalsDesc = prometheus.NewDesc("plumbline_server_members_intervals_total",
		"Agent intervals of member I/O this replica's member judge judged.", nil, nil)
	namedDesc = prometheus.NewDesc("plumbline_server_members_changes_total",
		"Members this replica's member judge named slow (change named) or cleared (change cleared).", []string{"change"}, nil)
	failuresDesc = prometheus.NewDesc("plumbline_server_members_failures_total",
		"Member judge passes of this replica that failed (the next pass judges the same intervals again).", nil, nil)
)

// Describe implements prometheus.Collector.
func (j *Judge) Describe(ch chan<- *prometheus.Desc) {
	ch <- lastSuccessDesc
	ch <- intervalsDesc
	ch <- namedDesc
	ch <- failuresDesc
}

// Collect implements prometheus.Collector.
func (j *Judge) Collect(ch chan<- prometheus.Metric) {
	s := j.Status()
	last := 0.0
	if !s.LastSuccess.IsZero() {
		last = float64(s.LastSuccess.UnixNano()) / 1e9
	}
	ch <- prometheus.MustNewConstMetric(lastSuccessDesc, prometheus.GaugeValue, last)
	ch <- prometheus.MustNewConstMetric(intervalsDesc, prometheus.CounterValue, float64(s.Intervals))
	ch <- prometheus.MustNewConstMetric(namedDesc, prometheus.CounterValue, float64(s.Named), "named")
	ch <- prometheus.MustNewConstMetric(namedDesc, prometheus.CounterValue, float64(s.Cleared), "cleared")
	ch <- prometheus.MustNewConstMetric(failuresDesc, prometheus.CounterValue, float64(s.Failures))
}
