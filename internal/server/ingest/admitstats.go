package ingest

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Why admission refused a call (the reason label of
// plumbline_grpc_calls_refused_total).
const (
	reasonUnauthenticated = "unauthenticated" // no certificate for a method that needs one
	reasonRate            = "rate"            // the caller's rate limit
	reasonLongPolls       = "long_polls"      // the caller's cap on waiting calls
	reasonBusy            = "busy"            // the server's cap on reports in progress
	reasonInflight        = "inflight_bytes"  // the caller's in-flight budget
	reasonTooBig          = "message_size"    // over the method's message limit (before decoding)
	reasonSlow            = "slow_message"    // its message did not arrive within the read timeout (cancelled)
)

type refusal struct{ method, reason string }

// admissionStats counts what admission did, for /metrics.
type admissionStats struct {
	mu       sync.Mutex
	admitted map[string]uint64
	refused  map[refusal]uint64
	readB    uint64
}

func (s *admissionStats) admit(method string) {
	s.mu.Lock()
	if s.admitted == nil {
		s.admitted = map[string]uint64{}
	}
	s.admitted[method]++
	s.mu.Unlock()
}

func (s *admissionStats) refuse(method, reason string) {
	s.mu.Lock()
	if s.refused == nil {
		s.refused = map[refusal]uint64{}
	}
	s.refused[refusal{method, reason}]++
	s.mu.Unlock()
}

func (s *admissionStats) read(n int64) {
	s.mu.Lock()
	s.readB += uint64(max(n, 0))
	s.mu.Unlock()
}

// bytesRead is the wire bytes of the messages gRPC has read (tests).
func (s *admissionStats) bytesRead() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.readB
}

func (s *admissionStats) refusals(method, reason string) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refused[refusal{method, reason}]
}

var (
	admittedDesc = prometheus.NewDesc("plumbline_grpc_calls_admitted_total",
		"gRPC calls admitted (before their message was read), by full method name.", []string{"method"}, nil)
	refusedDesc = prometheus.NewDesc("plumbline_grpc_calls_refused_total",
		"gRPC calls refused by admission before their message was read or decoded, by full method name and reason (unauthenticated, rate, long_polls, busy, inflight_bytes, message_size, slow_message).",
		[]string{"method", "reason"}, nil)
	readDesc = prometheus.NewDesc("plumbline_grpc_received_message_bytes_total",
		"Bytes of gRPC request messages read from the network.", nil, nil)
	pendingDesc = prometheus.NewDesc("plumbline_grpc_reports_in_progress",
		"Report calls admitted and not yet answered; at grpc.max_pending_reports the server refuses more with a retry hint.", nil, nil)
)

// AdmissionCollector is the admission's metrics (a prometheus.Collector).
func (s *Service) AdmissionCollector() prometheus.Collector { return admissionCollector{s.adm} }

type admissionCollector struct{ a *admission }

func (admissionCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- admittedDesc
	ch <- refusedDesc
	ch <- readDesc
	ch <- pendingDesc
}

func (c admissionCollector) Collect(ch chan<- prometheus.Metric) {
	s := &c.a.stats
	s.mu.Lock()
	for m, n := range s.admitted {
		ch <- prometheus.MustNewConstMetric(admittedDesc, prometheus.CounterValue, float64(n), m)
	}
	for r, n := range s.refused {
		ch <- prometheus.MustNewConstMetric(refusedDesc, prometheus.CounterValue, float64(n), r.method, r.reason)
	}
	ch <- prometheus.MustNewConstMetric(readDesc, prometheus.CounterValue, float64(s.readB))
	s.mu.Unlock()
	c.a.mu.Lock()
	pending := c.a.pending
	c.a.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(pendingDesc, prometheus.GaugeValue, float64(pending))
}

// allowWait is allow, with the wait for the next call when it refuses.
func (l *limiters) allowWait(key string) (bool, time.Duration) {
	if l.allow(key) {
		return true, 0
	}
	if l.r <= 0 {
		return false, time.Second
	}
	return false, time.Duration(float64(time.Second) / float64(l.r))
}
