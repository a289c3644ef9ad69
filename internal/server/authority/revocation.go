package authority

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/plumbline/plumbline/internal/enroll"
	"github.com/plumbline/plumbline/internal/identity"
	"github.com/plumbline/plumbline/internal/server/store"
)

// Authorize refuses a call made with a client certificate the authority
// no longer accepts: expired (a connection outlives its certificate's
// validity, which TLS checks only at the handshake), or of an enrolled
// agent that was revoked or renewed since (only the current certificate
// and the one before it are accepted). A certificate naming an identity
// this server never enrolled (bring-your-own PKI) passes. It is
// ingest.Options.Authorize.
func (a *Authority) Authorize(ctx context.Context, agentID string, cert *x509.Certificate) error {
	if now := a.opts.Now(); now.After(cert.NotAfter) {
		return status.Errorf(codes.Unauthenticated, "client certificate of agent %q expired at %s: reconnect with the renewed certificate", agentID, cert.NotAfter.UTC().Format(time.RFC3339))
	}
	e, err := a.cache.get(ctx, agentID)
	if err != nil {
		// Logged and counted by the cache (lookupHealth).
		return status.Error(codes.Unavailable, "enrollment lookup: store unavailable; retry later")
	}
	if !e.enrolled {
		return nil
	}
	if err := e.agent.Accepts(serialText(cert.SerialNumber)); err != nil {
		if errors.Is(err, store.ErrAgentRevoked) {
			return a.refuseRevoked(ctx, agentID, err)
		}
		return status.Error(codes.PermissionDenied, err.Error())
	}
	a.revoked.accepted(agentID)
	return nil
}

// VerifyConnection is for the gRPC listener's tls.Config: it refuses the
// handshake of a superseded enrolled agent's certificate (the calls of
// connections made before are refused by Authorize). A revoked agent's
// handshake passes, as one without a certificate does: each of its calls
// is then refused by Authorize with the revocation status (RevokedError)
// that the agent recognises, and the server logs it; a refused handshake
// would tell the agent only "bad certificate". A connection without a
// verified certificate passes here: only the public enrollment methods
// will answer it.
func (a *Authority) VerifyConnection(cs tls.ConnectionState) error {
	if len(cs.VerifiedChains) == 0 || len(cs.VerifiedChains[0]) == 0 {
		return nil
	}
	leaf := cs.VerifiedChains[0][0]
	id, err := identity.FromCertificate(leaf)
	if err != nil {
		return nil // the calls are refused with the reason
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	e, err := a.cache.get(ctx, id)
	if err != nil {
		return fmt.Errorf("enrollment lookup of agent %q: %w", id, err)
	}
	if e.enrolled {
		if err := e.agent.Accepts(serialText(leaf.SerialNumber)); !errors.Is(err, store.ErrAgentRevoked) {
			return err
		}
	}
	a.noteForeign(ctx, id, leaf)
	return nil
}

// agentCache holds looked-up enrollments for ttl. Bounded: past
// maxCacheEntries it starts again empty.
type agentCache struct {
	st     agentLookup
	ttl    time.Duration
	now    func() time.Time
	health *lookupHealth

	mu sync.Mutex
	m  map[string]cacheEntry
}

const maxCacheEntries = 100_000

type cacheEntry struct {
	agent    store.EnrolledAgent
	enrolled bool
	at       time.Time
}

func newAgentCache(st agentLookup, ttl time.Duration, now func() time.Time, logger *slog.Logger) *agentCache {
	return &agentCache{st: st, ttl: ttl, now: now, m: map[string]cacheEntry{}, health: &lookupHealth{logger: logger, now: now}}
}

func (c *agentCache) get(ctx context.Context, id string) (cacheEntry, error) {
	now := c.now()
	c.mu.Lock()
	e, ok := c.m[id]
	c.mu.Unlock()
	if ok && now.Sub(e.at) < c.ttl {
		return e, nil
	}
	a, err := c.st.EnrolledAgent(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotEnrolled):
		e = cacheEntry{at: now}
	case err != nil:
		if ctx.Err() == nil {
			c.health.failed(id, err)
		}
		return e, err
	default:
		e = cacheEntry{agent: a, enrolled: true, at: now}
	}
	c.health.succeeded()
	c.mu.Lock()
	if len(c.m) >= maxCacheEntries {
		c.m = map[string]cacheEntry{}
	}
	c.m[id] = e
	c.mu.Unlock()
	return e, nil
}

// forget drops id's entry (this replica changed it).
func (c *agentCache) forget(id string) {
	c.mu.Lock()
	delete(c.m, id)
	c.mu.Unlock()
}

// revokedLogEvery is how often a revoked agent that keeps calling is
// logged again (its first refusal is logged at once).
const revokedLogEvery = time.Hour

// revokedRefusals counts the calls refused for revocation and remembers
// when each agent's refusal was last logged: one log line per agent per
// episode (until it is accepted again), repeated hourly while it lasts.
type revokedRefusals struct {
	total prometheus.Counter

	mu     sync.Mutex
	logged map[string]time.Time
}

func newRevokedRefusals() *revokedRefusals {
	return &revokedRefusals{
		total: prometheus.NewCounter(prometheus.CounterOpts{Name: "plumbline_enrollment_revoked_refusals_total",
			Help: "Agent calls refused because the agent's enrollment was revoked (server agent revoke); the server logs each such agent once an hour."}),
		logged: map[string]time.Time{},
	}
}

// due says whether id's refusal is to be logged now, and notes it.
func (r *revokedRefusals) due(id string, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if last, ok := r.logged[id]; ok && now.Sub(last) < revokedLogEvery {
		return false
	}
	if len(r.logged) >= maxCacheEntries {
		r.logged = map[string]time.Time{}
	}
	r.logged[id] = now
	return true
}

// accepted ends id's episode.
func (r *revokedRefusals) accepted(id string) {
	r.mu.Lock()
	delete(r.logged, id)
	r.mu.Unlock()
}

// refuseRevoked counts, logs (rate-limited) and returns the refusal of a
// revoked agent's call.
func (a *Authority) refuseRevoked(ctx context.Context, id string, reason error) error {
	a.revoked.total.Inc()
	if a.revoked.due(id, a.opts.Now()) {
		a.opts.Logger.Warn("refused a revoked agent: its certificate is no longer accepted; stop it, or enroll its host again with a new join token (agent enroll)",
			"agent", id, "reason", reason, "peer", peerAddr(ctx), "logged_again_in", revokedLogEvery)
	}
	return enroll.RevokedError(fmt.Sprintf("%v: this agent's enrollment was revoked (server agent revoke); enroll this host again with a new join token (agent enroll), then restart the agent", reason))
}

// Collector is the authority's metrics (prometheus.Collector).
func (a *Authority) Collector() prometheus.Collector { return a.revoked.total }
