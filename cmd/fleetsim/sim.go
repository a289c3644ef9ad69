package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/plumbline/plumbline/internal/agent"
	"github.com/plumbline/plumbline/internal/agent/probe"
	"github.com/plumbline/plumbline/internal/ctxtime"
	"github.com/plumbline/plumbline/internal/vocab"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// Target is the server the fleet reports to and how to trust it.
type Target struct {
	Address string
	// Addresses, when set, are server replicas: agent i connects to
	// Addresses[i mod n] first and fails over to the next ones in turn.
	Addresses  []string
	ServerName string
	Roots      *x509.CertPool
}

// Issuer mints an agent's client certificate (devca.CA.IssueAgent).
type Issuer func(id string) (tls.Certificate, error)

// callTimeout bounds one Hello or Report, as in the real agent.
const callTimeout = 30 * time.Second

// fleet is a set of simulated agents and what they measured.
type fleet struct {
	cfg    Config
	target Target
	pool   *SamplePool
	st     *stats

	start   time.Time     // when sending started (after the connect phase)
	goCh    chan struct{} // closed at start
	genDone chan struct{} // closed when generation stops
	genEnd  atomic.Int64  // unix ns when generation stopped, set before genDone closes
	t0      atomic.Int64  // reconnect: unix ns of the first failure after start; 0 before
}

// stats are the fleet's counters.
type stats struct {
	generated, acked, rejected, dropped atomic.Int64
	scans                               atomic.Int64 // stripe-scan results generated
	reports, hellos, rehellos           atomic.Int64
	refused                             atomic.Int64 // Reports refused with a retry hint
	connected                           atomic.Int64
	lastAck                             atomic.Int64 // unix ns

	mu   sync.Mutex
	errs map[string]int
	lats []time.Duration
}

func (s *stats) fail(op string, err error) {
	code := status.Code(err).String()
	s.mu.Lock()
	s.errs[op+" "+code]++
	s.mu.Unlock()
}

func (s *stats) errorCount() (n int, by map[string]int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	by = map[string]int{}
	for k, v := range s.errs {
		n += v
		by[k] = v
	}
	return n, by
}

// simAgent is one simulated agent: its own identity, TLS connection,
// sequence numbers and unacknowledged records (its "spool", in memory).
type simAgent struct {
	f    *fleet
	idx  int
	id   string
	prof HostProfile
	mis  []bool // per volume: misaligned on its array (its latencies show it)
	r    *rand.Rand
	conn *grpc.ClientConn
	rpc  plumblinev1.AgentServiceClient

	// hidden are the volumes whose stripe is hidden (stripe-scan runs
	// there); scanIdx cycles over them.
	hidden  []int
	scanIdx int

	next     uint64 // the next sequence; 0 before the first Hello
	pending  []*plumblinev1.Record
	produced int64 // probe records produced since start
	kindIdx  int

	reportInterval time.Duration
	maxBatch       int
	lats           []time.Duration

	servers map[string]bool // the server addresses its Reports went to

	helloed     atomic.Bool
	lastSuccess atomic.Int64 // unix ns of the last successful Report
}

func newSimAgent(f *fleet, idx int, issue Issuer) (*simAgent, error) {
	id := fmt.Sprintf("%s%05d", f.cfg.IDPrefix, idx)
	cert, err := issue(id)
	if err != nil {
		return nil, err
	}
	a := &simAgent{f: f, idx: idx, id: id, servers: map[string]bool{}, prof: NewHostProfile(f.cfg.Seed, idx, id), r: rand.New(rand.NewPCG(f.cfg.Seed^0xa9e17, uint64(idx)))}
	for i, v := range a.prof.Volumes {
		a.mis = append(a.mis, v.Misaligned(a.prof.OS))
		if v.HiddenStripe {
			a.hidden = append(a.hidden, i)
		}
	}
	tc := &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{cert},
		RootCAs:      f.target.Roots,
		ServerName:   f.target.ServerName,
	}
	a.conn, err = dial(f.target, idx, credentials.NewTLS(tc))
	if err != nil {
		return nil, fmt.Errorf("agent %s: %w", id, err)
	}
	a.rpc = plumblinev1.NewAgentServiceClient(a.conn)
	return a, nil
}

// dial connects agent idx to the target: to the one address, or to the
// replicas from Addresses[idx mod n] on (pick_first over the rotated
// list), so the fleet is spread evenly and fails over in turn.
func dial(t Target, idx int, creds credentials.TransportCredentials) (*grpc.ClientConn, error) {
	if len(t.Addresses) == 0 {
		return grpc.NewClient(t.Address, grpc.WithTransportCredentials(creds))
	}
	n := len(t.Addresses)
	addrs := make([]resolver.Address, n)
	for i := range n {
		addrs[i] = resolver.Address{Addr: t.Addresses[(idx+i)%n]}
	}
	r := manual.NewBuilderWithScheme("fleetsim")
	r.InitialState(resolver.State{Addresses: addrs})
	return grpc.NewClient("fleetsim:///replicas", grpc.WithTransportCredentials(creds), grpc.WithResolvers(r),
		grpc.WithDefaultServiceConfig(`{"loadBalancingConfig":[{"pick_first":{}}]}`))
}

// run keeps a session with the server, reconnecting with the real agent's
// full-jitter backoff, until generation is over and everything is acked,
// or ctx ends.
func (a *simAgent) run(ctx context.Context, connected func()) {
	attempt := 0
	for {
		helloOK, err := a.session(ctx, connected)
		if err == nil || ctx.Err() != nil {
			return
		}
		if helloOK {
			attempt = 0
		}
		attempt++
		wait := agent.Backoff(attempt, a.f.cfg.BackoffBase, a.f.cfg.BackoffMax, a.r.Float64())
		if ctxtime.Sleep(ctx, wait) != nil {
			return
		}
	}
}

func (a *simAgent) markFailure(now time.Time) {
	if !a.f.cfg.Reconnect {
		return
	}
	select {
	case <-a.f.goCh: // failures during the connect phase are no restart
		a.f.t0.CompareAndSwap(0, now.UnixNano())
	default:
	}
}

// session says Hello, then reports every report interval. It returns nil
// once generation has stopped and nothing is left unacknowledged.
func (a *simAgent) session(ctx context.Context, connected func()) (helloOK bool, err error) {
	st := a.f.st
	hctx, cancel := context.WithTimeout(ctx, callTimeout)
	hello, err := a.rpc.Hello(hctx, &plumblinev1.HelloRequest{
		AgentId: a.id, Host: a.prof.Host(kernelFor(a.prof.OS), version), AgentVersion: version,
	})
	cancel()
	st.hellos.Add(1)
	if err != nil {
		if ctx.Err() == nil {
			st.fail("hello", err)
			a.markFailure(time.Now())
		}
		return false, fmt.Errorf("hello: %w", err)
	}
	hw := hello.GetHighWaterSequence()
	a.reportInterval = hello.GetReportInterval().AsDuration()
	if a.f.cfg.ReportInterval > 0 {
		a.reportInterval = a.f.cfg.ReportInterval
	}
	a.reportInterval = max(a.reportInterval, 10*time.Millisecond)
	a.maxBatch = agent.DefaultMaxBatch
	if n := hello.GetMaxBatchRecords(); n > 0 {
		a.maxBatch = int(n)
	}
	if a.f.cfg.MaxBatch > 0 {
		a.maxBatch = min(a.maxBatch, a.f.cfg.MaxBatch)
	}
	first := a.next == 0
	if a.next <= hw {
		// The server settled more than we remember (a re-run against the
		// same store): continue above its mark, as an agent with a spool would.
		a.next = hw + 1
	}
	before := len(a.pending)
	a.settle(hw, nil) // stored, its acknowledgement lost with the connection
	st.acked.Add(int64(before - len(a.pending)))
	if first {
		a.next = max(a.next, 1)
		a.appendRecord(&plumblinev1.Record{Payload: &plumblinev1.Record_Geometry{Geometry: &plumblinev1.GeometrySnapshot{
			Inventory: a.prof.Inventory(kernelFor(a.prof.OS), version, time.Now()), Trigger: string(vocab.TriggerStart),
		}}}, time.Now())
	}
	if !a.helloed.Swap(true) {
		connected()
	} else {
		st.rehellos.Add(1)
	}
	select {
	case <-ctx.Done():
		return true, ctx.Err()
	case <-a.f.goCh:
	}
	if first {
		// Spread the fleet's reports over the interval.
		if err := a.sleep(ctx, time.Duration(a.r.Int64N(int64(a.reportInterval)))); err != nil {
			return true, err
		}
	}
	for {
		a.generate(time.Now())
		if err := a.drain(ctx); err != nil {
			return true, err
		}
		select {
		case <-a.f.genDone:
			if len(a.pending) == 0 {
				return true, nil
			}
		default:
		}
		if err := a.sleep(ctx, a.reportInterval); err != nil {
			return true, err
		}
	}
}

// sleep waits d, or less when generation stops; it fails only when ctx ends.
func (a *simAgent) sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-a.f.genDone:
	case <-t.C:
	}
	return nil
}

// maxPending bounds an agent's unacknowledged records; beyond it the
// oldest are dropped (and declared with first_sequence), as the spool cap does.
const maxPending = 50_000

func (a *simAgent) appendRecord(rec *plumblinev1.Record, now time.Time) {
	rec.Sequence = a.next
	rec.ProducedAt = timestamppb.New(now)
	a.next++
	a.pending = append(a.pending, rec)
	a.f.st.generated.Add(1)
	if len(a.pending) > maxPending {
		n := len(a.pending) - maxPending
		a.pending = slices.Delete(a.pending, 0, n)
		a.f.st.dropped.Add(int64(n))
	}
}

// generate produces the probe results due by now at the agent's rate,
// cycling over its volumes and the latency kinds; with Config.ScanEvery,
// every Nth (the first included) is a stripe-scan of one of its
// hidden-stripe volumes instead, when it has any.
func (a *simAgent) generate(now time.Time) {
	select {
	case <-a.f.genDone:
		now = time.Unix(0, a.f.genEnd.Load()) // what was due by the end
	default:
	}
	due := int64(a.f.cfg.perAgentRate() * now.Sub(a.f.start).Seconds())
	kinds := probe.JudgedKinds()
	for ; a.produced < due; a.produced++ {
		var pr *plumblinev1.ProbeResult
		if n := int64(a.f.cfg.ScanEvery); n > 0 && len(a.hidden) > 0 && a.produced%n == 0 {
			pr = a.f.pool.ScanRecord(a.r, &a.prof.Volumes[a.hidden[a.scanIdx%len(a.hidden)]], now)
			a.scanIdx++
		} else {
			vi := a.kindIdx % len(a.prof.Volumes)
			kind := kinds[(a.kindIdx/len(a.prof.Volumes))%len(kinds)]
			a.kindIdx++
			pr = a.f.pool.ProbeRecord(a.r, &a.prof.Volumes[vi], a.mis[vi], kind, now)
		}
		if n := int64(a.f.cfg.MaintenanceEvery); n > 0 && a.produced%n == n-1 {
			maintenanceSkip(pr)
		}
		if pr.GetStripeScan() != nil {
			a.f.st.scans.Add(1)
		}
		a.appendRecord(&plumblinev1.Record{Payload: &plumblinev1.Record_Probe{Probe: pr}}, now)
	}
}

// drain sends batches until nothing is pending, resending what the server
// did not acknowledge.
func (a *simAgent) drain(ctx context.Context) error {
	st := a.f.st
	for len(a.pending) > 0 {
		n := min(len(a.pending), a.maxBatch)
		req := &plumblinev1.ReportRequest{AgentId: a.id, Records: a.pending[:n], FirstSequence: a.pending[0].GetSequence()}
		rctx, cancel := context.WithTimeout(ctx, callTimeout)
		t := time.Now()
		var server peer.Peer
		resp, err := a.rpc.Report(rctx, req, grpc.Peer(&server))
		cancel()
		now := time.Now()
		st.reports.Add(1)
		if wait, ok := agent.RetryAfter(err, a.f.cfg.BackoffMax, a.r.Float64()); ok {
			// As the agent: the server is at capacity; wait, keep the batch.
			st.refused.Add(1)
			if ctxtime.Sleep(ctx, wait) != nil {
				return ctx.Err()
			}
			continue
		}
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			st.fail("report", err)
			a.markFailure(now)
			return fmt.Errorf("report: %w", err)
		}
		a.lats = append(a.lats, now.Sub(t))
		a.lastSuccess.Store(now.UnixNano())
		if server.Addr != nil {
			a.servers[server.Addr.String()] = true
		}
		set := make(map[uint64]bool, len(resp.GetAckedSequences())+len(resp.GetRejections()))
		for _, q := range resp.GetAckedSequences() {
			set[q] = true
		}
		for _, rj := range resp.GetRejections() {
			set[rj.GetSequence()] = true
			st.rejected.Add(1)
		}
		before := len(a.pending)
		a.settle(resp.GetHighWaterSequence(), set)
		acked := before - len(a.pending)
		st.acked.Add(int64(acked - len(resp.GetRejections())))
		st.lastAck.Store(now.UnixNano())
		if acked == 0 {
			st.fail("report", errors.New("none acknowledged"))
			return errors.New("report: the server acknowledged none of the batch")
		}
	}
	return nil
}

// settle drops the pending records at or below hw or in set.
func (a *simAgent) settle(hw uint64, set map[uint64]bool) {
	a.pending = slices.DeleteFunc(a.pending, func(r *plumblinev1.Record) bool {
		return r.GetSequence() <= hw || set[r.GetSequence()]
	})
}
