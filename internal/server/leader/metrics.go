package leader

import "github.com/prometheus/client_golang/prometheus"

var (
	leaderDesc = prometheus.NewDesc("plumbline_server_leader",
		"Whether this server replica runs the background loop (1) or another replica does (0).", []string{"loop"}, nil)
	epochDesc = prometheus.NewDesc("plumbline_server_leader_epoch",
		"The lease epoch (fencing token) under which this replica runs the loop; 0 when it does not, or leads alone (SQLite).", []string{"loop"}, nil)
)

// Describe implements prometheus.Collector.
func (e *Elector) Describe(ch chan<- *prometheus.Desc) {
	ch <- leaderDesc
	ch <- epochDesc
}

// Collect implements prometheus.Collector: one series per loop Run was
// given.
func (e *Elector) Collect(ch chan<- prometheus.Metric) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, loop := range e.loops {
		epoch, ok := e.state[loop]
		v := 0.0
		if ok {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(leaderDesc, prometheus.GaugeValue, v, loop)
		ch <- prometheus.MustNewConstMetric(epochDesc, prometheus.GaugeValue, float64(epoch), loop)
	}
}
