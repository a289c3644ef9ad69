package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/user"
	"strconv"
	"strings"
	"time"

	"github.com/plumbline/plumbline/internal/pki"
)

// DefaultPKIDir is where the packages keep the CA and the server's
// certificate.
const DefaultPKIDir = "/etc/plumbline/pki"

// serviceUser is the packaged server's user: run as root, ca init gives
// it the files (it must read its keys) when it exists.
const serviceUser = "plumbline"

const caUsage = `usage: server ca init --dir DIR --name NAME [--name NAME ...] [--ip IP ...] [--ca-validity 87600h] [--server-validity 8760h] [--owner USER]

Creates the production certificate authority and the server's certificate:
  DIR/ca.crt      (0644) the enrollment CA: signs agent certificates; the server trusts it for them
  DIR/ca.key      (0600) its key
  DIR/server.crt  (0644) the server's certificate, for every --name and --ip (the names agents dial)
  DIR/server.key  (0600) its key
It never replaces a file: when any of the four exists it writes nothing.
It prints the CA pin agents enroll with and the server.yaml keys to set.
Run as root, the files go to the user plumbline (the packaged service's),
when it exists; --owner names another.

flags:
`

// stringList is a repeatable flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

// runCA is `server ca ...`.
func runCA(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("server ca init", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, caUsage); fs.PrintDefaults() }
	var names, ips stringList
	var (
		dir     = fs.String("dir", DefaultPKIDir, "`directory` for the four files (created 0750 when missing)")
		caVal   = fs.Duration("ca-validity", pki.DefaultCAValidity, "the CA's lifetime (agent certificates never outlive it)")
		srvVal  = fs.Duration("server-validity", pki.DefaultServerValidity, "the server certificate's lifetime")
		owner   = fs.String("owner", "", "`user` given the files (default: plumbline when run as root and that user exists)")
		grpcPrt = fs.Int("grpc-port", 7443, "the gRPC port, for the printed agent enroll command")
	)
	fs.Var(&names, "name", "DNS `name` agents dial the server by (repeatable; an IP address counts as --ip)")
	fs.Var(&ips, "ip", "IP `address` agents dial the server at (repeatable)")
	if len(args) == 0 || args[0] != "init" {
		fs.Usage()
		if len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help") {
			return 0
		}
		return 2
	}
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "server ca init: unexpected arguments %q\n", fs.Args())
		return 2
	}
	o := pki.Options{Dir: *dir, CAValidity: *caVal, ServerValidity: *srvVal}
	err := sanNames(&o, names, ips)
	if err == nil {
		o.Owner, err = fileOwner(*owner)
	}
	if err != nil {
		fmt.Fprintf(stderr, "server ca init: %v\n", err)
		return 2
	}
	r, err := pki.Init(o)
	if err != nil {
		fmt.Fprintf(stderr, "server ca init: %v\n", err)
		return 1
	}
	printCA(stdout, r, o.Owner, *grpcPrt)
	return 0
}

// sanNames sorts --name and --ip values into the certificate's DNS names
// and IP addresses.
func sanNames(o *pki.Options, names, ips []string) error {
	for _, n := range names {
		n = strings.TrimSpace(n)
		if ip := net.ParseIP(n); ip != nil {
			o.IPs = append(o.IPs, ip)
			continue
		}
		if n == "" || strings.ContainsAny(n, " \t/:@") {
			return fmt.Errorf("--name %q: want a DNS name such as plumbline.example.com", n)
		}
		o.Names = append(o.Names, n)
	}
	for _, s := range ips {
		ip := net.ParseIP(strings.TrimSpace(s))
		if ip == nil {
			return fmt.Errorf("--ip %q: not an IP address", s)
		}
		o.IPs = append(o.IPs, ip)
	}
	if len(o.Names) == 0 && len(o.IPs) == 0 {
		return errors.New("give at least one --name (or --ip): the name agents dial this server by, e.g. --name $(hostname -f)")
	}
	return nil
}

// fileOwner is --owner's user, or by default the service user when this
// runs as root.
func fileOwner(name string) (*pki.Owner, error) {
	if name == "" {
		if os.Geteuid() != 0 {
			return nil, nil
		}
		if _, err := user.Lookup(serviceUser); err != nil {
			return nil, nil
		}
		name = serviceUser
	}
	u, err := user.Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("--owner: %w", err)
	}
	uid, err1 := strconv.Atoi(u.Uid)
	gid, err2 := strconv.Atoi(u.Gid)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("--owner %s: user and group ids %s:%s are not numbers", name, u.Uid, u.Gid)
	}
	return &pki.Owner{Name: name, UID: uid, GID: gid}, nil
}

func printCA(w io.Writer, r pki.Result, owner *pki.Owner, port int) {
	host := ""
	if len(r.ServerNames) > 0 {
		host = r.ServerNames[0]
	} else {
		host = r.ServerIPs[0].String()
	}
	owned := ""
	if owner != nil {
		owned = ", owned by " + owner.Name
	}
	fmt.Fprintf(w, `created in %s%s:
  %s  CA certificate (0644), valid until %s
  %s  CA key (0600)
  %s  server certificate (0644) for %s, valid until %s
  %s  server key (0600)

CA pin: %s

set in server.yaml:
grpc:
  tls:
    cert_file: %s
    key_file: %s
    client_ca_file: %s
enrollment:
  ca_cert_file: %s
  ca_key_file: %s

then: server token create --config server.yaml, and on each agent host:
  agent enroll --server %s --ca-hash %s --token-file FILE --dir /etc/plumbline/tls
`, r.Dir, owned,
		r.CACert, r.CANotAfter.UTC().Format(time.RFC3339), r.CAKey,
		r.ServerCert, sanList(r), r.ServerNotAfter.UTC().Format(time.RFC3339), r.ServerKey,
		r.Pin,
		r.ServerCert, r.ServerKey, r.CACert, r.CACert, r.CAKey,
		net.JoinHostPort(host, strconv.Itoa(port)), r.Pin)
}

func sanList(r pki.Result) string {
	all := append([]string(nil), r.ServerNames...)
	for _, ip := range r.ServerIPs {
		all = append(all, ip.String())
	}
	return strings.Join(all, ", ")
}
