package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// Summary is what a run measured.
type Summary struct {
	Agents, Connected int
	ConnectTime       time.Duration // the connect phase (all Hellos)
	Elapsed           time.Duration // start of sending to the last acknowledgement
	Generated         int64
	Scans             int64 // stripe-scan results among Generated (Config.ScanEvery)
	Acked             int64 // records stored or recognised as stored
	Rejected          int64
	Dropped           int64 // dropped by the pending cap
	Pending           int64 // unacknowledged at the end
	Reports, Hellos   int64
	Rehellos          int64 // Hellos after an agent's first (reconnects)
	Errors            int
	ErrorsBy          map[string]int
	Refused           int64           // Reports the server refused with a retry hint (at capacity): waited out, not errors
	Latency           []time.Duration // sorted Report latencies
	RecordsPerSecond  float64
	// Reconnect (with Config.Reconnect): how long after the first failure
	// every agent had a successful Report again; 0 when no failure was seen.
	FirstFailure, AllResumed time.Time
	Resumed                  int
	// ServedBy counts the agents whose Reports each server address
	// acknowledged; Moved the agents acknowledged by more than one
	// (failovers between replicas).
	ServedBy map[string]int
	Moved    int
}

// Percentile is the q-quantile (0..1) of the Report latencies.
func (s Summary) Percentile(q float64) time.Duration {
	if len(s.Latency) == 0 {
		return 0
	}
	i := int(q*float64(len(s.Latency)) + 0.5)
	return s.Latency[min(max(i-1, 0), len(s.Latency)-1)]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d)/1e6) }

// Print writes the report; its last line starts records_per_second=N.
func (s Summary) Print(w io.Writer) {
	fmt.Fprintf(w, "agents=%d connected=%d connect_seconds=%.1f elapsed_seconds=%.1f\n", s.Agents, s.Connected, s.ConnectTime.Seconds(), s.Elapsed.Seconds())
	fmt.Fprintf(w, "generated=%d acked=%d rejected=%d dropped=%d pending=%d reports=%d hellos=%d reconnect_hellos=%d stripe_scans=%d\n",
		s.Generated, s.Acked, s.Rejected, s.Dropped, s.Pending, s.Reports, s.Hellos, s.Rehellos, s.Scans)
	if s.Errors > 0 {
		keys := make([]string, 0, len(s.ErrorsBy))
		for k := range s.ErrorsBy {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var parts []string
		for _, k := range keys {
			parts = append(parts, fmt.Sprintf("%s=%d", strings.ReplaceAll(k, " ", ":"), s.ErrorsBy[k]))
		}
		fmt.Fprintf(w, "errors_by_call: %s\n", strings.Join(parts, " "))
	}
	if len(s.ServedBy) > 1 {
		addrs := slices.Sorted(maps.Keys(s.ServedBy))
		var parts []string
		for _, a := range addrs {
			parts = append(parts, fmt.Sprintf("%s=%d", a, s.ServedBy[a]))
		}
		fmt.Fprintf(w, "agents_by_server: %s moved=%d\n", strings.Join(parts, " "), s.Moved)
	}
	if !s.FirstFailure.IsZero() {
		if s.AllResumed.IsZero() {
			fmt.Fprintf(w, "reconnect: %d of %d agents reported again after the first failure at %s; not all (reconnect_seconds=NaN)\n",
				s.Resumed, s.Agents, s.FirstFailure.Format(time.RFC3339Nano))
		} else {
			fmt.Fprintf(w, "reconnect: first failure %s, all %d agents reported again by %s reconnect_last_resume_unix_ms=%d\n",
				s.FirstFailure.Format(time.RFC3339Nano), s.Agents, s.AllResumed.Format(time.RFC3339Nano), s.AllResumed.UnixMilli())
			fmt.Fprintf(w, "reconnect_seconds=%.1f\n", s.AllResumed.Sub(s.FirstFailure).Seconds())
		}
	}
	if s.Refused > 0 {
		fmt.Fprintf(w, "reports_refused=%d (the server at capacity: each waited out its retry hint, records kept)\n", s.Refused)
	}
	fmt.Fprintf(w, "records_per_second=%.0f report_p50_ms=%s report_p90_ms=%s report_p99_ms=%s report_max_ms=%s errors=%d\n",
		s.RecordsPerSecond, ms(s.Percentile(0.5)), ms(s.Percentile(0.9)), ms(s.Percentile(0.99)), ms(s.Percentile(1)), s.Errors)
}

// Run connects cfg.Agents simulated agents to target, lets them produce and
// report for cfg.Duration, flushes, and returns what it measured. Progress
// lines go to progress.
func Run(ctx context.Context, cfg Config, target Target, issue Issuer, progress io.Writer) (Summary, error) {
	f := &fleet{
		cfg: cfg, target: target, pool: NewSamplePool(cfg.Seed),
		st:   &stats{errs: map[string]int{}},
		goCh: make(chan struct{}), genDone: make(chan struct{}),
	}
	agents, err := newAgents(f, issue)
	if err != nil {
		return Summary{}, err
	}
	defer func() {
		for _, a := range agents {
			a.conn.Close()
		}
	}()

	// The agents run until the end of the drain; the connect phase and the
	// duration are stages inside it.
	runCtx, cancelRun := context.WithCancel(ctx)
	defer cancelRun()
	var wg sync.WaitGroup
	allConnected := startAgents(runCtx, f, agents, &wg)
	stopProgress := startProgress(f, progress, cfg.Progress)
	defer stopProgress()

	connectTime := connectPhase(ctx, f, allConnected, len(agents), progress)
	f.start = time.Now()
	close(f.goCh)
	rc := sendPhase(ctx, f, agents)
	f.genEnd.Store(time.Now().UnixNano())
	close(f.genDone)
	drain := time.AfterFunc(cfg.Drain, cancelRun)
	wg.Wait()
	drain.Stop()
	return f.summary(agents, connectTime, rc), nil
}

// newAgents builds the fleet's agents, each with its certificate and
// connection.
func newAgents(f *fleet, issue Issuer) ([]*simAgent, error) {
	agents := make([]*simAgent, f.cfg.Agents)
	for i := range agents {
		a, err := newSimAgent(f, i+1, issue)
		if err != nil {
			for _, b := range agents[:i] {
				b.conn.Close()
			}
			return nil, err
		}
		agents[i] = a
	}
	return agents, nil
}

// startAgents runs every agent (at most ConnectConcurrency saying Hello at
// once) until ctx ends; the channel closes once all have connected.
func startAgents(ctx context.Context, f *fleet, agents []*simAgent, wg *sync.WaitGroup) <-chan struct{} {
	sem := make(chan struct{}, f.cfg.ConnectConcurrency)
	allConnected := make(chan struct{})
	var connMu sync.Mutex
	connected := 0
	onConnected := func() {
		<-sem
		connMu.Lock()
		connected++
		if connected == len(agents) {
			close(allConnected)
		}
		connMu.Unlock()
		f.st.connected.Add(1)
	}
	for _, a := range agents {
		wg.Go(func() {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			a.run(ctx, onConnected)
		})
	}
	return allConnected
}

// connectPhase waits for every agent's Hello, at most ConnectTimeout, and
// returns how long it took.
func connectPhase(ctx context.Context, f *fleet, allConnected <-chan struct{}, agents int, progress io.Writer) time.Duration {
	start := time.Now()
	timeout := time.NewTimer(f.cfg.ConnectTimeout)
	defer timeout.Stop()
	select {
	case <-allConnected:
	case <-timeout.C:
		fmt.Fprintf(progress, "fleetsim: connect phase timed out after %s with %d of %d agents connected; going on\n", f.cfg.ConnectTimeout, f.st.connected.Load(), agents)
	case <-ctx.Done():
	}
	took := time.Since(start)
	fmt.Fprintf(progress, "fleetsim: %d agents connected in %.1fs; sending %.0f records/s for %s\n", f.st.connected.Load(), took.Seconds(), f.cfg.perAgentRate()*float64(agents), f.cfg.Duration)
	return took
}

// reconnect is what the sending stage saw of a server restart.
type reconnect struct {
	firstFailure, allResumed time.Time
	resumed                  int
}

// sendPhase lasts until the duration ends, or (Config.Reconnect) until
// every agent has reported again after the first failure.
func sendPhase(ctx context.Context, f *fleet, agents []*simAgent) reconnect {
	var rc reconnect
	end := time.NewTimer(f.cfg.Duration)
	defer end.Stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return rc
		case <-end.C:
			return rc
		case <-tick.C:
		}
		t0 := f.t0.Load()
		if !f.cfg.Reconnect || t0 == 0 {
			continue
		}
		n, last := 0, int64(0)
		for _, a := range agents {
			if s := a.lastSuccess.Load(); s > t0 {
				n++
				last = max(last, s)
			}
		}
		rc.resumed, rc.firstFailure = n, time.Unix(0, t0)
		if n == len(agents) {
			rc.allResumed = time.Unix(0, last)
			return rc
		}
	}
}

// summary is what the run measured, once every agent has stopped.
func (f *fleet) summary(agents []*simAgent, connectTime time.Duration, rc reconnect) Summary {
	st := f.st
	s := Summary{
		Agents: len(agents), Connected: int(st.connected.Load()), ConnectTime: connectTime,
		Generated: st.generated.Load(), Scans: st.scans.Load(), Acked: st.acked.Load(), Rejected: st.rejected.Load(), Dropped: st.dropped.Load(),
		Reports: st.reports.Load(), Hellos: st.hellos.Load(), Rehellos: st.rehellos.Load(),
		FirstFailure: rc.firstFailure, AllResumed: rc.allResumed, Resumed: rc.resumed,
	}
	s.ServedBy = map[string]int{}
	for _, a := range agents {
		s.Pending += int64(len(a.pending))
		s.Latency = append(s.Latency, a.lats...)
		for addr := range a.servers {
			s.ServedBy[addr]++
		}
		if len(a.servers) > 1 {
			s.Moved++
		}
	}
	slices.Sort(s.Latency)
	s.Errors, s.ErrorsBy = st.errorCount()
	s.Refused = st.refused.Load()
	if last := st.lastAck.Load(); last > f.start.UnixNano() {
		s.Elapsed = time.Unix(0, last).Sub(f.start)
		s.RecordsPerSecond = float64(s.Acked) / s.Elapsed.Seconds()
	}
	return s
}

// startProgress prints a line every interval: connected agents, records
// acknowledged and the rate since the previous line.
func startProgress(f *fleet, w io.Writer, every time.Duration) (stop func()) {
	if every <= 0 {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		start := time.Now()
		var lastAcked int64
		last := start
		for {
			select {
			case <-done:
				return
			case now := <-t.C:
				acked := f.st.acked.Load()
				n, _ := f.st.errorCount()
				fmt.Fprintf(w, "fleetsim: t=%4.0fs connected=%d acked=%d rate=%.0f/s reports=%d errors=%d\n",
					now.Sub(start).Seconds(), f.st.connected.Load(), acked, float64(acked-lastAcked)/now.Sub(last).Seconds(), f.st.reports.Load(), n)
				lastAcked, last = acked, now
			}
		}
	})
	return func() { close(done); wg.Wait() }
}
