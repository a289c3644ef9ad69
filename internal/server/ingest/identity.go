package ingest

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"
)

// MaxIncarnationBytes bounds a spool incarnation id.
const MaxIncarnationBytes = 64

// CheckIncarnation accepts a spool incarnation id: empty (an agent from
// before incarnations) or 1 to MaxIncarnationBytes of [A-Za-z0-9_-].
func CheckIncarnation(inc string) error {
	if len(inc) > MaxIncarnationBytes {
		return fmt.Errorf("incarnation of %d bytes: want at most %d", len(inc), MaxIncarnationBytes)
	}
	for i := 0; i < len(inc); i++ {
		c := inc[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return fmt.Errorf("incarnation %q: byte %d (%q): want only A-Z, a-z, 0-9, - and _", inc, i, c)
		}
	}
	return nil
}

// ServerTLSConfig is the gRPC server's TLS configuration: TLS 1.3 only,
// the server certificate from certFile/keyFile (re-read on every
// handshake, so a renewed certificate needs no restart), and client
// certificates required and verified against the CAs in clientCAFile.
func ServerTLSConfig(certFile, keyFile, clientCAFile string) (*tls.Config, error) {
	if certFile == "" || keyFile == "" || clientCAFile == "" {
		return nil, errors.New("server TLS: cert_file, key_file and client_ca_file are all required (or run with --insecure)")
	}
	kp := &keyPair{certFile: certFile, keyFile: keyFile}
	if _, err := kp.get(); err != nil {
		return nil, fmt.Errorf("server TLS: %w", err)
	}
	pem, err := os.ReadFile(clientCAFile)
	if err != nil {
		return nil, fmt.Errorf("server TLS: client CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("server TLS: client CA %s holds no PEM certificate", clientCAFile)
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		ClientAuth: tls.RequireAndVerifyClientCert,
		ClientCAs:  pool,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return kp.get()
		},
		NextProtos: []string{"h2"},
	}, nil
}

// keyPair is a certificate and key pair reloaded when either file changes.
type keyPair struct {
	certFile, keyFile string

	mu                sync.Mutex
	cert              *tls.Certificate
	certMod, keyMod   time.Time
	certSize, keySize int64
}

func (k *keyPair) get() (*tls.Certificate, error) {
	cs, err := os.Stat(k.certFile)
	if err != nil {
		return k.cached(err)
	}
	ks, err := os.Stat(k.keyFile)
	if err != nil {
		return k.cached(err)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.cert != nil && cs.ModTime().Equal(k.certMod) && ks.ModTime().Equal(k.keyMod) && cs.Size() == k.certSize && ks.Size() == k.keySize {
		return k.cert, nil
	}
	c, err := tls.LoadX509KeyPair(k.certFile, k.keyFile)
	if err != nil {
		if k.cert != nil {
			return k.cert, nil // a renewal half-written: keep serving the old pair
		}
		return nil, fmt.Errorf("server certificate: %w", err)
	}
	k.cert, k.certMod, k.keyMod, k.certSize, k.keySize = &c, cs.ModTime(), ks.ModTime(), cs.Size(), ks.Size()
	return k.cert, nil
}

func (k *keyPair) cached(err error) (*tls.Certificate, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.cert != nil {
		return k.cert, nil
	}
	return nil, fmt.Errorf("server certificate: %w", err)
}
