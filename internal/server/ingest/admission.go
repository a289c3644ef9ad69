package ingest

import (
	"context"
	"net"
	"sync"
	"time"

	"golang.org/x/sync/semaphore"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/plumbline/plumbline/internal/identity"
)

// Admission bounds what incoming calls can cost the server, for every
// method of the gRPC server, before gRPC reads their messages.
//
// gRPC reads a unary call's whole message and decodes it before any
// interceptor runs, so the bounds sit earlier, in the two hooks gRPC calls
// before the read:
//
//   - the tap handle (grpc.InTapHandle), when a call's headers arrive, on
//     the connection's reader. The call's rule (methodRules; a method it
//     does not name gets defaultRule) says who it counts against: the
//     identity of the connection's certificate, or, for the public
//     enrollment methods, the caller's address. A call of a method that
//     needs a certificate, made without one, is refused here
//     (Unauthenticated). Then the key's rate limit, its cap on
//     long-polls (MaxLongPolls), the server's cap on reports in progress
//     (MaxPendingReports) and the key's in-flight budget
//     (MaxAgentInflightBytes: the call reserves MaxRecvMsgSize of it).
//     Every refusal here happens before a byte of the message is read,
//     and nothing blocks the connection;
//   - the stats handler's Begin event, on the call's own goroutine just
//     before the read: the call waits (until its deadline) for
//     MaxRecvMsgSize bytes of its pool: MaxInflightBytes for calls with a
//     certificate, MaxAnonymousInflightBytes for calls without one, so
//     anonymous callers cannot starve agents.
//
// Once the message is read and decoded (the InPayload event), both
// reservations shrink to the message's real size; they are given back
// when the call ends. Until a call is admitted, gRPC buffers at most its
// stream's flow control window for it (NewGRPCServer fixes the window,
// so it cannot grow), and a connection carries at most
// MaxConcurrentStreams calls. The method's own message limit
// (methodRule.maxMsg) is checked before decoding (sizeCodec).
//
// Refusals for the caller's own limits are ResourceExhausted, the
// server's overload Unavailable; both carry a RetryInfo detail with the
// wait the server asks for.
type admission struct {
	reserve      int64 // per call before its read: MaxRecvMsgSize
	keyBudget    int64
	maxLongPolls int
	maxPending   int
	busyRetry    time.Duration
	readTimeout  time.Duration // 0: none
	insecure     bool
	rules        map[string]methodRule
	lim          [rateFamilies]*limiters // nil: no limit of that family
	// public methods may be called without a certificate; they count
	// against the caller's host ("peer <ip>").
	public map[string]bool

	agents, anon *semaphore.Weighted
	stats        admissionStats

	mu      sync.Mutex
	held    map[string]int64 // reserved bytes by key
	pollsBy map[string]int   // long-polls by key
	pending int              // calls with backpressure in progress
	// took is a moving average of how long calls with backpressure
	// last (from admission to answer): the wait a refused one is asked
	// for, when longer than busyRetry.
	took time.Duration
}

// admissionLimits are admission's bounds (from Options).
type admissionLimits struct {
	reserve, keyBudget, agentPool, anonPool int64
	maxLongPolls, maxPending                int
	busyRetry, readTimeout                  time.Duration
	insecure                                bool
	public                                  []string
	lim                                     [rateFamilies]*limiters
}

func newAdmission(l admissionLimits) *admission {
	a := &admission{
		reserve: l.reserve, keyBudget: max(l.keyBudget, l.reserve), maxLongPolls: l.maxLongPolls, maxPending: l.maxPending,
		busyRetry: l.busyRetry, readTimeout: l.readTimeout, insecure: l.insecure, rules: methodRules(), lim: l.lim, public: map[string]bool{},
		agents: semaphore.NewWeighted(max(l.agentPool, l.reserve)), anon: semaphore.NewWeighted(max(l.anonPool, l.reserve)),
		held: map[string]int64{}, pollsBy: map[string]int{},
	}
	for _, m := range l.public {
		a.public[m] = true
	}
	return a
}

// maxBusyRetry caps the wait a refusal at capacity asks for.
const maxBusyRetry = time.Minute

type callKey struct{}

// call is one admitted call's reservations.
type call struct {
	a      *admission
	method string
	key    string // "" (insecure, no identity): no per-key bounds
	pool   *semaphore.Weighted
	poll   bool // holds a long-poll slot of key
	busy   bool // holds a slot of the server's pending calls
	start  time.Time
	// readTimer cancels the call when its message is late (stopped once
	// it is read).
	readTimer *time.Timer

	mu       sync.Mutex
	keyHeld  int64
	poolHeld int64
	done     bool
}

// label is method as the metrics name it: a method without a rule is
// "unknown" (a caller chooses the name it sends).
func (a *admission) label(method string) string {
	if _, ok := a.rules[method]; ok {
		return method
	}
	return "unknown"
}

// certIdentity is the identity of the connection's verified certificate
// ("" when it has none, or it names none).
func certIdentity(ctx context.Context) string {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return ""
	}
	if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok && len(ti.State.VerifiedChains) > 0 && len(ti.State.VerifiedChains[0]) > 0 {
		if id, err := identity.FromCertificate(ti.State.VerifiedChains[0][0]); err == nil {
			return id
		}
	}
	return ""
}

// tap is the grpc.InTapHandle. It runs on the connection's reader with
// the transport's lock held: it must not block.
func (a *admission) tap(ctx context.Context, info *tap.Info) (context.Context, error) {
	m := a.label(info.FullMethodName)
	r, ok := a.rules[m]
	if !ok {
		r = defaultRule
	}
	key, pool := "", a.agents
	id := certIdentity(ctx)
	anonymous := id == "" && a.public[info.FullMethodName]
	switch {
	case anonymous:
		key, pool = peerHostKey(ctx), a.anon
	case r.key == byAddress && id != "":
		key = peerHostKey(ctx)
	case id != "":
		key = id
	case !a.insecure:
		// No identity (a connection without a certificate, allowed for
		// the public methods only): refused before its message is read.
		_, _, err := peerIdentity(ctx)
		a.stats.refuse(m, reasonUnauthenticated)
		return nil, status.Errorf(codes.Unauthenticated, "%s: %v", m, err)
	}
	// key "" (insecure: no identity before the message is decoded; the
	// interceptor applies the rate limit): only the server-wide bounds.
	if lim := a.lim[r.rate]; lim != nil && key != "" {
		if ok, wait := lim.allowWait(key); !ok {
			a.stats.refuse(m, reasonRate)
			return nil, retryError(codes.ResourceExhausted, wait, "%s: %s: rate limit of %g calls/s (burst %d) exceeded; retry in %s",
				m, key, float64(lim.r), lim.burst, wait.Round(time.Millisecond))
		}
	}
	c := &call{a: a, method: m, key: key, pool: pool}
	if err := a.hold(c, r); err != nil {
		return nil, err
	}
	ctx = context.WithValue(ctx, callKey{}, c)
	// The stream's context ends with the stream, whatever happened to it
	// (the stats handler's End event is the early path).
	context.AfterFunc(ctx, c.release)
	if a.readTimeout > 0 {
		// A call whose message has not arrived within readTimeout of its
		// admission gives its reservations back: a caller that announces
		// a message and never sends it cannot hold them (this context is
		// the stream's: cancelling it ends the read).
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		c.readTimer = time.AfterFunc(a.readTimeout, func() {
			a.stats.refuse(c.method, reasonSlow)
			cancel()
		})
		context.AfterFunc(ctx, func() { c.readTimer.Stop() })
	}
	return ctx, nil
}

// hold takes the call's long-poll slot, pending slot and key budget, all
// or none.
func (a *admission) hold(c *call, r methodRule) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if r.longPoll && c.key != "" && a.pollsBy[c.key] >= a.maxLongPolls {
		a.stats.refuse(c.method, reasonLongPolls)
		return retryError(codes.ResourceExhausted, a.busyRetry, "%s: %s already has %d calls waiting for news, the most one caller may have", c.method, c.key, a.maxLongPolls)
	}
	if r.backpressure && a.maxPending > 0 && a.pending >= a.maxPending {
		a.stats.refuse(c.method, reasonBusy)
		wait := max(a.busyRetry, min(a.took, maxBusyRetry).Round(time.Millisecond))
		return retryError(codes.Unavailable, wait, "%s: the server is at capacity (%d calls in progress, each taking about %s); keep the records and retry in %s",
			c.method, a.pending, a.took.Round(time.Millisecond), wait)
	}
	if c.key != "" {
		held := a.held[c.key]
		if held+a.reserve > a.keyBudget {
			a.stats.refuse(c.method, reasonInflight)
			return retryError(codes.ResourceExhausted, a.busyRetry,
				"%s: %s: %d bytes of calls already in flight, each call reserves up to the %d-byte message limit and one caller may have %d bytes in flight; retry later",
				c.method, c.key, held, a.reserve, a.keyBudget)
		}
		a.held[c.key] = held + a.reserve
		c.keyHeld = a.reserve
	}
	if r.longPoll && c.key != "" {
		a.pollsBy[c.key]++
		c.poll = true
	}
	if r.backpressure {
		a.pending++
		c.busy, c.start = true, time.Now()
	}
	a.stats.admit(c.method)
	return nil
}

// retryError is a status of code with a RetryInfo detail asking the
// caller to wait at least wait.
func retryError(code codes.Code, wait time.Duration, format string, args ...any) error {
	st := status.Newf(code, format, args...)
	if d, err := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(wait)}); err == nil {
		st = d
	}
	return st.Err()
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

// begin waits for the call's share of its pool.
func (c *call) begin(ctx context.Context) {
	if err := c.pool.Acquire(ctx, c.a.reserve); err != nil {
		return // the call is over (cancelled or past its deadline): its read fails
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done {
		c.pool.Release(c.a.reserve)
		return
	}
	c.poolHeld = c.a.reserve
}

// received shrinks both reservations to the decoded message's size n.
func (c *call) received(n int64) {
	n = max(n, 1)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done {
		return
	}
	if d := c.poolHeld - n; c.poolHeld > 0 && d > 0 {
		c.pool.Release(d)
		c.poolHeld = n
	}
	if d := c.keyHeld - n; d > 0 {
		c.a.mu.Lock()
		c.a.held[c.key] -= d
		c.a.mu.Unlock()
		c.keyHeld = n
	}
}

// release gives every reservation back (once).
func (c *call) release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done {
		return
	}
	c.done = true
	if c.poolHeld > 0 {
		c.pool.Release(c.poolHeld)
		c.poolHeld = 0
	}
	a := c.a
	a.mu.Lock()
	defer a.mu.Unlock()
	if c.keyHeld > 0 {
		if left := a.held[c.key] - c.keyHeld; left > 0 {
			a.held[c.key] = left
		} else {
			delete(a.held, c.key)
		}
		c.keyHeld = 0
	}
	if c.poll {
		if a.pollsBy[c.key]--; a.pollsBy[c.key] <= 0 {
			delete(a.pollsBy, c.key)
		}
	}
	if c.busy {
		a.pending--
		// The average over about the last 10 calls.
		a.took += (time.Since(c.start) - a.took) / 10
	}
}

// agentInflight is the bytes key has reserved (for tests).
func (a *admission) agentInflight(key string) int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.held[key]
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
		if c.readTimer != nil {
			c.readTimer.Stop()
		}
		c.a.stats.read(int64(s.WireLength))
		c.received(int64(s.Length))
	case *stats.End:
		c.release()
	}
}

// polls is key's long-polls in progress (tests).
func (a *admission) polls(key string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.pollsBy[key]
}

// pendingReports is the calls with backpressure in progress.
func (a *admission) pendingReports() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.pending
}
