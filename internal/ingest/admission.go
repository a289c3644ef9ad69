package ingest

import (
	"context"
	"net"
	"sync"

	"golang.org/x/sync/semaphore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
)

// Admission bounds the memory incoming calls can hold, before gRPC reads
// their messages (issue 11: 200 concurrent 3.9 MiB Reports from one
// certificate took the server from 75 MB to 3 GB).
//
// gRPC reads a unary call's whole message and decodes it before any
// interceptor runs, so the bounds sit earlier, in the two hooks gRPC calls
// before the read:
//
//   - the tap handle (grpc.InTapHandle), when a call's headers arrive, on
//     the connection's reader: the caller's identity is known from its
//     certificate; the per-agent rate limit runs here, and the call
//     reserves MaxRecvMsgSize bytes of its agent's in-flight budget
//     (MaxAgentInflightBytes). Either refusal is ResourceExhausted, before
//     a byte of the message is read; nothing blocks the connection;
//   - the stats handler's Begin event, on the call's own goroutine just
//     before the read: the call waits (until its deadline) for
//     MaxRecvMsgSize bytes of the server's in-flight budget
//     (MaxInflightBytes).
//
// Once the message is decoded (the InPayload event), both reservations
// shrink to the message's real size; they are given back when the call
// ends. Until a call is admitted, gRPC buffers at most its stream's flow
// control window for it (NewGRPCServer fixes the window, so it cannot
// grow), and a connection carries at most MaxConcurrentStreams calls.
type admission struct {
	reserve      int64 // per call before its read: MaxRecvMsgSize
	agentBudget  int64
	total        *semaphore.Weighted
	lim          *limiters // nil: no rate limit here
	rateErr      func(key string) error
	insecure     bool
	countMethods map[string]bool
	// public methods may be called without a certificate; they count
	// against the caller's host ("peer <ip>").
	public map[string]bool

	mu     sync.Mutex
	agents map[string]int64 // reserved bytes by agent
}

type callKey struct{}

// call is one admitted call's reservations.
type call struct {
	a     *admission
	agent string

	mu        sync.Mutex
	agentHeld int64
	totalHeld int64
	done      bool
}

func newAdmission(reserve, agentBudget, totalBudget int64, lim *limiters, rateErr func(string) error, insecure bool, methods []string) *admission {
	a := &admission{
		reserve: reserve, agentBudget: max(agentBudget, reserve), total: semaphore.NewWeighted(max(totalBudget, reserve)),
		lim: lim, rateErr: rateErr, insecure: insecure, countMethods: map[string]bool{}, agents: map[string]int64{},
	}
	for _, m := range methods {
		a.countMethods[m] = true
	}
	return a
}

// tapKey is who a call counts against before its message is read: the
// identity of the connection's certificate ("" when it names none: the
// interceptor refuses the call with Unauthenticated).
func (a *admission) tapKey(ctx context.Context) string {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return ""
	}
	if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok && len(ti.State.VerifiedChains) > 0 && len(ti.State.VerifiedChains[0]) > 0 {
		if id, err := AgentIdentity(ti.State.VerifiedChains[0][0]); err == nil {
			return id
		}
	}
	return ""
}

// tap is the grpc.InTapHandle. It runs on the connection's reader with
// the transport's lock held: it must not block.
func (a *admission) tap(ctx context.Context, info *tap.Info) (context.Context, error) {
	if a.public[info.FullMethodName] {
		return a.admit(ctx, peerHostKey(ctx))
	}
	if !a.countMethods[info.FullMethodName] {
		return ctx, nil
	}
	if a.insecure {
		// No certificate, so no identity before the message is decoded
		// (the rate limit runs in the interceptor): only the server-wide
		// bound applies.
		c := &call{a: a}
		ctx = context.WithValue(ctx, callKey{}, c)
		context.AfterFunc(ctx, c.release)
		return ctx, nil
	}
	key := a.tapKey(ctx)
	if key == "" {
		// No identity (a connection without a certificate, allowed for
		// the public methods): refused before its message is read.
		_, _, err := peerIdentity(ctx)
		return nil, status.Error(codes.Unauthenticated, err.Error())
	}
	return a.admit(ctx, key)
}

// peerHostKey is the admission key of a caller without a certificate: its
// host's address.
func peerHostKey(ctx context.Context) string {
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		if host, _, err := net.SplitHostPort(p.Addr.String()); err == nil {
			return "peer " + host
		}
	}
	return "peer unknown"
}

// admit applies key's rate limit and in-flight budget to the call.
func (a *admission) admit(ctx context.Context, key string) (context.Context, error) {
	if a.lim != nil && !a.lim.allow(key) {
		return nil, a.rateErr(key)
	}
	a.mu.Lock()
	held := a.agents[key]
	if held+a.reserve > a.agentBudget {
		a.mu.Unlock()
		return nil, status.Errorf(codes.ResourceExhausted,
			"agent %q: %d bytes of calls already in flight, each call reserves up to the %d-byte message limit and an agent may have %d bytes in flight; retry later",
			key, held, a.reserve, a.agentBudget)
	}
	a.agents[key] = held + a.reserve
	a.mu.Unlock()
	c := &call{a: a, agent: key, agentHeld: a.reserve}
	ctx = context.WithValue(ctx, callKey{}, c)
	// The stream's context ends with the stream, whatever happened to it
	// (the stats handler's End event is the early path).
	context.AfterFunc(ctx, c.release)
	return ctx, nil
}

// begin waits for the call's share of the server's in-flight budget.
func (c *call) begin(ctx context.Context) {
	if err := c.a.total.Acquire(ctx, c.a.reserve); err != nil {
		return // the call is over (cancelled or past its deadline): its read fails
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done {
		c.a.total.Release(c.a.reserve)
		return
	}
	c.totalHeld = c.a.reserve
}

// received shrinks both reservations to the decoded message's size n.
func (c *call) received(n int64) {
	n = max(n, 1)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done {
		return
	}
	if d := c.totalHeld - n; c.totalHeld > 0 && d > 0 {
		c.a.total.Release(d)
		c.totalHeld = n
	}
	if d := c.agentHeld - n; d > 0 {
		c.a.mu.Lock()
		c.a.agents[c.agent] -= d
		c.a.mu.Unlock()
		c.agentHeld = n
	}
}

// release gives both reservations back (once).
func (c *call) release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done {
		return
	}
	c.done = true
	if c.totalHeld > 0 {
		c.a.total.Release(c.totalHeld)
		c.totalHeld = 0
	}
	if c.agentHeld > 0 {
		c.a.mu.Lock()
		if left := c.a.agents[c.agent] - c.agentHeld; left > 0 {
			c.a.agents[c.agent] = left
		} else {
			delete(c.a.agents, c.agent)
		}
		c.a.mu.Unlock()
		c.agentHeld = 0
	}
}

// agentInflight is the bytes agent key has reserved (for tests).
func (a *admission) agentInflight(key string) int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.agents[key]
}

// statsHandler is the grpc.StatsHandler half of admission.
type statsHandler struct{}

func (statsHandler) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }
func (statsHandler) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context {
	return ctx
}
func (statsHandler) HandleConn(context.Context, stats.ConnStats) {}

func (statsHandler) HandleRPC(ctx context.Context, s stats.RPCStats) {
	c, ok := ctx.Value(callKey{}).(*call)
	if !ok {
		return
	}
	switch s := s.(type) {
	case *stats.Begin:
		c.begin(ctx)
	case *stats.InPayload:
		c.received(int64(s.Length))
	case *stats.End:
		c.release()
	}
}
