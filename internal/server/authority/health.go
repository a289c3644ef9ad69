package authority

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/plumbline/plumbline/internal/server/store"
)

// lookupHealth remembers a store error of the enrollment lookup, which
// every TLS handshake with an agent certificate and every call makes
// (VerifyConnection, Authorize). While the lookup fails, every enrolled
// agent is refused: the server says so — not ready (Ready), logged,
// counted (plumbline_enrollment_lookup_errors_total) — instead of
// refusing every agent with "bad certificate" while it looks healthy.
type lookupHealth struct {
	logger *slog.Logger
	now    func() time.Time

	mu       sync.Mutex
	err      error  // the last lookup's error; nil once a lookup succeeds
	agent    string // whose lookup failed (Ready asks again for it)
	failures uint64
	loggedAt time.Time
}

// logEvery is the least time between two log lines of a failing lookup.
const logEvery = 10 * time.Second

func (h *lookupHealth) failed(agent string, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.failures++
	h.err, h.agent = err, agent
	if now := h.now(); now.Sub(h.loggedAt) >= logEvery {
		h.loggedAt = now
		h.logger.Error("enrollment lookup failed: agents' certificates cannot be checked, so their connections are refused; the server reports not ready until a lookup succeeds",
			"agent", agent, "err", err, "failures", h.failures)
	}
}

func (h *lookupHealth) succeeded() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err != nil {
		h.logger.Info("enrollment lookup works again", "failures", h.failures)
		h.err = nil
	}
}

// Ready is nil unless the last enrollment lookup failed and looking up
// the same agent again still fails: then it says why (for /readyz).
func (a *Authority) Ready(ctx context.Context) error {
	h := a.cache.health
	h.mu.Lock()
	failing, agent := h.err != nil, h.agent
	h.mu.Unlock()
	if !failing {
		return nil
	}
	_, err := a.st.EnrolledAgent(ctx, agent)
	if err != nil && !errors.Is(err, store.ErrNotEnrolled) {
		if ctx.Err() == nil {
			h.failed(agent, err)
		}
		return fmt.Errorf("enrollment lookup fails, every enrolled agent's connection is refused: %w", err)
	}
	h.succeeded()
	return nil
}

var lookupErrorsDesc = prometheus.NewDesc("plumbline_enrollment_lookup_errors_total",
	"Store errors of the enrollment lookup that checks agent certificates at each TLS handshake and call; while it fails, enrolled agents are refused and /readyz answers 503.", nil, nil)

// LookupCollector is the enrollment lookup's error counter
// (prometheus.Collector).
func (a *Authority) LookupCollector() prometheus.Collector { return lookupCollector{a.cache.health} }

type lookupCollector struct{ h *lookupHealth }

func (lookupCollector) Describe(ch chan<- *prometheus.Desc) { ch <- lookupErrorsDesc }

func (c lookupCollector) Collect(ch chan<- prometheus.Metric) {
	h := c.h
	h.mu.Lock()
	n := h.failures
	h.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(lookupErrorsDesc, prometheus.CounterValue, float64(n))
}
