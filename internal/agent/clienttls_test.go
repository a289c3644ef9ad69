package agent

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/plumbline/plumbline/internal/agent/config"
	"github.com/plumbline/plumbline/internal/certmint"
	"github.com/plumbline/plumbline/internal/identity"
)

// The agent reads its default id from its certificate by the server's
// rule (identity.FromCertificate): a certificate naming the agent only in
// its URI SAN gives that id, not the empty common name; one whose two
// names disagree is refused before any connection.
func TestClientTLSReadsIdentityLikeTheServer(t *testing.T) {
	t.Parallel()
	now := time.Now()
	ca, err := certmint.CA(pkix.Name{CommonName: "test CA"}, now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, cn, uri, want string
	}{
		{"URI SAN only", "", "db-9", "db-9"},
		{"both agree", "db-9", "db-9", "db-9"},
		{"common name only", "db-9", "", "db-9"},
		{"names disagree", "db-8", "db-9", ""},
	} {
		tmpl := &x509.Certificate{Subject: pkix.Name{CommonName: tc.cn}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
		if tc.uri != "" {
			tmpl.URIs = []*url.URL{identity.URI(tc.uri)}
		}
		leaf, err := certmint.Issue(ca.Cert, ca.Key, tmpl, now, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		tls := config.ClientTLS{CAFile: filepath.Join(dir, "ca.crt"), CertFile: filepath.Join(dir, "agent.crt"), KeyFile: filepath.Join(dir, "agent.key")}
		for path, b := range map[string][]byte{tls.CAFile: ca.CertPEM, tls.CertFile: leaf.CertPEM, tls.KeyFile: leaf.KeyPEM} {
			if err := os.WriteFile(path, b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		_, id, err := ClientTLS(config.Server{Address: "127.0.0.1:1", TLS: tls})
		switch {
		case tc.want == "" && err == nil:
			t.Errorf("%s: ClientTLS = id %q, want an error", tc.name, id)
		case tc.want != "" && (err != nil || id != tc.want):
			t.Errorf("%s: ClientTLS = id %q, %v; want %q", tc.name, id, err, tc.want)
		}
	}
}
