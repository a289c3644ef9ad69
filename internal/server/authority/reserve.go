package authority

import (
	"context"
	"crypto/x509"
	"sync"

	"github.com/plumbline/plumbline/internal/server/store"
)

// maxForeignNoted bounds the ids foreignIDs remembers (past it, every
// connection of a new one writes its reservation again: the write does
// nothing for an id already reserved).
const maxForeignNoted = 100_000

// foreignIDs remembers the agent ids already reserved as seen with a
// certificate of another CA, so that each is written once per process.
type foreignIDs struct {
	mu   sync.Mutex
	seen map[string]bool
}

// noteForeign reserves id when leaf, a client certificate the listener
// verified for an agent that enrollment does not know, was not signed by
// the enrollment CA: the operator's own PKI holds the id, and a join
// token must not take it (the real agent would then be refused at the
// handshake). Failures are logged: the connection itself is not refused
// for them.
func (a *Authority) noteForeign(ctx context.Context, id string, leaf *x509.Certificate) {
	if leaf.CheckSignatureFrom(a.ca.cert) == nil {
		return // issued by enrollment (or the dev CA): not another PKI's
	}
	f := &a.foreign
	f.mu.Lock()
	if f.seen[id] {
		f.mu.Unlock()
		return
	}
	if f.seen == nil {
		f.seen = map[string]bool{}
	}
	if len(f.seen) < maxForeignNoted {
		f.seen[id] = true
	}
	f.mu.Unlock()
	added, err := a.st.ReserveAgentID(ctx, store.Reservation{AgentID: id, Source: store.ReservedByCertificate,
		Reason: "certificate issued by " + truncate(leaf.Issuer.String(), 200)})
	switch {
	case err != nil:
		f.mu.Lock()
		delete(f.seen, id)
		f.mu.Unlock()
		a.opts.Logger.Warn("enrollment: reserving an agent id seen with another CA's certificate", "agent", id, "err", err)
	case added:
		a.opts.Logger.Info("enrollment: agent id reserved: it connected with a certificate of another CA, and no join token may take it (server agent unreserve ID releases it)",
			"agent", id, "issuer", leaf.Issuer.String())
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
