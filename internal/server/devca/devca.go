// Package devca is a small certificate authority for development and tests:
// `server --dev`, the fleet simulator and the gRPC tests mint the server's
// and the agents' certificates with it, so that every one of them runs real
// mutual TLS without an operator-provided PKI.
//
// Keys are ECDSA P-256. A CA directory holds two PEM files:
//
//	DIR/ca.crt   the CA certificate (give it to agents as server.tls.ca_file
//	             and to the server as grpc.tls.client_ca_file)
//	DIR/ca.key   the CA private key (mode 0600)
//
// Agent certificates carry the agent's identity twice, as the server reads
// it (internal/identity): the subject common name and a URI SAN
// plumbline://agent/<id>.
//
// It is not a production CA: no revocation, no key protection beyond file
// modes.
package devca

import (
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/plumbline/plumbline/internal/atomicfile"
	"github.com/plumbline/plumbline/internal/certmint"
)

// File names inside a CA directory.
const (
	CertFile = "ca.crt"
	KeyFile  = "ca.key"
)

// Validity periods.
const (
	caValidity   = 10 * 365 * 24 * time.Hour
	leafValidity = 2 * 365 * 24 * time.Hour
)

// ErrNoCA is returned by Load when the directory holds no CA.
var ErrNoCA = errors.New("no CA")

// CA is a loaded certificate authority.
type CA struct {
	Cert    *x509.Certificate
	CertPEM []byte
	key     crypto.Signer
	dir     string
}

// Leaf is a certificate the CA issued, with its private key.
type Leaf struct {
	Cert    *x509.Certificate
	CertPEM []byte
	KeyPEM  []byte
	key     crypto.Signer
}

// Create makes a new CA in dir (created with mode 0700 if missing) and
// writes DIR/ca.crt and DIR/ca.key. It refuses to overwrite an existing CA.
func Create(dir string) (*CA, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create CA: %w", err)
	}
	certPath, keyPath := filepath.Join(dir, CertFile), filepath.Join(dir, KeyFile)
	for _, p := range []string{certPath, keyPath} {
		if _, err := os.Lstat(p); err == nil {
			return nil, fmt.Errorf("create CA: %s already exists", p)
		}
	}
	host, _ := os.Hostname()
	m, err := certmint.CA(pkix.Name{CommonName: "Plumbline dev CA " + host, Organization: []string{"Plumbline dev"}}, time.Now(), caValidity)
	if err != nil {
		return nil, fmt.Errorf("create CA: %w", err)
	}
	ca := &CA{Cert: m.Cert, CertPEM: m.CertPEM, key: m.Key, dir: dir}
	if err := atomicfile.Write(keyPath, m.KeyPEM, 0o600); err != nil {
		return nil, fmt.Errorf("create CA: %w", err)
	}
	if err := atomicfile.Write(certPath, ca.CertPEM, 0o644); err != nil {
		return nil, fmt.Errorf("create CA: %w", err)
	}
	return ca, nil
}

// Load reads the CA in dir. It wraps ErrNoCA when dir holds none.
func Load(dir string) (*CA, error) {
	certPEM, err := os.ReadFile(filepath.Join(dir, CertFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("load CA from %s: %w", dir, ErrNoCA)
	}
	if err != nil {
		return nil, fmt.Errorf("load CA: %w", err)
	}
	keyPEM, err := os.ReadFile(filepath.Join(dir, KeyFile))
	if err != nil {
		return nil, fmt.Errorf("load CA: %w", err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("load CA from %s: %w", dir, err)
	}
	cert := pair.Leaf
	if cert == nil {
		if cert, err = x509.ParseCertificate(pair.Certificate[0]); err != nil {
			return nil, fmt.Errorf("load CA from %s: %w", dir, err)
		}
	}
	if !cert.IsCA {
		return nil, fmt.Errorf("load CA from %s: %s is not a CA certificate", dir, CertFile)
	}
	signer, ok := pair.PrivateKey.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("load CA from %s: key cannot sign", dir)
	}
	return &CA{Cert: cert, CertPEM: certPEM, key: signer, dir: dir}, nil
}

// LoadOrCreate loads the CA in dir, or creates one when there is none.
// created reports which happened.
func LoadOrCreate(dir string) (ca *CA, created bool, err error) {
	ca, err = Load(dir)
	if err == nil {
		return ca, false, nil
	}
	if !errors.Is(err, ErrNoCA) {
		return nil, false, err
	}
	ca, err = Create(dir)
	return ca, err == nil, err
}

// Dir is the directory the CA was created in or loaded from.
func (ca *CA) Dir() string { return ca.dir }

// CertPath is the path of the CA certificate file.
func (ca *CA) CertPath() string { return filepath.Join(ca.dir, CertFile) }

// Pool is a certificate pool holding only this CA.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// IssueServer issues a server certificate for the given host names and IP
// addresses (the first one is also the subject common name).
func (ca *CA) IssueServer(hosts ...string) (*Leaf, error) {
	if len(hosts) == 0 {
		return nil, errors.New("issue server certificate: no host names")
	}
	leaf, err := ca.issue(certmint.ServerTemplate(hosts[0], "Plumbline dev", hosts, nil))
	if err != nil {
		return nil, fmt.Errorf("issue server certificate: %w", err)
	}
	return leaf, nil
}

// IssueAgent issues a client certificate for an agent: subject CN = id and
// URI SAN plumbline://agent/<id>.
func (ca *CA) IssueAgent(id string) (*Leaf, error) {
	if id == "" {
		return nil, errors.New("issue agent certificate: empty agent id")
	}
	leaf, err := ca.issue(certmint.AgentTemplate(id))
	if err != nil {
		return nil, fmt.Errorf("issue agent certificate for %q: %w", id, err)
	}
	return leaf, nil
}

// issue mints a leaf from tmpl, valid for leafValidity.
func (ca *CA) issue(tmpl *x509.Certificate) (*Leaf, error) {
	m, err := certmint.Issue(ca.Cert, ca.key, tmpl, time.Now(), leafValidity)
	if err != nil {
		return nil, err
	}
	return &Leaf{Cert: m.Cert, CertPEM: m.CertPEM, KeyPEM: m.KeyPEM, key: m.Key}, nil
}

// TLSCertificate is the leaf as a tls.Certificate (leaf parsed), for
// tls.Config.Certificates.
func (l *Leaf) TLSCertificate() tls.Certificate {
	return tls.Certificate{Certificate: [][]byte{l.Cert.Raw}, PrivateKey: l.key, Leaf: l.Cert}
}

// WriteFiles writes the certificate (mode 0644) and the key (mode 0600),
// each atomically (a temporary file renamed into place).
func (l *Leaf) WriteFiles(certPath, keyPath string) error {
	if err := atomicfile.Write(keyPath, l.KeyPEM, 0o600); err != nil {
		return err
	}
	return atomicfile.Write(certPath, l.CertPEM, 0o644)
}

// LoadLeaf reads a certificate and key pair written by WriteFiles (or any
// PEM pair) and checks that this CA issued it and that it is valid for at
// least another week, so callers can reuse it or issue a fresh one.
func (ca *CA) LoadLeaf(certPath, keyPath string, usage x509.ExtKeyUsage) (*Leaf, error) {
	certPEM, err := os.ReadFile(certPath)
	if err != nil {
		return nil, err
	}
	keyPEM, err := os.ReadFile(keyPath)
	if err != nil {
		return nil, err
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", certPath, err)
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("%s: %w", certPath, err)
	}
	_, err = cert.Verify(x509.VerifyOptions{
		Roots:       ca.Pool(),
		CurrentTime: time.Now().Add(7 * 24 * time.Hour),
		KeyUsages:   []x509.ExtKeyUsage{usage},
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", certPath, err)
	}
	signer, ok := pair.PrivateKey.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("%s: key cannot sign", keyPath)
	}
	return &Leaf{Cert: cert, CertPEM: certPEM, KeyPEM: keyPEM, key: signer}, nil
}
