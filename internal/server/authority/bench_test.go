package authority

import (
	"context"
	"crypto/x509"
	"fmt"
	"math/big"
	"path/filepath"
	"testing"
	"time"

	"github.com/plumbline/plumbline/internal/server/store"
)

// BenchmarkAuthorize is the per-call cost of the revocation check with
// enrollment on: from the cache, and from the store (SQLite) when the
// entry is older than CacheTTL (once per agent per 10 s by default).
func BenchmarkAuthorize(b *testing.B) {
	ctx := context.Background()
	st, err := store.Open(ctx, "sqlite://"+filepath.Join(b.TempDir(), "p.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	now := time.Now()
	const agents = 1000
	if err := st.CreateJoinToken(ctx, store.JoinToken{ID: "t", SecretHash: "h", MaxUses: agents, Expires: now.Add(time.Hour)}); err != nil {
		b.Fatal(err)
	}
	certs := make([]*x509.Certificate, agents)
	for i := range certs {
		serial := big.NewInt(int64(i + 1))
		id := fmt.Sprintf("agent-%d", i)
		if _, err := st.EnrollAgent(ctx, store.Enrollment{TokenID: "t", SecretHash: "h", AgentID: id, Serial: serialText(serial), NotAfter: now.Add(time.Hour)}); err != nil {
			b.Fatal(err)
		}
		certs[i] = &x509.Certificate{SerialNumber: serial, NotAfter: now.Add(time.Hour)}
	}
	for _, c := range []struct {
		name string
		ttl  time.Duration
	}{{"cached", time.Hour}, {"store", time.Nanosecond}} {
		b.Run(c.name, func(b *testing.B) {
			a := New(&CA{}, st, Options{CacheTTL: c.ttl})
			for i := 0; b.Loop(); i++ {
				if err := a.Authorize(ctx, fmt.Sprintf("agent-%d", i%agents), certs[i%agents]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
