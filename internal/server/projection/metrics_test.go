package projection

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/plumbline/plumbline/internal/lab/pgtest"
)

// TestSyncMetrics: the projection's collector says when a sync last
// succeeded (0 before any) and counts the syncs that failed, without
// moving the last success.
func TestSyncMetrics(t *testing.T) {
	t.Parallel()
	for _, e := range pgtest.Engines() {
		t.Run(e.Name, func(t *testing.T) {
			t.Parallel()
			st := openStore(t, e)
			p := New(st, Options{})
			reg := prometheus.NewRegistry()
			reg.MustRegister(p)
			if last, fails := syncMetrics(t, reg); last != 0 || fails != 0 {
				t.Errorf("before any sync: last success %v, failures %v; want 0, 0", last, fails)
			}
			before := float64(time.Now().UnixNano()) / 1e9
			if err := p.Sync(context.Background(), true); err != nil {
				t.Fatal(err)
			}
			last, fails := syncMetrics(t, reg)
			if last < before || fails != 0 {
				t.Errorf("after a sync: last success %v (want at least %v), failures %v", last, before, fails)
			}
			st.Close()
			if err := p.Sync(context.Background(), false); err == nil {
				t.Fatal("a sync on a closed store succeeded")
			}
			if l, f := syncMetrics(t, reg); l != last || f != 1 {
				t.Errorf("after a failed sync: last success %v, failures %v; want %v, 1", l, f, last)
			}
		})
	}
}

func syncMetrics(t *testing.T, g prometheus.Gatherer) (last, fails float64) {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		switch mf.GetName() {
		case "plumbline_server_inventory_sync_last_success_timestamp_seconds":
			last = mf.GetMetric()[0].GetGauge().GetValue()
		case "plumbline_server_inventory_sync_failures_total":
			fails = mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	return last, fails
}
