// Package pki creates the server's production certificate authority: the
// enrollment CA that signs agent certificates (and that the server trusts
// for them), and the server's own TLS certificate, signed by that CA
// (`server ca init`). The enrollment authority (internal/server/authority)
// then issues every agent's certificate from the CA's key; agents pin the
// CA by the hash Init returns.
//
// A directory holds four PEM files, none of which Init ever replaces:
//
//	DIR/ca.crt      the CA certificate (0644): grpc.tls.client_ca_file and enrollment.ca_cert_file
//	DIR/ca.key      the CA key (0600): enrollment.ca_key_file
//	DIR/server.crt  the server certificate (0644): grpc.tls.cert_file
//	DIR/server.key  the server key (0600): grpc.tls.key_file
//
// Keys are ECDSA P-256, as the enrollment authority and the dev CA use.
package pki

import (
	"crypto"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/plumbline/plumbline/internal/atomicfile"
	"github.com/plumbline/plumbline/internal/certmint"
	"github.com/plumbline/plumbline/internal/enroll"
)

// File names inside the directory.
const (
	CACertFile     = "ca.crt"
	CAKeyFile      = "ca.key"
	ServerCertFile = "server.crt"
	ServerKeyFile  = "server.key"
)

// Default lifetimes: the CA ten years, the server certificate one year.
const (
	DefaultCAValidity     = 87600 * time.Hour
	DefaultServerValidity = 8760 * time.Hour
	// MinValidity is the shortest lifetime Init accepts.
	MinValidity = time.Hour
)

// Owner is who the created files belong to (a server running as an
// unprivileged user must read its keys).
type Owner struct {
	Name     string
	UID, GID int
}

// Options are what Init needs.
type Options struct {
	// Dir receives the files; created 0750 when missing.
	Dir string
	// Names (DNS) and IPs are the server certificate's subject alternative
	// names; the first name (else the first IP) is its common name.
	Names []string
	IPs   []net.IP
	// CAValidity and ServerValidity are the lifetimes (0: the defaults).
	CAValidity, ServerValidity time.Duration
	// Owner, when set, is given every file, and the directory's group
	// when Init creates it.
	Owner *Owner
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

// Result is what Init wrote.
type Result struct {
	Dir                                  string
	CACert, CAKey, ServerCert, ServerKey string
	Pin                                  string
	CANotAfter, ServerNotAfter           time.Time
	ServerNames                          []string
	ServerIPs                            []net.IP
}

// ErrExists is wrapped when a file Init would write is already there.
var ErrExists = atomicfile.ErrExists

// Init creates the CA and the server certificate in o.Dir. It refuses to
// replace any of the four files, and writes none when one exists.
func Init(o Options) (Result, error) {
	o, err := o.withDefaults()
	if err != nil {
		return Result{}, err
	}
	if o.Dir, err = filepath.Abs(o.Dir); err != nil {
		return Result{}, err
	}
	r := Result{
		Dir: o.Dir, CACert: filepath.Join(o.Dir, CACertFile), CAKey: filepath.Join(o.Dir, CAKeyFile),
		ServerCert: filepath.Join(o.Dir, ServerCertFile), ServerKey: filepath.Join(o.Dir, ServerKeyFile),
		ServerNames: o.Names, ServerIPs: o.IPs,
	}
	paths := []string{r.CACert, r.CAKey, r.ServerCert, r.ServerKey}
	for _, p := range paths {
		if _, err := os.Lstat(p); err == nil {
			return Result{}, fmt.Errorf("%s %w: ca init never replaces a CA or a key (move the directory's files away first, or choose another --dir)", p, ErrExists)
		}
	}
	if err := makeDir(o.Dir, o.Owner); err != nil {
		return Result{}, err
	}
	files, err := mint(o, &r)
	if err != nil {
		return Result{}, err
	}
	var written []string
	for i, p := range paths {
		err := atomicfile.WriteNew(p, files[i].data, files[i].mode)
		if err == nil {
			written = append(written, p)
			if o.Owner != nil {
				err = os.Chown(p, o.Owner.UID, o.Owner.GID)
			}
		}
		if err != nil {
			for _, w := range written {
				os.Remove(w)
			}
			return Result{}, err
		}
	}
	return r, nil
}

func (o Options) withDefaults() (Options, error) {
	if o.Dir == "" {
		return o, errors.New("no directory")
	}
	if len(o.Names) == 0 && len(o.IPs) == 0 {
		return o, errors.New("the server certificate needs at least one name or IP address (the name agents dial)")
	}
	if o.CAValidity == 0 {
		o.CAValidity = DefaultCAValidity
	}
	if o.ServerValidity == 0 {
		o.ServerValidity = DefaultServerValidity
	}
	if o.CAValidity < MinValidity || o.ServerValidity < MinValidity {
		return o, fmt.Errorf("validity %s (CA) and %s (server): want at least %s", o.CAValidity, o.ServerValidity, MinValidity)
	}
	if o.ServerValidity > o.CAValidity {
		return o, fmt.Errorf("the server certificate's validity %s exceeds the CA's %s", o.ServerValidity, o.CAValidity)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o, nil
}

// makeDir creates dir 0750 (group: the owner's) when missing.
func makeDir(dir string, owner *Owner) error {
	if fi, err := os.Stat(dir); err == nil {
		if !fi.IsDir() {
			return fmt.Errorf("%s is not a directory", dir)
		}
		return nil
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	if err := os.Chmod(dir, 0o750); err != nil { // whatever the umask
		return err
	}
	if owner != nil {
		if err := os.Chown(dir, -1, owner.GID); err != nil {
			return err
		}
	}
	return nil
}

type file struct {
	data []byte
	mode os.FileMode
}

// mint makes the CA and the server certificate, in the order of Init's
// paths: CA certificate, CA key, server certificate, server key.
func mint(o Options, r *Result) ([]file, error) {
	now := o.Now()
	ca, err := certmint.CA(pkix.Name{CommonName: "Plumbline CA " + commonName(o.Names, o.IPs), Organization: []string{"Plumbline"}}, now, o.CAValidity)
	if err != nil {
		return nil, err
	}
	srv, err := issueServer(ca.Cert, ca.Key, o.Names, o.IPs, now, o.ServerValidity)
	if err != nil {
		return nil, err
	}
	r.Pin, r.CANotAfter, r.ServerNotAfter = enroll.Pin(ca.Cert), ca.Cert.NotAfter, srv.notAfter
	return []file{
		{ca.CertPEM, 0o644},
		{ca.KeyPEM, 0o600},
		srv.cert,
		srv.key,
	}, nil
}

func commonName(names []string, ips []net.IP) string {
	if len(names) > 0 {
		return names[0]
	}
	return ips[0].String()
}

// serverPair is an issued server certificate and its key.
type serverPair struct {
	cert, key file
	notAfter  time.Time
}

// issueServer issues a server certificate for names and ips from the CA,
// valid for validity (at most as long as the CA).
func issueServer(ca *x509.Certificate, caKey crypto.Signer, names []string, ips []net.IP, now time.Time, validity time.Duration) (serverPair, error) {
	m, err := certmint.Issue(ca, caKey, certmint.ServerTemplate(commonName(names, ips), "Plumbline", names, ips), now, validity)
	if err != nil {
		return serverPair{}, fmt.Errorf("server certificate: %w", err)
	}
	return serverPair{cert: file{m.CertPEM, 0o644}, key: file{m.KeyPEM, 0o600}, notAfter: m.Cert.NotAfter}, nil
}
