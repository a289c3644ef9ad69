// Package identity is an agent's identity as its certificate carries it:
// the subject common name and a URI SAN plumbline://agent/<id>. The
// server's ingest and enrollment read it, the certificate authorities
// (devca, pki, the enrollment authority) write it, and the agent reads its
// own id by the same rule. It imports nothing of Plumbline's.
package identity

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxAgentIDBytes bounds an agent id.
const MaxAgentIDBytes = 253

// URIScheme and URIHost form the URI SAN of an agent certificate:
// plumbline://agent/<id>.
const (
	URIScheme = "plumbline"
	URIHost   = "agent"
)

// ErrNoIdentity is wrapped when a certificate names no usable agent
// identity.
var ErrNoIdentity = errors.New("no agent identity in the client certificate")

// URI is the URI SAN that names agent id: plumbline://agent/<id>.
func URI(id string) *url.URL {
	return &url.URL{Scheme: URIScheme, Host: URIHost, Path: "/" + id}
}

// FromCertificate returns the agent id a certificate names.
//
// The rule: when the certificate has a URI SAN of the form
// plumbline://agent/<id>, the id is <id> (one such SAN at most); otherwise
// it is the subject common name. When both are present they must be equal.
// The id must pass CheckAgentID.
func FromCertificate(cert *x509.Certificate) (string, error) {
	if cert == nil {
		return "", fmt.Errorf("%w: no certificate", ErrNoIdentity)
	}
	var fromURI string
	for _, u := range cert.URIs {
		if u.Scheme != URIScheme || u.Host != URIHost {
			continue
		}
		if fromURI != "" {
			return "", fmt.Errorf("%w: more than one plumbline://agent/ URI SAN", ErrNoIdentity)
		}
		fromURI = strings.TrimPrefix(u.Path, "/")
		if fromURI == "" {
			return "", fmt.Errorf("%w: empty plumbline://agent/ URI SAN", ErrNoIdentity)
		}
	}
	cn := cert.Subject.CommonName
	id := cn
	switch {
	case fromURI != "" && cn != "" && cn != fromURI:
		return "", fmt.Errorf("%w: common name %q and URI SAN plumbline://agent/%s disagree", ErrNoIdentity, cn, fromURI)
	case fromURI != "":
		id = fromURI
	}
	if err := CheckAgentID(id); err != nil {
		return "", fmt.Errorf("%w: %w", ErrNoIdentity, err)
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
