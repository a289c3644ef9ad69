package server

import (
	"compress/gzip"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/plumbline/plumbline/internal/server/config"
	"github.com/plumbline/plumbline/internal/server/evaluator"
	"github.com/plumbline/plumbline/internal/server/leader"
	"github.com/plumbline/plumbline/internal/server/store"
)

// TestMetricsLeaderGauge: /metrics — the exporter over a real store —
// carries the election's plumbline_server_leader in every format a
// scraper may ask for (text, delimited protobuf, each gzipped or not), and
// the exporter's own families stay whole; of the shards, shard 0 carries it.
func TestMetricsLeaderGauge(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := store.Open(ctx, "sqlite://"+filepath.Join(t.TempDir(), "plumbline.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	el := leader.Local(leader.Options{})
	running := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		el.Run(ctx, leader.Loop{Name: LoopEvaluator, Run: func(ctx context.Context) { close(running); <-ctx.Done() }})
	}()
	defer func() { cancel(); <-done }()
	<-running
	evals, err := newEvaluators(st, evaluator.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.BaselineInterval = time.Minute
	h, err := metricsHandler(st, evals, []prometheus.Collector{el, newPruner(st, cfg, slog.New(slog.DiscardHandler))}, cfg, nil, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, accept string
		gzip         bool
	}{
		{"text", "", false},
		{"text gzip", "", true},
		{"protobuf", "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited", false},
		{"protobuf gzip", "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
			if tc.accept != "" {
				req.Header.Set("Accept", tc.accept)
			}
			if tc.gzip {
				req.Header.Set("Accept-Encoding", "gzip")
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			var body io.Reader = rec.Body
			if rec.Header().Get("Content-Encoding") == "gzip" {
				zr, err := gzip.NewReader(rec.Body) // multistream: the server's own families are a second member
				if err != nil {
					t.Fatal(err)
				}
				body = zr
			} else if tc.gzip {
				t.Fatal("gzip accepted but not sent")
			}
			fams := decode(t, body, expfmt.ResponseFormat(rec.Header()))
			g := fams["plumbline_server_leader"]
			if g == nil || len(g.GetMetric()) != 1 || g.GetMetric()[0].GetGauge().GetValue() != 1 ||
				g.GetMetric()[0].GetLabel()[0].GetValue() != LoopEvaluator {
				t.Errorf("plumbline_server_leader = %v; want {loop=%q} 1", g, LoopEvaluator)
			}
			if fams["plumbline_server_retention_pruned_rows_total"] == nil {
				t.Errorf("the retention loop's families are missing")
			}
			if fams["plumbline_evaluator_runs_total"] == nil {
				t.Errorf("the exporter's families are gone: %d families", len(fams))
			}
		})
	}
	// Sharded scrapes: the gauge goes with the fleet-wide series, in shard
	// 0 only, so the shards together carry it once; a bad shard query is
	// the exporter's 400.
	for _, tc := range []struct {
		query      string
		code       int
		withLeader bool
	}{
		{"?shard=0&shards=3", http.StatusOK, true},
		{"?shard=1&shards=3", http.StatusOK, false},
		{"?shard=2&shards=3", http.StatusOK, false},
		{"?shard=3&shards=3", http.StatusBadRequest, false},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics"+tc.query, nil))
		if got := strings.Contains(rec.Body.String(), "plumbline_server_leader"); rec.Code != tc.code || got != tc.withLeader {
			t.Errorf("GET /metrics%s: %d, leader gauge %v; want %d, %v\n%s", tc.query, rec.Code, got, tc.code, tc.withLeader, rec.Body)
		}
	}
}

func decode(t *testing.T, r io.Reader, format expfmt.Format) map[string]*dto.MetricFamily {
	t.Helper()
	dec := expfmt.NewDecoder(r, format)
	out := map[string]*dto.MetricFamily{}
	for {
		mf := &dto.MetricFamily{}
		if err := dec.Decode(mf); err == io.EOF {
			return out
		} else if err != nil {
			t.Fatalf("decode %s: %v", format, err)
		}
		if out[mf.GetName()] != nil {
			t.Fatalf("family %s twice", mf.GetName())
		}
		out[mf.GetName()] = mf
	}
}
