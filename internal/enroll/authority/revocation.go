package authority

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/plumbline/plumbline/internal/ingest"
	"github.com/plumbline/plumbline/internal/store"
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
		a.opts.Logger.Error("enrollment lookup failed", "agent", agentID, "err", err)
		return status.Error(codes.Unavailable, "enrollment lookup: store unavailable; retry later")
	}
	if !e.enrolled {
		return nil
	}
	if err := e.agent.Accepts(serialText(cert.SerialNumber)); err != nil {
		return status.Error(codes.PermissionDenied, err.Error())
	}
	return nil
}

// VerifyConnection is for the gRPC listener's tls.Config: it refuses the
// handshake of a revoked or superseded enrolled agent's certificate (the
// calls of connections made before are refused by Authorize). A
// connection without a verified certificate passes here: only the
// public enrollment methods will answer it.
func (a *Authority) VerifyConnection(cs tls.ConnectionState) error {
	if len(cs.VerifiedChains) == 0 || len(cs.VerifiedChains[0]) == 0 {
		return nil
	}
	leaf := cs.VerifiedChains[0][0]
	id, err := ingest.AgentIdentity(leaf)
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
		return e.agent.Accepts(serialText(leaf.SerialNumber))
	}
	a.noteForeign(ctx, id, leaf)
	return nil
}

// agentCache holds looked-up enrollments for ttl. Bounded: past
// maxCacheEntries it starts again empty.
type agentCache struct {
	st  *store.Store
	ttl time.Duration
	now func() time.Time

	mu sync.Mutex
	m  map[string]cacheEntry
}

const maxCacheEntries = 100_000

type cacheEntry struct {
	agent    store.EnrolledAgent
	enrolled bool
	at       time.Time
}

func newAgentCache(st *store.Store, ttl time.Duration, now func() time.Time) *agentCache {
	return &agentCache{st: st, ttl: ttl, now: now, m: map[string]cacheEntry{}}
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
		return e, err
	default:
		e = cacheEntry{agent: a, enrolled: true, at: now}
	}
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
