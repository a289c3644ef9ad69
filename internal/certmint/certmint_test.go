package certmint

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/plumbline/plumbline/internal/identity"
)

// A minted CA signs leaves that verify against it, for their usage, never
// outliving it; the minted key matches the certificate.
func TestIssueVerifies(t *testing.T) {
	t.Parallel()
	now := time.Now()
	ca, err := CA(pkix.Name{CommonName: "test CA"}, now, 48*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if !ca.Cert.IsCA || !ca.Cert.MaxPathLenZero || !ca.Cert.NotBefore.Equal(now.Add(-Backdate).Truncate(time.Second)) {
		t.Errorf("CA = IsCA %v, MaxPathLenZero %v, NotBefore %s: want a leaf-only CA valid from now-%s", ca.Cert.IsCA, ca.Cert.MaxPathLenZero, ca.Cert.NotBefore, Backdate)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	for _, tc := range []struct {
		name     string
		tmpl     *x509.Certificate
		usage    x509.ExtKeyUsage
		validity time.Duration
	}{
		{"server", ServerTemplate("db.example", "Plumbline", []string{"db.example", "127.0.0.1"}, []net.IP{net.IPv6loopback}), x509.ExtKeyUsageServerAuth, time.Hour},
		{"agent outliving the CA", AgentTemplate("db-01"), x509.ExtKeyUsageClientAuth, 1000 * time.Hour},
	} {
		m, err := Issue(ca.Cert, ca.Key, tc.tmpl, now, tc.validity)
		if err != nil {
			t.Fatalf("%s: Issue: %v", tc.name, err)
		}
		if _, err := m.Cert.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{tc.usage}}); err != nil {
			t.Errorf("%s: Verify = %v", tc.name, err)
		}
		if want := earlier(now.Add(tc.validity), ca.Cert.NotAfter).Truncate(time.Second); !m.Cert.NotAfter.Equal(want) {
			t.Errorf("%s: NotAfter = %s, want %s", tc.name, m.Cert.NotAfter, want)
		}
		if _, err := tls.X509KeyPair(m.CertPEM, m.KeyPEM); err != nil {
			t.Errorf("%s: the PEM pair does not load: %v", tc.name, err)
		}
	}
	srv, _ := Issue(ca.Cert, ca.Key, ServerTemplate("db.example", "Plumbline", []string{"db.example", "127.0.0.1"}, []net.IP{net.IPv6loopback}), now, time.Hour)
	if !slices.Equal(srv.Cert.DNSNames, []string{"db.example"}) || len(srv.Cert.IPAddresses) != 2 {
		t.Errorf("server names = %v, IPs %v: want db.example; ::1 and 127.0.0.1", srv.Cert.DNSNames, srv.Cert.IPAddresses)
	}
	agent, _ := Issue(ca.Cert, ca.Key, AgentTemplate("db-01"), now, time.Hour)
	if id, err := identity.FromCertificate(agent.Cert); err != nil || id != "db-01" {
		t.Errorf("identity.FromCertificate(agent) = %q, %v: want db-01", id, err)
	}
}

func earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
