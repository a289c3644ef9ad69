package authority

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"testing"
)

// FuzzParseCSR: the Enroll and Renew requests' CSR bytes come from anyone
// who can reach the port: never a panic, never a key past the checks that
// the request did not sign.
func FuzzParseCSR(f *testing.F) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "a"}}, key)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(der)
	f.Add(der[:len(der)/2])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		pub, err := parseCSR(b)
		if err != nil {
			return
		}
		csr, perr := x509.ParseCertificateRequest(b)
		if perr != nil || csr.CheckSignature() != nil || len(b) > maxCSRBytes {
			t.Fatalf("parseCSR accepted %d bytes that do not hold a signed CSR", len(b))
		}
		_ = pub
	})
}
