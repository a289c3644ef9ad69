package server

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/plumbline/plumbline/internal/evaluator"
	"github.com/plumbline/plumbline/internal/leader"
	"github.com/plumbline/plumbline/internal/server/config"
	"github.com/plumbline/plumbline/internal/store"
)

// TestMetricsShardsCarryLeaderOnce: the server's own plumbline_server_leader
// is in the whole /metrics page and in shard 0 only, as the exporter's
// fleet-wide series, so the shards together carry it once; a bad shard
// query is the exporter's 400.
func TestMetricsShardsCarryLeaderOnce(t *testing.T) {
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
	h, err := metricsHandler(st, evals, el, cfg, nil, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		query      string
		code       int
		withLeader bool
	}{
		{"", http.StatusOK, true},
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
