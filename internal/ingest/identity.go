package ingest

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"
)

// MaxAgentIDBytes bounds an agent id.
const MaxAgentIDBytes = 253

// ErrIdentity is wrapped when a client certificate names no usable agent
// identity.
var ErrIdentity = errors.New("no agent identity in the client certificate")

// AgentIdentity returns the agent id a verified client certificate names.
//
// The rule: when the certificate has a URI SAN of the form
// plumbline://agent/<id>, the id is <id> (one such SAN at most); otherwise
// it is the subject common name. When both are present they must be equal.
// The id must pass CheckAgentID.
func AgentIdentity(cert *x509.Certificate) (string, error) {
	if cert == nil {
		return "", fmt.Errorf("%w: no certificate", ErrIdentity)
	}
	var fromURI string
	for _, u := range cert.URIs {
		if u.Scheme != "plumbline" || u.Host != "agent" {
			continue
		}
		if fromURI != "" {
			return "", fmt.Errorf("%w: more than one plumbline://agent/ URI SAN", ErrIdentity)
		}
		fromURI = strings.TrimPrefix(u.Path, "/")
		if fromURI == "" {
			return "", fmt.Errorf("%w: empty plumbline://agent/ URI SAN", ErrIdentity)
		}
	}
	cn := cert.Subject.CommonName
	id := cn
	switch {
	case fromURI != "" && cn != "" && cn != fromURI:
		return "", fmt.Errorf("%w: common name %q and URI SAN plumbline://agent/%s disagree", ErrIdentity, cn, fromURI)
	case fromURI != "":
		id = fromURI
	}
	if err := CheckAgentID(id); err != nil {
		return "", fmt.Errorf("%w: %w", ErrIdentity, err)
	}
	return id, nil
}

// CheckAgentID accepts a non-empty id of at most MaxAgentIDBytes of
// printable UTF-8 without spaces.
func CheckAgentID(id string) error {
	switch {
	case id == "":
		return errors.New("agent id is empty")
	case len(id) > MaxAgentIDBytes:
		return fmt.Errorf("agent id of %d bytes: want at most %d", len(id), MaxAgentIDBytes)
	case !utf8.ValidString(id):
		return fmt.Errorf("agent id %q is not valid UTF-8", id)
	case strings.ContainsFunc(id, func(r rune) bool { return unicode.IsSpace(r) || !unicode.IsPrint(r) }):
		return fmt.Errorf("agent id %q: spaces or control characters", id)
	}
	return nil
}

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
