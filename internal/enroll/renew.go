package enroll

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/plumbline/plumbline/internal/ctxtime"
	"github.com/plumbline/plumbline/internal/identity"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// Renewer is the agent's client certificate. It gives every TLS handshake
// the current pair (tls.Config.GetClientCertificate), re-reading the files
// when they change (a bring-your-own PKI's tooling replacing them), and
// Run renews it over the agent's own connection at two thirds of its
// lifetime: a new key, a CSR, the files replaced (writePair), the pair
// swapped, and the connections made with the old certificate closed so
// that gRPC reconnects with the new one. No restart.
type Renewer struct {
	certFile, keyFile string
	log               *slog.Logger

	mu    sync.Mutex
	pair  *tls.Certificate
	stamp [2]fileStamp
	conns map[net.Conn]struct{}

	renewals *prometheus.CounterVec // result: ok, error
}

// Collectors are the Renewer's metrics, for the agent's /metrics:
// plumbline_agent_client_certificate_expiry_timestamp_seconds (alert well
// before it: renewal starts at two thirds of the lifetime) and
// plumbline_agent_client_certificate_renewals_total{result="ok"|"error"}.
func (r *Renewer) Collectors() []prometheus.Collector {
	return []prometheus.Collector{
		r.renewals,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "plumbline_agent_client_certificate_expiry_timestamp_seconds",
			Help: "When the agent's client certificate expires (Unix time); renewal starts at two thirds of its lifetime.",
		}, func() float64 { return float64(r.Leaf().NotAfter.Unix()) }),
	}
}

type fileStamp struct {
	mod  time.Time
	size int64
}

func stampOf(path string) (fileStamp, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{}, err
	}
	return fileStamp{fi.ModTime(), fi.Size()}, nil
}

// NewRenewer loads the pair (LoadKeyPair).
func NewRenewer(certFile, keyFile string, logger *slog.Logger) (*Renewer, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	r := &Renewer{certFile: certFile, keyFile: keyFile, log: logger, conns: map[net.Conn]struct{}{},
		renewals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "plumbline_agent_client_certificate_renewals_total",
			Help: "Client certificate renewals over the agent's connection, by result: ok, error.",
		}, []string{"result"})}
	r.renewals.WithLabelValues("ok")
	r.renewals.WithLabelValues("error")
	if _, err := r.current(); err != nil {
		return nil, err
	}
	return r, nil
}

// current is the pair, re-read when a file changed since the last read;
// the last good pair stays when a read fails (a file half-replaced).
func (r *Renewer) current() (*tls.Certificate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	cs, cerr := stampOf(r.certFile)
	ks, kerr := stampOf(r.keyFile)
	if r.pair != nil && (cerr != nil || kerr != nil || r.stamp == [2]fileStamp{cs, ks}) {
		return r.pair, nil
	}
	pair, err := LoadKeyPair(r.certFile, r.keyFile)
	if err == nil && pair.Leaf == nil {
		pair.Leaf, err = x509.ParseCertificate(pair.Certificate[0])
	}
	if err != nil {
		if r.pair != nil {
			return r.pair, nil
		}
		return nil, fmt.Errorf("client certificate: %w", err)
	}
	r.pair, r.stamp = &pair, [2]fileStamp{cs, ks}
	return r.pair, nil
}

// GetClientCertificate is for tls.Config.GetClientCertificate.
func (r *Renewer) GetClientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	return r.current()
}

// Leaf is the current certificate.
func (r *Renewer) Leaf() *x509.Certificate {
	p, _ := r.current() // never nil after NewRenewer
	return p.Leaf
}

// DialOption makes gRPC dial through the Renewer, which then knows the
// connections to close once it has renewed.
func (r *Renewer) DialOption() grpc.DialOption {
	return grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		tc := &trackedConn{Conn: c, r: r}
		r.mu.Lock()
		r.conns[tc] = struct{}{}
		r.mu.Unlock()
		return tc, nil
	})
}

type trackedConn struct {
	net.Conn
	r    *Renewer
	once sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.r.mu.Lock()
		delete(c.r.conns, c)
		c.r.mu.Unlock()
	})
	return c.Conn.Close()
}

// closeConns closes every connection dialled through DialOption.
func (r *Renewer) closeConns() int {
	r.mu.Lock()
	conns := make([]net.Conn, 0, len(r.conns))
	for c := range r.conns {
		conns = append(conns, c)
	}
	r.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
	return len(conns)
}

// RenewAt is when a certificate is due for renewal: two thirds into its
// lifetime.
func RenewAt(c *x509.Certificate) time.Time {
	return c.NotBefore.Add(c.NotAfter.Sub(c.NotBefore) * 2 / 3)
}

// retryDelay is the wait after a failed renewal: a tenth of the time left,
// from 1s to 5m.
func retryDelay(c *x509.Certificate, now time.Time) time.Duration {
	return min(max(c.NotAfter.Sub(now)/10, time.Second), 5*time.Minute)
}

// Run renews the certificate when due, over conn, until ctx ends. It stops
// early when the server will not renew it: an agent this server has no
// enrollment record for (bring-your-own PKI: renew it out of band; Run
// keeps picking up replaced files anyway) or a revoked agent.
func (r *Renewer) Run(ctx context.Context, conn grpc.ClientConnInterface) {
	client := plumblinev1.NewEnrollmentServiceClient(conn)
	var failed bool
	for {
		leaf := r.Leaf()
		wait := time.Until(RenewAt(leaf))
		if failed {
			wait = retryDelay(leaf, time.Now())
		}
		if ctxtime.Sleep(ctx, wait) != nil {
			return
		}
		if RenewAt(r.Leaf()).After(time.Now()) {
			failed = false
			continue // the files were replaced meanwhile
		}
		err := r.renew(ctx, client, leaf)
		failed = err != nil
		if ctx.Err() == nil {
			r.renewals.WithLabelValues(map[bool]string{true: "error", false: "ok"}[failed]).Inc()
		}
		switch code := status.Code(err); {
		case err == nil || ctx.Err() != nil:
		case code == codes.FailedPrecondition || code == codes.Unimplemented:
			r.log.Info("not renewing the client certificate: the server will not renew it (reason says why); enroll with a join token, or renew the certificate out of band (its files are re-read when replaced)", "reason", err, "not_after", leaf.NotAfter)
			return
		case code == codes.PermissionDenied:
			r.log.Error("the server refuses to renew this agent's certificate: it was revoked; enroll again with a new token", "reason", err, "not_after", leaf.NotAfter)
			return
		default:
			r.log.Warn("client certificate renewal failed; retrying", "err", err, "not_after", leaf.NotAfter, "in", retryDelay(leaf, time.Now()))
		}
	}
}

// renew is one renewal.
func (r *Renewer) renew(ctx context.Context, client plumblinev1.EnrollmentServiceClient, old *x509.Certificate) error {
	id, err := identity.FromCertificate(old)
	if err != nil {
		return err
	}
	keyPEM, csr, pub, err := newKeyAndCSR(id)
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	resp, err := client.Renew(cctx, &plumblinev1.RenewRequest{CsrDer: csr})
	if err != nil {
		return err
	}
	leaf, err := checkIssued(resp.GetCertificateChainPem(), pub)
	if err != nil {
		return err
	}
	// Under the lock: a handshake meanwhile must not see (and finish) a
	// half-done replacement.
	r.mu.Lock()
	err = writePair(r.certFile, r.keyFile, resp.GetCertificateChainPem(), keyPEM)
	r.mu.Unlock()
	if err != nil {
		return fmt.Errorf("write the renewed certificate: %w", err)
	}
	if p, err := r.current(); err != nil || !p.Leaf.Equal(leaf) {
		return errors.New("the renewed certificate did not load from its files")
	}
	n := r.closeConns()
	r.log.Info("client certificate renewed", "not_after", leaf.NotAfter, "reconnecting", n)
	return nil
}
