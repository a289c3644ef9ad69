// Package certmint mints X.509 certificates the way every Plumbline CA
// does: ECDSA P-256 keys, random 127-bit serials, a self-signed CA, leaves
// signed by a CA and valid from a little before now (clock skew) to at
// most the CA's own expiry, PEM encoding. The dev CA (devca), the
// production CA init (pki) and the enrollment authority mint through it;
// it writes no files (callers write through internal/atomicfile).
package certmint

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"time"

	"github.com/plumbline/plumbline/internal/identity"
)

// Backdate is how long before now a minted certificate becomes valid: it
// covers clock skew between the minting and the verifying host.
const Backdate = time.Hour

// Minted is a certificate with the key minted for it.
type Minted struct {
	Cert    *x509.Certificate
	CertPEM []byte
	Key     crypto.Signer
	KeyPEM  []byte
}

// NewKey is a new ECDSA P-256 key.
func NewKey() (*ecdsa.PrivateKey, error) { return ecdsa.GenerateKey(elliptic.P256(), rand.Reader) }

// Serial is a random positive 127-bit serial number.
func Serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(fmt.Sprintf("certmint: crypto/rand failed: %v", err)) // crypto/rand never fails on supported platforms
	}
	return n.Add(n, big.NewInt(1))
}

// EncodeCert is a certificate's DER as PEM.
func EncodeCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// EncodeKey is a private key as PKCS #8 PEM.
func EncodeKey(key crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// CA mints a self-signed CA certificate with a new key, valid from
// now-Backdate for validity; it signs leaves only (path length 0).
func CA(subject pkix.Name, now time.Time, validity time.Duration) (Minted, error) {
	key, err := NewKey()
	if err != nil {
		return Minted{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          Serial(),
		Subject:               subject,
		NotBefore:             now.Add(-Backdate),
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	return mint(tmpl, tmpl, key, key)
}

// Issue mints a leaf from tmpl (subject, names, extended key usage) with a
// new key, signed by ca's key caKey: a new serial, valid from
// now-Backdate for validity but never after ca expires.
func Issue(ca *x509.Certificate, caKey crypto.Signer, tmpl *x509.Certificate, now time.Time, validity time.Duration) (Minted, error) {
	key, err := NewKey()
	if err != nil {
		return Minted{}, err
	}
	tmpl.SerialNumber = Serial()
	tmpl.NotBefore = now.Add(-Backdate)
	tmpl.NotAfter = NotAfter(now, validity, ca)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.BasicConstraintsValid = true
	return mint(tmpl, ca, key, caKey)
}

// NotAfter is now+validity, but never after the CA's own expiry.
func NotAfter(now time.Time, validity time.Duration, ca *x509.Certificate) time.Time {
	if t := now.Add(validity); t.Before(ca.NotAfter) {
		return t
	}
	return ca.NotAfter
}

// mint signs tmpl's certificate for the new key with parent's signer.
func mint(tmpl, parent *x509.Certificate, key *ecdsa.PrivateKey, signer crypto.Signer) (Minted, error) {
	cert, certPEM, err := Sign(tmpl, parent, key.Public(), signer)
	if err != nil {
		return Minted{}, err
	}
	keyPEM, err := EncodeKey(key)
	if err != nil {
		return Minted{}, err
	}
	return Minted{Cert: cert, CertPEM: certPEM, Key: key, KeyPEM: keyPEM}, nil
}

// Sign signs tmpl's certificate for pub with parent's key signer, as it
// is (the caller set its serial and validity), and returns it parsed and
// as PEM.
func Sign(tmpl, parent *x509.Certificate, pub crypto.PublicKey, signer crypto.Signer) (*x509.Certificate, []byte, error) {
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, signer)
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, err
	}
	return cert, EncodeCert(der), nil
}

// ServerTemplate is a server certificate's template: common name cn,
// and each host as a DNS name or, when it parses as one, an IP address.
func ServerTemplate(cn, org string, hosts []string, ips []net.IP) *x509.Certificate {
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: cn, Organization: []string{org}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: append([]net.IP(nil), ips...),
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if h != "" {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	return tmpl
}

// AgentTemplate is an agent client certificate's template: the identity
// twice, as identity.FromCertificate reads it (subject common name and
// URI SAN plumbline://agent/<id>).
func AgentTemplate(id string) *x509.Certificate {
	return &x509.Certificate{
		Subject:     pkix.Name{CommonName: id, Organization: []string{"Plumbline agents"}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		URIs:        []*url.URL{identity.URI(id)},
	}
}
