package enroll

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"os"

	"github.com/plumbline/plumbline/internal/atomicfile"
)

// File names Enroll writes under its directory.
const (
	CAFile   = "ca.crt"
	CertFile = "agent.crt"
	KeyFile  = "agent.key"
)

// newKeyAndCSR generates an ECDSA P-256 key on this host and a
// certificate signing request for it naming agentID.
func newKeyAndCSR(agentID string) (keyPEM, csrDER []byte, pub crypto.PublicKey, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	csrDER, err = x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: agentID}}, key)
	if err != nil {
		return nil, nil, nil, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), csrDER, key.Public(), nil
}

// checkIssued checks that an issued chain's leaf certifies pub and is a
// client certificate, and returns the leaf.
func checkIssued(chainPEM []byte, pub crypto.PublicKey) (*x509.Certificate, error) {
	certs, err := ParseCertsPEM(chainPEM)
	if err != nil {
		return nil, fmt.Errorf("issued certificate: %w", err)
	}
	leaf := certs[0]
	eq, ok := pub.(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !eq.Equal(leaf.PublicKey) {
		return nil, errors.New("issued certificate: it does not certify the key this agent sent")
	}
	return leaf, nil
}

// writePair replaces certFile and keyFile with a new pair so that a crash
// at any point leaves a usable pair: both are written beside the old ones
// as FILE.new first, then renamed into place, key first; LoadKeyPair
// finishes a rename a crash interrupted.
func writePair(certFile, keyFile string, certPEM, keyPEM []byte) error {
	if err := atomicfile.Write(keyFile+".new", keyPEM, 0o600); err != nil {
		return err
	}
	if err := atomicfile.Write(certFile+".new", certPEM, 0o644); err != nil {
		return err
	}
	if err := os.Rename(keyFile+".new", keyFile); err != nil {
		return err
	}
	return os.Rename(certFile+".new", certFile)
}

// LoadKeyPair loads certFile and keyFile, first finishing a replacement
// (writePair) that a crash interrupted: a pending FILE.new pair that
// matches is moved into place; one that does not is removed.
func LoadKeyPair(certFile, keyFile string) (tls.Certificate, error) {
	if newCert, err := os.ReadFile(certFile + ".new"); err == nil {
		newKeyPath := keyFile + ".new"
		if _, err := os.Stat(newKeyPath); err != nil {
			newKeyPath = keyFile // the key was renamed already
		}
		newKey, kerr := os.ReadFile(newKeyPath)
		if _, perr := tls.X509KeyPair(newCert, newKey); kerr == nil && perr == nil {
			if newKeyPath != keyFile {
				if err := os.Rename(newKeyPath, keyFile); err != nil {
					return tls.Certificate{}, err
				}
			}
			if err := os.Rename(certFile+".new", certFile); err != nil {
				return tls.Certificate{}, err
			}
		} else {
			os.Remove(certFile + ".new")
			os.Remove(keyFile + ".new")
		}
	}
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return tls.Certificate{}, err
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return tls.Certificate{}, err
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("%s and %s: %w", certFile, keyFile, err)
	}
	return pair, nil
}
