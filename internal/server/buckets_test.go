package server

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"google.golang.org/protobuf/proto"

	"github.com/plumbline/plumbline/internal/histogram"
	"github.com/plumbline/plumbline/internal/server/config"
	"github.com/plumbline/plumbline/internal/server/evaluator"
	"github.com/plumbline/plumbline/internal/server/ingest"
	"github.com/plumbline/plumbline/internal/server/store"
	"github.com/plumbline/plumbline/internal/wire"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// TestMetricsClassicBuckets: metrics.classic_histogram_buckets reaches the
// exposition — the latency histograms of /metrics carry the coarse set's
// 6 classic bounds by default, the fine set's 18 or none when configured,
// and the native buckets in every case.
func TestMetricsClassicBuckets(t *testing.T) {
	t.Parallel()
	st := seededStore(t)
	for set, bounds := range map[string]int{"": 6, "coarse": 6, "fine": 18, "none": 0} {
		t.Run("set="+set, func(t *testing.T) {
			t.Parallel()
			cfg := config.Default()
			cfg.BaselineInterval = time.Minute
			if set != "" {
				cfg.Metrics.ClassicHistogramBuckets = set
			}
			evals, err := newEvaluators(st, evaluator.Options{})
			if err != nil {
				t.Fatal(err)
			}
			h, err := metricsHandler(st, evals, nil, cfg, nil, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
			req.Header.Set("Accept", "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited")
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			fams := decode(t, rec.Body, expfmt.ResponseFormat(rec.Header()))
			lat := fams["plumbline_probe_latency_seconds"]
			if lat == nil || len(lat.GetMetric()) == 0 {
				t.Fatalf("no plumbline_probe_latency_seconds in %d families", len(fams))
			}
			for _, m := range lat.GetMetric() {
				hg := m.GetHistogram()
				if len(hg.GetBucket()) != bounds || len(hg.GetPositiveSpan()) == 0 || hg.GetSampleCount() != 100 {
					t.Errorf("%v: %d classic buckets, %d native spans, count %d; want %d, some, 100",
						m.GetLabel(), len(hg.GetBucket()), len(hg.GetPositiveSpan()), hg.GetSampleCount(), bounds)
				}
			}
		})
	}
}

// seededStore is a store with one agent, one volume and one judged
// random-read run of 100 operations around 1 ms.
func seededStore(t *testing.T) *store.Store {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, "sqlite://"+filepath.Join(t.TempDir(), "plumbline.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	now := time.Now()
	if err := st.UpsertAgent(ctx, store.Agent{ID: "a1", Hostname: "db01", OS: "linux", Kernel: "6.1.0", AgentVersion: "test", LastSeen: now}); err != nil {
		t.Fatal(err)
	}
	// The volume as ingest stores it: judged, with its judged record.
	vol, err := ingest.JudgeVolume(&plumblinev1.Volume{MountPoint: "/data", Device: "/dev/sdb1", Filesystem: &plumblinev1.Filesystem{Type: "ext4"}}, nil, ingest.Rules{})
	if err != nil {
		t.Fatal(err)
	}
	var h histogram.Histogram
	for i := range 100 {
		h.Observe(time.Millisecond + time.Duration(i)*time.Microsecond)
	}
	hb, err := proto.Marshal(wire.HistogramToProto(&h))
	if err != nil {
		t.Fatal(err)
	}
	recs := []store.Record{
		{Sequence: 1, Kind: store.KindGeometry, ProducedAt: now, Volumes: []store.Volume{vol}},
		{Sequence: 2, Kind: store.KindProbe, ProducedAt: now, Probe: &store.ProbeResult{MountPoint: "/data", Device: "sdb", Kind: "random-read",
			BlockSizeBytes: 8192, QueueDepth: 1, StartedAt: now, Duration: time.Second, Ops: 100, Bytes: 100 * 8192, Histogram: hb, IOPSCap: 50}},
	}
	if _, err := st.AppendBatch(ctx, "a1", recs); err != nil {
		t.Fatal(err)
	}
	ev, err := evaluator.New(st, evaluator.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ev.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	return st
}
