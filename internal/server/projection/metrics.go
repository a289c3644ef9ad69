package projection

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

var (
	lastSyncDesc = prometheus.NewDesc("plumbline_server_inventory_sync_last_success_timestamp_seconds",
		"When this replica's last sync of the inventory tables (the inventory API's read model) that succeeded ended (Unix seconds); 0 when none has. The replica that leads the inventory loop syncs every 2 s; the others when a query needs it.", nil, nil)
	syncFailuresDesc = prometheus.NewDesc("plumbline_server_inventory_sync_failures_total",
		"Syncs of the inventory tables by this replica that failed.", nil, nil)
)

// failed counts a failed sync (not one its context ended).
func (p *Projection) failed(ctx context.Context) {
	if ctx.Err() != nil {
		return
	}
	p.stateMu.Lock()
	defer p.stateMu.Unlock()
	p.fails++
}

// Describe implements prometheus.Collector.
func (p *Projection) Describe(ch chan<- *prometheus.Desc) {
	ch <- lastSyncDesc
	ch <- syncFailuresDesc
}

// Collect implements prometheus.Collector.
func (p *Projection) Collect(ch chan<- prometheus.Metric) {
	p.stateMu.Lock()
	last, fails := p.lastOK, p.fails
	p.stateMu.Unlock()
	ch <- prometheus.MustNewConstMetric(lastSyncDesc, prometheus.GaugeValue, unixSeconds(last))
	ch <- prometheus.MustNewConstMetric(syncFailuresDesc, prometheus.CounterValue, fails)
}

func unixSeconds(t time.Time) float64 {
	if t.IsZero() {
		return 0
	}
	return float64(t.UnixNano()) / 1e9
}
