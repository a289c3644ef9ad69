package pki

import (
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/plumbline/plumbline/internal/atomicfile"
	"github.com/plumbline/plumbline/internal/enroll"
)

// RenewOptions are what RenewServer needs.
type RenewOptions struct {
	// Dir holds the CA and the server certificate (as Init wrote them).
	Dir string
	// Names and IPs replace the current certificate's; none: keep them.
	Names []string
	IPs   []net.IP
	// ServerValidity is the new certificate's lifetime (0: the default).
	ServerValidity time.Duration
	// Owner, when set, is given the two files.
	Owner *Owner
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

// RenewServer issues a new server certificate and key from Dir's CA and
// replaces Dir/server.crt and server.key with them (each atomically; the
// key first). The CA is untouched, so agents need nothing; a running
// server picks the new pair up when the files change.
func RenewServer(o RenewOptions) (Result, error) {
	if o.Dir == "" {
		return Result{}, errors.New("no directory")
	}
	if o.ServerValidity == 0 {
		o.ServerValidity = DefaultServerValidity
	}
	if o.ServerValidity < MinValidity {
		return Result{}, fmt.Errorf("validity %s: want at least %s", o.ServerValidity, MinValidity)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return Result{}, err
	}
	r := Result{Dir: dir, CACert: filepath.Join(dir, CACertFile), CAKey: filepath.Join(dir, CAKeyFile),
		ServerCert: filepath.Join(dir, ServerCertFile), ServerKey: filepath.Join(dir, ServerKeyFile)}
	pair, err := tls.LoadX509KeyPair(r.CACert, r.CAKey)
	if err != nil {
		return Result{}, fmt.Errorf("the CA in %s: %w", dir, err)
	}
	ca, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return Result{}, fmt.Errorf("%s: %w", r.CACert, err)
	}
	caKey, ok := pair.PrivateKey.(crypto.Signer)
	if !ok || !ca.IsCA {
		return Result{}, fmt.Errorf("%s is not a CA certificate with a key that signs", r.CACert)
	}
	r.ServerNames, r.ServerIPs = o.Names, o.IPs
	if len(o.Names) == 0 && len(o.IPs) == 0 {
		if r.ServerNames, r.ServerIPs, err = currentNames(r.ServerCert); err != nil {
			return Result{}, err
		}
	}
	now := o.Now()
	if !now.Before(ca.NotAfter) {
		return Result{}, fmt.Errorf("the CA %s expired at %s: create a new one (ca init in another directory) and enroll the agents again", r.CACert, ca.NotAfter.UTC().Format(time.RFC3339))
	}
	srv, err := issueServer(ca, caKey, r.ServerNames, r.ServerIPs, now, o.ServerValidity)
	if err != nil {
		return Result{}, err
	}
	for _, f := range []struct {
		path string
		file
	}{{r.ServerKey, srv.key}, {r.ServerCert, srv.cert}} {
		if err := atomicfile.Write(f.path, f.data, f.mode); err != nil {
			return Result{}, err
		}
		if o.Owner != nil {
			if err := os.Chown(f.path, o.Owner.UID, o.Owner.GID); err != nil {
				return Result{}, err
			}
		}
	}
	r.Pin, r.CANotAfter, r.ServerNotAfter = enroll.Pin(ca), ca.NotAfter, srv.notAfter
	return r, nil
}

// currentNames are the DNS names and IP addresses of the server
// certificate in path.
func currentNames(path string) ([]string, []net.IP, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("the current server certificate (its names are kept; or give --name): %w", err)
	}
	certs, err := enroll.ParseCertsPEM(b)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(certs[0].DNSNames) == 0 && len(certs[0].IPAddresses) == 0 {
		return nil, nil, fmt.Errorf("%s names no host: give --name", path)
	}
	return certs[0].DNSNames, certs[0].IPAddresses, nil
}
