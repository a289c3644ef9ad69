// Package authority is the server's side of enrollment (issue 14 §1,
// docs/install.md, "Enrollment"): it serves plumbline.v1.EnrollmentService on the
// gRPC port, signs agent certificates with the server's CA (the dev CA of
// `server --dev`, or an intermediate the operator provides), keeps join
// tokens and enrolled agents in the store, and refuses the certificates of
// revoked agents at the TLS handshake (VerifyConnection) and on every call
// (Authorize).
//
// An agent certificate carries the identity twice, as identity.FromCertificate
// reads it: subject CN and URI SAN plumbline://agent/<id>. Bring-your-own
// PKI keeps working: a certificate whose identity this server never
// enrolled is none of the authority's business.
package authority

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"os"
	"time"

	"golang.org/x/time/rate"

	"github.com/plumbline/plumbline/internal/certmint"
	"github.com/plumbline/plumbline/internal/enroll"
	"github.com/plumbline/plumbline/internal/server/store"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// DefaultCertTTL is the lifetime of an enrolled agent's certificate.
const DefaultCertTTL = 30 * 24 * time.Hour

// Files are the PEM files the authority works from.
type Files struct {
	// CACert and CAKey are the CA that signs agent certificates: a root,
	// or an intermediate (CACert may hold its chain after it).
	CACert, CAKey string
	// TrustBundle holds the CA certificates agents trust for the server
	// (GetTrustBundle; the agent writes the pinned one to ca.crt).
	TrustBundle string
	// ServerCert is the server's certificate (and chain): it must chain to
	// a CA of TrustBundle, whose pin `server token create` prints.
	ServerCert string
	// ClientCA is the server's grpc.tls.client_ca_file: it must accept the
	// certificates the authority issues.
	ClientCA string
}

// Options tune an Authority. Zero values mean the defaults.
type Options struct {
	// CertTTL is the lifetime of issued certificates (default 30 days).
	CertTTL time.Duration
	// Rate and Burst bound enrollment and renewal calls, server-wide
	// (default 5/s, burst 50), each method its own bucket.
	Rate  float64
	Burst int
	// CacheTTL is how long a looked-up enrollment (revoked or not) is
	// trusted before the store is asked again (default 10s): a revocation
	// on another replica or by `server agent revoke` takes at most this
	// long to be refused.
	CacheTTL time.Duration
	Logger   *slog.Logger
	Now      func() time.Time
}

func (o Options) withDefaults() Options {
	if o.CertTTL <= 0 {
		o.CertTTL = DefaultCertTTL
	}
	if o.Rate <= 0 {
		o.Rate = 5
	}
	if o.Burst <= 0 {
		o.Burst = 50
	}
	if o.CacheTTL <= 0 {
		o.CacheTTL = 10 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// CA is the signing CA and what agents are told to trust.
type CA struct {
	cert      *x509.Certificate
	key       crypto.Signer
	chainTail []byte // PEM of CACert's certificates that are not roots, sent after each leaf
	bundle    []byte // TrustBundle's PEM
	pin       string // of the bundle CA the server certificate chains to
}

// LoadCA reads and cross-checks the files: the CA can sign, the client CA
// accepts what it signs, the server certificate chains to the bundle.
func LoadCA(f Files) (*CA, error) {
	certPEM, err := os.ReadFile(f.CACert)
	if err != nil {
		return nil, fmt.Errorf("enrollment CA: %w", err)
	}
	keyPEM, err := os.ReadFile(f.CAKey)
	if err != nil {
		return nil, fmt.Errorf("enrollment CA key: %w", err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("enrollment CA %s and key %s: %w", f.CACert, f.CAKey, err)
	}
	certs, err := enroll.ParseCertsPEM(certPEM)
	if err != nil {
		return nil, fmt.Errorf("enrollment CA %s: %w", f.CACert, err)
	}
	ca := &CA{cert: certs[0]}
	if ca.key, _ = pair.PrivateKey.(crypto.Signer); ca.key == nil {
		return nil, fmt.Errorf("enrollment CA key %s cannot sign", f.CAKey)
	}
	if !ca.cert.IsCA || ca.cert.KeyUsage != 0 && ca.cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		return nil, fmt.Errorf("enrollment CA %s (%s) is not a CA certificate that may sign certificates", f.CACert, ca.cert.Subject)
	}
	inter := x509.NewCertPool()
	for _, c := range certs {
		if !selfSigned(c) {
			ca.chainTail = append(ca.chainTail, certmint.EncodeCert(c.Raw)...)
			inter.AddCert(c)
		}
	}
	if err := checkClientCA(ca.cert, inter, f.ClientCA); err != nil {
		return nil, err
	}
	if ca.bundle, ca.pin, err = bundlePin(f.TrustBundle, f.ServerCert); err != nil {
		return nil, err
	}
	return ca, nil
}

// Pin is the CA pin agents enroll with (sha256:...).
func (ca *CA) Pin() string { return ca.pin }

func selfSigned(c *x509.Certificate) bool {
	return c.CheckSignatureFrom(c) == nil && string(c.RawIssuer) == string(c.RawSubject)
}

// checkClientCA: the certificates this CA issues must pass the server's own
// client-certificate check.
func checkClientCA(ca *x509.Certificate, inter *x509.CertPool, clientCAFile string) error {
	b, err := os.ReadFile(clientCAFile)
	if err != nil {
		return fmt.Errorf("client CA: %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(b) {
		return fmt.Errorf("client CA %s holds no PEM certificate", clientCAFile)
	}
	if _, err := ca.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		return fmt.Errorf("the enrollment CA (%s) is not trusted by grpc.tls.client_ca_file %s, so the server would refuse the certificates it issues: %w", ca.Subject, clientCAFile, err)
	}
	return nil
}

// bundlePin reads the trust bundle and returns it with the pin of the CA
// the server certificate chains to.
func bundlePin(bundleFile, serverCertFile string) ([]byte, string, error) {
	bundle, err := os.ReadFile(bundleFile)
	if err != nil {
		return nil, "", fmt.Errorf("enrollment trust bundle: %w", err)
	}
	cas, err := enroll.ParseCertsPEM(bundle)
	if err != nil {
		return nil, "", fmt.Errorf("enrollment trust bundle %s: %w", bundleFile, err)
	}
	srvPEM, err := os.ReadFile(serverCertFile)
	if err != nil {
		return nil, "", fmt.Errorf("server certificate: %w", err)
	}
	chain, err := enroll.ParseCertsPEM(srvPEM)
	if err != nil {
		return nil, "", fmt.Errorf("server certificate %s: %w", serverCertFile, err)
	}
	roots, inter := x509.NewCertPool(), x509.NewCertPool()
	for _, c := range cas {
		roots.AddCert(c)
	}
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	verified, err := chain[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	if err != nil {
		return nil, "", fmt.Errorf("the server certificate %s does not chain to the enrollment trust bundle %s, so enrolling agents could not verify this server: %w", serverCertFile, bundleFile, err)
	}
	anchor := verified[0][len(verified[0])-1]
	return bundle, enroll.Pin(anchor), nil
}

// maxCSRBytes bounds a certificate signing request.
const maxCSRBytes = 8 << 10

// parseCSR checks a CSR's size, signature and key, and returns its key.
func parseCSR(der []byte) (crypto.PublicKey, error) {
	if len(der) == 0 || len(der) > maxCSRBytes {
		return nil, fmt.Errorf("certificate signing request of %d bytes: want 1 to %d", len(der), maxCSRBytes)
	}
	csr, err := x509.ParseCertificateRequest(der)
	if err != nil {
		return nil, fmt.Errorf("certificate signing request: %w", err)
	}
	if err := csr.CheckSignature(); err != nil {
		return nil, fmt.Errorf("certificate signing request: %w", err)
	}
	switch k := csr.PublicKey.(type) {
	case *ecdsa.PublicKey:
		if k.Curve != elliptic.P256() && k.Curve != elliptic.P384() {
			return nil, errors.New("certificate signing request: ECDSA key on another curve than P-256 or P-384")
		}
	case ed25519.PublicKey:
	case *rsa.PublicKey:
		if n := k.N.BitLen(); n < 2048 || n > 8192 {
			return nil, fmt.Errorf("certificate signing request: RSA key of %d bits: want 2048 to 8192", n)
		}
	default:
		return nil, fmt.Errorf("certificate signing request: %T keys are not accepted", k)
	}
	return csr.PublicKey, nil
}

// serialText is how the store keeps a serial.
func serialText(n *big.Int) string { return n.Text(16) }

// issue signs a client certificate for agentID's key, valid from a little
// before now (clock skew: a tenth of ttl, at most 5m) for ttl, and returns
// it as PEM with the CA's chain after it.
func (ca *CA) issue(agentID string, pub crypto.PublicKey, serial *big.Int, now time.Time, ttl time.Duration) ([]byte, *x509.Certificate, error) {
	tmpl := certmint.AgentTemplate(agentID)
	tmpl.SerialNumber = serial
	tmpl.NotBefore = now.Add(-min(ttl/10, 5*time.Minute))
	tmpl.NotAfter = certmint.NotAfter(now, ttl, ca.cert)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.BasicConstraintsValid = true
	leaf, certPEM, err := certmint.Sign(tmpl, ca.cert, pub, ca.key)
	if err != nil {
		return nil, nil, fmt.Errorf("sign: %w", err)
	}
	return append(certPEM, ca.chainTail...), leaf, nil
}

// Store is what the authority needs of the server's store: join tokens,
// enrolled agents and reserved ids (*store.Store is one).
type Store interface {
	CheckJoinToken(ctx context.Context, tokenID, secretHash string) error
	EnrollAgent(ctx context.Context, e store.Enrollment) (map[string]string, error)
	RenewAgent(ctx context.Context, agentID, fromSerial, newSerial string, notAfter time.Time) error
	ReserveAgentID(ctx context.Context, r store.Reservation) (bool, error)
	agentLookup
}

// agentLookup reads one enrolled agent (the revocation cache's need).
type agentLookup interface {
	EnrolledAgent(ctx context.Context, agentID string) (store.EnrolledAgent, error)
}

var _ Store = (*store.Store)(nil)

// Authority is the enrollment service over a store.
type Authority struct {
	plumblinev1.UnimplementedEnrollmentServiceServer

	ca       *CA
	st       Store
	opts     Options
	enrollRL *rate.Limiter
	renewRL  *rate.Limiter
	cache    *agentCache
	revoked  *revokedRefusals
	foreign  foreignIDs // ids reserved as another CA's (reserve.go)
}

// New is an Authority signing with ca over st.
func New(ca *CA, st Store, opts Options) *Authority {
	opts = opts.withDefaults()
	return &Authority{
		ca: ca, st: st, opts: opts,
		enrollRL: rate.NewLimiter(rate.Limit(opts.Rate), opts.Burst),
		renewRL:  rate.NewLimiter(rate.Limit(opts.Rate), opts.Burst),
		cache:    newAgentCache(st, opts.CacheTTL, opts.Now, opts.Logger),
		revoked:  newRevokedRefusals(),
	}
}

// Pin is the CA pin agents enroll with.
func (a *Authority) Pin() string { return a.ca.pin }
