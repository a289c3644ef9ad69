package enroll

import (
	"crypto/sha256"
	"crypto/subtle"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
)

// pinPrefix starts every CA pin: sha256:<64 hex digits>.
const pinPrefix = "sha256:"

// Pin is the pin of a CA certificate: "sha256:" and the hex SHA-256 of
// its SubjectPublicKeyInfo (kubeadm's discovery-token-ca-cert-hash;
// `openssl x509 -pubkey -noout | openssl pkey -pubin -outform der |
// sha256sum` computes the same).
func Pin(cert *x509.Certificate) string {
	h := sha256.Sum256(cert.RawSubjectPublicKeyInfo)
	return pinPrefix + hex.EncodeToString(h[:])
}

// ParsePin checks a pin's form and returns it normalised (lower case).
func ParsePin(s string) (string, error) {
	p := strings.ToLower(strings.TrimSpace(s))
	if !strings.HasPrefix(p, pinPrefix) {
		return "", fmt.Errorf("CA pin %q: want sha256:<64 hex digits> as `server token create` prints it", truncate(s, 80))
	}
	h := p[len(pinPrefix):]
	if b, err := hex.DecodeString(h); err != nil || len(b) != sha256.Size {
		return "", fmt.Errorf("CA pin %q: want sha256: and 64 hex digits", truncate(s, 80))
	}
	return p, nil
}

// PinnedCert returns the certificate of bundle (PEM) whose pin is pin
// (normalised by ParsePin); a CA certificate only.
func PinnedCert(bundle []byte, pin string) (*x509.Certificate, error) {
	certs, err := ParseCertsPEM(bundle)
	if err != nil {
		return nil, err
	}
	var seen []string
	for _, c := range certs {
		got := Pin(c)
		if subtle.ConstantTimeCompare([]byte(got), []byte(pin)) == 1 {
			if !c.IsCA {
				return nil, fmt.Errorf("the certificate with pin %s (%s) is not a CA certificate", pin, c.Subject)
			}
			return c, nil
		}
		seen = append(seen, got)
	}
	return nil, fmt.Errorf("no CA certificate of the server matches the pin %s (the server offers %s): wrong --ca-hash, or someone between you and the server", pin, strings.Join(seen, ", "))
}

// maxPEMCerts bounds the certificates one PEM bundle may hold.
const maxPEMCerts = 16

// ParseCertsPEM parses the CERTIFICATE blocks of a PEM bundle (at least
// one, at most 16; other block types are errors).
func ParseCertsPEM(b []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("PEM block %q: want CERTIFICATE", truncate(blk.Type, 40))
		}
		if len(out) == maxPEMCerts {
			return nil, fmt.Errorf("more than %d certificates in one bundle", maxPEMCerts)
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return nil, fmt.Errorf("certificate %d: %w", len(out)+1, err)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, errors.New("no PEM certificate")
	}
	return out, nil
}
