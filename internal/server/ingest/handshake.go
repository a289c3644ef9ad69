package ingest

import (
	"context"
	"log/slog"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc/credentials"
)

// handshakeLogEvery is how often one peer's refused handshakes, for one
// reason, are logged: the first at once, later ones at most once per
// period, saying how many were not logged in between.
const handshakeLogEvery = time.Minute

// maxHandshakeKeys bounds the (peer, reason) pairs remembered; beyond it
// new pairs share one key, so a scan from many addresses cannot grow the
// map or the log without bound.
const maxHandshakeKeys = 4096

// handshakeCreds are the server's transport credentials, logging every
// handshake it refuses (a client without a certificate from the agents'
// CA, an expired certificate, a client speaking something else) with the
// peer's address and the reason, rate-limited per peer and reason.
// Without it gRPC says nothing an operator sees: a misconfigured agent
// is silent on the server.
type handshakeCreds struct {
	credentials.TransportCredentials
	log *handshakeLog
}

func (c handshakeCreds) ServerHandshake(conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	out, info, err := c.TransportCredentials.ServerHandshake(conn)
	if err != nil {
		c.log.refused(conn.RemoteAddr(), err)
	}
	return out, info, err
}

func (c handshakeCreds) Clone() credentials.TransportCredentials {
	return handshakeCreds{TransportCredentials: c.TransportCredentials.Clone(), log: c.log}
}

// handshakeLog is the rate limiter of handshake log lines.
type handshakeLog struct {
	logger *slog.Logger
	now    func() time.Time

	mu   sync.Mutex
	seen map[handshakeKey]*handshakeSeen
}

type handshakeKey struct{ peer, reason string }

type handshakeSeen struct {
	logged     time.Time
	suppressed int
}

func newHandshakeLog(logger *slog.Logger, now func() time.Time) *handshakeLog {
	return &handshakeLog{logger: logger, now: now, seen: map[handshakeKey]*handshakeSeen{}}
}

func (l *handshakeLog) refused(addr net.Addr, err error) {
	peer := "unknown"
	if addr != nil {
		peer = addr.String()
		if host, _, e := net.SplitHostPort(peer); e == nil {
			peer = host // one key per host, whatever its source port
		}
	}
	reason := truncateUTF8(err.Error(), 512)
	now := l.now()
	l.mu.Lock()
	k := handshakeKey{peer, reason}
	if len(l.seen) >= maxHandshakeKeys {
		for sk, s := range l.seen {
			if now.Sub(s.logged) >= handshakeLogEvery {
				delete(l.seen, sk)
			}
		}
	}
	s := l.seen[k]
	if s == nil && len(l.seen) >= maxHandshakeKeys {
		k = handshakeKey{"many peers", "many reasons"}
		s = l.seen[k]
	}
	if s != nil && now.Sub(s.logged) < handshakeLogEvery {
		s.suppressed++
		l.mu.Unlock()
		return
	}
	suppressed := 0
	if s == nil {
		s = &handshakeSeen{}
		l.seen[k] = s
	} else {
		suppressed = s.suppressed
	}
	s.logged, s.suppressed = now, 0
	l.mu.Unlock()
	l.logger.LogAttrs(context.Background(), slog.LevelWarn, "TLS handshake refused",
		slog.String("peer", k.peer), slog.String("reason", k.reason),
		slog.Int("suppressed", suppressed), slog.Duration("suppressed_over", handshakeLogEvery))
}
