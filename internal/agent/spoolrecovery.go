package agent

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/peer"

	"github.com/plumbline/plumbline/internal/agent/spool"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// hello says Hello for the spool incarnation inc.
func (a *Agent) hello(ctx context.Context, client plumblinev1.AgentServiceClient, inc string, server *peer.Peer) (*plumblinev1.HelloResponse, error) {
	hctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	hello, err := client.Hello(hctx, &plumblinev1.HelloRequest{AgentId: a.o.AgentID, Host: a.host.Load(), AgentVersion: a.o.Version,
		Incarnation: inc, Labels: a.o.Config.Labels}, grpc.Peer(server))
	if err != nil {
		return nil, fmt.Errorf("hello: %w", err)
	}
	return hello, nil
}

// ackHello settles what the Hello's high-water mark says the server
// holds of inc.
func (a *Agent) ackHello(inc string, hello *plumblinev1.HelloResponse) error {
	if err := a.spool.Ack(inc, hello.GetHighWaterSequence(), nil); err != nil {
		a.metrics.spoolErrors.Inc()
		return err
	}
	return nil
}

// rehello says Hello again within a session, for the next incarnation
// whose records the spool holds (see session).
func (a *Agent) rehello(ctx context.Context, client plumblinev1.AgentServiceClient, inc string) error {
	var server peer.Peer
	hello, err := a.hello(ctx, client, inc, &server)
	if err != nil {
		return err
	}
	a.log.Info("delivering the next spool incarnation", "incarnation", inc, "high_water", hello.GetHighWaterSequence())
	return a.ackHello(inc, hello)
}

// logSpoolEvents says what the spool found damaged when it opened, and
// what it did: ERROR where records may be lost or stored twice, WARN
// where they are only sent again.
func (a *Agent) logSpoolEvents() {
	for _, e := range a.spool.Events() {
		level := slog.LevelError
		switch e.Problem {
		case spool.ProblemAckMissing, spool.ProblemAckDamaged, spool.ProblemHeaderRepaired, spool.ProblemSegmentTorn:
			level = slog.LevelWarn
		}
		a.log.Log(context.Background(), level, "spool damaged", "file", e.File, "problem", e.Problem, "action", e.Action)
	}
}

// spoolFull tracks whether appends are failing for want of space, so
// that the log says so once when it starts and once when it ends.
type spoolFull struct {
	mu      sync.Mutex
	full    bool
	dropped uint64 // records dropped while full
}

// appendFailed logs a failed append: the first of a run of disk-full
// failures as an ERROR saying records are dropped, the others not.
func (a *Agent) appendFailed(err error) {
	if !spool.DiskFull(err) {
		a.log.Error("spool append: record dropped", "err", err)
		return
	}
	f := &a.full
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dropped++
	if !f.full {
		f.full = true
		a.log.Error("spool file system full: dropping new records until there is space (acknowledged records are released as the server settles them)",
			"dir", a.o.Config.Spool.Dir, "err", err)
	}
}

// appendOK ends a run of disk-full failures.
func (a *Agent) appendOK() {
	f := &a.full
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.full {
		a.log.Warn("spool has space again: spooling resumed", "dir", a.o.Config.Spool.Dir, "records_dropped", f.dropped)
		f.full, f.dropped = false, 0
	}
}

// spoolCollector exposes the spool's damage and loss counters by label.
type spoolCollector struct {
	sp           *spool.Spool
	lost, damage *prometheus.Desc
}

func newSpoolCollector(sp *spool.Spool) *spoolCollector {
	return &spoolCollector{sp: sp,
		lost: prometheus.NewDesc("plumbline_agent_spool_lost_records_total",
			"Records the spool lost, by reason: corrupt (a damaged frame), truncated (a cut segment tail: one record counted, a cut across several frames loses more), missing-segment (a deleted segment's records the server does not have), disk-full and write-error (appends that failed).",
			[]string{"reason"}, nil),
		damage: prometheus.NewDesc("plumbline_agent_spool_damage_total",
			"Problems the spool found in its files when the agent started, by problem: ack-missing, ack-damaged, segment-corrupt, segment-torn, segment-missing, header-repaired, header-lost, incarnation-file.",
			[]string{"problem"}, nil),
	}
}

func (c *spoolCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.lost; ch <- c.damage }

func (c *spoolCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.sp.Stats()
	for _, r := range []string{spool.LostCorrupt, spool.LostTruncated, spool.LostMissing, spool.LostDiskFull, spool.LostWrite} {
		ch <- prometheus.MustNewConstMetric(c.lost, prometheus.CounterValue, float64(st.Lost[r]), r)
	}
	for _, p := range []string{spool.ProblemAckMissing, spool.ProblemAckDamaged, spool.ProblemSegmentCorrupt, spool.ProblemSegmentTorn,
		spool.ProblemSegmentMissing, spool.ProblemHeaderRepaired, spool.ProblemHeaderLost, spool.ProblemIncarnationFile} {
		ch <- prometheus.MustNewConstMetric(c.damage, prometheus.CounterValue, float64(st.Damage[p]), p)
	}
}
