package ingest

import (
	"context"
	"sync"
	"time"

	"google.golang.org/grpc/keepalive"
)

// Liveness is the connection, not the last batch (DESIGN.md §8): an agent
// keeps one WatchPolicy call open for its whole session, so while a call
// of an agent is open here the agent is connected to this replica. Every
// third of the down threshold the replica notes its connected agents in
// the store (Store.MarkConnected), which every replica's exporter reads:
// a connected agent is up however idle it is (no probe schedule, a
// maintenance window), on whichever replica holds its connection. The
// keepalive (keepaliveParams) closes a dead connection, and so ends its
// call, within two thirds of the threshold.

// DefaultAgentDownAfter is the down threshold when Options.AgentDownAfter
// is not set: 3 × the report interval, at least a minute.
func DefaultAgentDownAfter(reportInterval time.Duration) time.Duration {
	return max(3*reportInterval, time.Minute)
}

// connections counts the open WatchPolicy calls of each agent.
type connections struct {
	mu sync.Mutex
	n  map[string]int
}

// open counts a call of agent open; the returned func closes it.
func (c *connections) open(agent string) (closeCall func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[agent]++
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.n[agent]--; c.n[agent] <= 0 {
			delete(c.n, agent)
		}
	}
}

// agents are the agents with an open call.
func (c *connections) agents() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, 0, len(c.n))
	for id := range c.n {
		out = append(out, id)
	}
	return out
}

// heartbeatEvery is how often the connected agents are noted: a third of
// the down threshold.
func (o Options) heartbeatEvery() time.Duration { return max(o.AgentDownAfter/3, 100*time.Millisecond) }

// RunHeartbeats notes this replica's connected agents in the store every
// third of the down threshold until ctx ends. A failed write is logged
// and tried again at the next beat.
func (s *Service) RunHeartbeats(ctx context.Context) {
	t := time.NewTicker(s.opts.heartbeatEvery())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		ids := s.live.agents()
		if len(ids) == 0 {
			continue
		}
		if err := s.store.MarkConnected(ctx, ids, s.opts.Now()); err != nil && ctx.Err() == nil {
			s.opts.Logger.Warn("noting the connected agents failed; they may read as down", "agents", len(ids), "err", err)
		}
	}
}

// keepaliveParams ping a connection idle for a third of the down
// threshold (at most 2m) and close it when the ping is not answered
// within another third (at most 20s): a dead connection (a host gone
// without a FIN) ends within two thirds of the threshold, so its agent's
// last noted connection is no later than that and it reads as down
// within the threshold after.
func (o Options) keepaliveParams() keepalive.ServerParameters {
	third := max(o.AgentDownAfter/3, time.Second)
	return keepalive.ServerParameters{Time: min(third, 2*time.Minute), Timeout: min(third, 20*time.Second)}
}
