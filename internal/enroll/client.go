package enroll

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"path/filepath"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/plumbline/plumbline/internal/atomicfile"
	"github.com/plumbline/plumbline/internal/certmint"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// Options are what Enroll needs.
type Options struct {
	// Server is the server's gRPC address (host:port).
	Server string
	// ServerName is the name the server certificate must carry; default:
	// the host of Server.
	ServerName string
	// Token is the join token; Pin the CA pin (sha256:...).
	Token, Pin string
	// Dir receives ca.crt, agent.crt and agent.key (created 0700 when
	// missing).
	Dir string
	// AgentID is the identity asked for (default: this host's name).
	AgentID string
	// Timeout bounds each call (default 30s).
	Timeout time.Duration
}

// Result is what Enroll wrote.
type Result struct {
	AgentID                   string
	CAFile, CertFile, KeyFile string
	NotAfter                  time.Time
	Labels                    map[string]string
}

// maxTokenFileBytes bounds what ReadTokenFile reads.
const maxTokenFileBytes = 4 << 10

// ReadTokenFile reads a join token from a file (at most 4 KiB; white space
// around it ignored).
func ReadTokenFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxTokenFileBytes+1))
	if err != nil {
		return "", fmt.Errorf("token file %s: %w", path, err)
	}
	if len(b) > maxTokenFileBytes {
		return "", fmt.Errorf("token file %s: more than %d bytes; want one join token", path, maxTokenFileBytes)
	}
	t, err := ParseToken(string(b))
	if err != nil {
		return "", fmt.Errorf("token file %s: %w", path, err)
	}
	return t.String(), nil
}

// Enroll enrolls this host (see the package comment) and writes
// o.Dir/ca.crt, agent.crt and agent.key (0600). Nothing is written unless
// the server issued a certificate.
func Enroll(ctx context.Context, o Options) (Result, error) {
	tok, err := ParseToken(o.Token)
	if err != nil {
		return Result{}, err
	}
	pin, err := ParsePin(o.Pin)
	if err != nil {
		return Result{}, err
	}
	if o.AgentID == "" {
		if o.AgentID, err = os.Hostname(); err != nil {
			return Result{}, fmt.Errorf("agent id: %w", err)
		}
	}
	if o.ServerName == "" {
		if o.ServerName, _, err = net.SplitHostPort(o.Server); err != nil {
			return Result{}, fmt.Errorf("server address %q: %w", o.Server, err)
		}
	}
	if o.Timeout <= 0 {
		o.Timeout = 30 * time.Second
	}
	// The directory first: a token use is not spent on a host that
	// cannot keep the certificate.
	if err := checkDir(o.Dir); err != nil {
		return Result{}, err
	}
	ca, err := discoverCA(ctx, o, pin)
	if err != nil {
		return Result{}, err
	}
	keyPEM, csr, pub, err := newKeyAndCSR(o.AgentID)
	if err != nil {
		return Result{}, fmt.Errorf("generate key: %w", err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	conn, err := grpc.NewClient(o.Server, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{
		MinVersion: tls.VersionTLS13, RootCAs: pool, ServerName: o.ServerName,
	})))
	if err != nil {
		return Result{}, fmt.Errorf("server address %q: %w", o.Server, err)
	}
	defer conn.Close()
	cctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	resp, err := plumblinev1.NewEnrollmentServiceClient(conn).Enroll(cctx, &plumblinev1.EnrollRequest{Token: tok.String(), CsrDer: csr, AgentId: o.AgentID})
	if err != nil {
		return Result{}, refused(o.AgentID, err)
	}
	leaf, err := checkIssued(resp.GetCertificateChainPem(), pub)
	if err != nil {
		return Result{}, err
	}
	res := Result{
		AgentID: resp.GetAgentId(), NotAfter: leaf.NotAfter, Labels: maps.Clone(resp.GetLabels()),
		CAFile: filepath.Join(o.Dir, CAFile), CertFile: filepath.Join(o.Dir, CertFile), KeyFile: filepath.Join(o.Dir, KeyFile),
	}
	if err := atomicfile.Write(res.CAFile, certmint.EncodeCert(ca.Raw), 0o644); err != nil {
		return Result{}, err
	}
	if err := writePair(res.CertFile, res.KeyFile, resp.GetCertificateChainPem(), keyPEM); err != nil {
		return Result{}, err
	}
	return res, nil
}

// discoverCA asks the server for its trust bundle on a connection that
// trusts nothing yet, takes the bundle's certificate with the pin, and
// checks that the server certificate of that same connection chains to
// it (for o.ServerName): a server that cannot show a certificate from the
// pinned CA is refused before the token leaves this host.
func discoverCA(ctx context.Context, o Options, pin string) (*x509.Certificate, error) {
	conn, err := grpc.NewClient(o.Server, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{
		MinVersion: tls.VersionTLS13,
		// Verified below, against the pinned CA, before anything but this
		// call goes over the connection.
		InsecureSkipVerify: true,
	})))
	if err != nil {
		return nil, fmt.Errorf("server address %q: %w", o.Server, err)
	}
	defer conn.Close()
	cctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	var p peer.Peer
	resp, err := plumblinev1.NewEnrollmentServiceClient(conn).GetTrustBundle(cctx, &plumblinev1.GetTrustBundleRequest{}, grpc.Peer(&p))
	if err != nil {
		return nil, fmt.Errorf("ask %s for its CA: %w", o.Server, err)
	}
	ca, err := PinnedCert(resp.GetCaCertificatesPem(), pin)
	if err != nil {
		return nil, fmt.Errorf("server %s: %w", o.Server, err)
	}
	ti, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(ti.State.PeerCertificates) == 0 {
		return nil, errors.New("server presented no certificate")
	}
	if err := VerifyServer(ti.State.PeerCertificates, ca, o.ServerName); err != nil {
		return nil, fmt.Errorf("server %s: its certificate does not chain to the pinned CA: %w", o.Server, err)
	}
	return ca, nil
}

// VerifyServer checks a server's presented chain (leaf first) against
// one trusted CA, for the host name.
func VerifyServer(chain []*x509.Certificate, ca *x509.Certificate, name string) error {
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	inter := x509.NewCertPool()
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	_, err := chain[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, DNSName: name, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	return err
}

// checkDir creates dir (0700) when missing and checks a file can be
// created in it.
func checkDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("--dir: %w", err)
	}
	f, err := os.CreateTemp(dir, ".enroll-check-*")
	if err != nil {
		return fmt.Errorf("--dir: %w", err)
	}
	f.Close()
	return os.Remove(f.Name())
}

// refusal is an Enroll call the server refused: its own words, without
// gRPC's framing ("rpc error: code = ... desc = ..."); the status stays
// reachable through Unwrap (status.Code).
type refusal struct {
	id  string
	st  *status.Status
	err error
}

func (r *refusal) Error() string {
	return fmt.Sprintf("the server refused to enroll %q (%s): %s", r.id, r.st.Code(), r.st.Message())
}

func (r *refusal) Unwrap() error { return r.err }

// refused words a failed Enroll call: a refusal as the server said it,
// anything else (unreachable, timed out) as it is.
func refused(id string, err error) error {
	st, ok := status.FromError(err)
	if !ok || st.Code() == codes.Unavailable || st.Code() == codes.DeadlineExceeded || st.Code() == codes.Canceled {
		return fmt.Errorf("enroll: %w", err)
	}
	return &refusal{id: id, st: st, err: err}
}
