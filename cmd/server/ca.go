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

	"github.com/plumbline/plumbline/internal/server/pki"
)

// DefaultPKIDir is where the packages keep the CA and the server's
// certificate.
const DefaultPKIDir = "/etc/plumbline/pki"

// serviceUser is the packaged server's user: run as root, ca init gives
// it the files (it must read its keys) when it exists.
const serviceUser = "plumbline"

const caUsage = `usage: server ca init --dir DIR --name NAME [--name NAME ...] [--ip IP ...] [--ca-validity 87600h] [--server-validity 8760h] [--owner USER]
       server ca renew --dir DIR [--name NAME ...] [--ip IP ...] [--server-validity 8760h] [--owner USER]

init creates the production certificate authority and the server's certificate:
  DIR/ca.crt      (0644) the enrollment CA: signs agent certificates; the server trusts it for them
  DIR/ca.key      (0600) its key
  DIR/server.crt  (0644) the server's certificate, for every --name and --ip (the names agents dial)
  DIR/server.key  (0600) its key
It never replaces a file: when any of the four exists it writes nothing.
It prints the CA pin agents enroll with and the server.yaml keys to set.
renew issues a new server certificate and key from DIR's CA, for the names
of the current one (or --name/--ip), and replaces server.crt and server.key;
a running server picks them up, agents need nothing.
Run as root, the files go to the user plumbline (the packaged service's),
when it exists; --owner names another.

flags:
`

// stringList is a repeatable flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

// caFlags are the flags of `server ca init` and `server ca renew`.
type caFlags struct {
	dir, owner    string
	caVal, srvVal time.Duration
	grpcPort      int
	names, ips    stringList
}

// runCA is `server ca init|renew`.
func runCA(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("server ca", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, caUsage); fs.PrintDefaults() }
	var f caFlags
	fs.StringVar(&f.dir, "dir", DefaultPKIDir, "`directory` of the four files (init creates it 0750 when missing)")
	fs.DurationVar(&f.caVal, "ca-validity", pki.DefaultCAValidity, "init: the CA's lifetime (agent certificates never outlive it)")
	fs.DurationVar(&f.srvVal, "server-validity", pki.DefaultServerValidity, "the server certificate's lifetime")
	fs.StringVar(&f.owner, "owner", "", "`user` given the files (default: plumbline when run as root and that user exists)")
	fs.IntVar(&f.grpcPort, "grpc-port", 7443, "init: the gRPC port, for the printed agent enroll command")
	fs.Var(&f.names, "name", "DNS `name` agents dial the server by (repeatable; an IP address counts as --ip)")
	fs.Var(&f.ips, "ip", "IP `address` agents dial the server at (repeatable)")
	if len(args) == 0 || args[0] != "init" && args[0] != "renew" {
		fs.Usage()
		if len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help") {
			return 0
		}
		return 2
	}
	cmd := args[0]
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "server ca %s: unexpected arguments %q\n", cmd, fs.Args())
		return 2
	}
	names, ips, err := sanNames(f.names, f.ips, cmd == "init")
	var owner *pki.Owner
	if err == nil {
		owner, err = fileOwner(f.owner)
	}
	if err != nil {
		fmt.Fprintf(stderr, "server ca %s: %v\n", cmd, err)
		return 2
	}
	var r pki.Result
	if cmd == "init" {
		r, err = pki.Init(pki.Options{Dir: f.dir, Names: names, IPs: ips, CAValidity: f.caVal, ServerValidity: f.srvVal, Owner: owner})
	} else {
		r, err = pki.RenewServer(pki.RenewOptions{Dir: f.dir, Names: names, IPs: ips, ServerValidity: f.srvVal, Owner: owner})
	}
	if err != nil {
		fmt.Fprintf(stderr, "server ca %s: %v\n", cmd, err)
		return 1
	}
	if cmd == "init" {
		printCA(stdout, r, owner, f.grpcPort)
	} else {
		fmt.Fprintf(stdout, "renewed %s (0644) and %s (0600) for %s, valid until %s; a running server uses them from its next connection\n",
			r.ServerCert, r.ServerKey, sanList(r), r.ServerNotAfter.UTC().Format(time.RFC3339))
	}
	return 0
}

// sanNames sorts --name and --ip values into the certificate's DNS names
// and IP addresses; required: at least one.
func sanNames(names, ips []string, required bool) ([]string, []net.IP, error) {
	var dns []string
	var addrs []net.IP
	for _, n := range names {
		n = strings.TrimSpace(n)
		if ip := net.ParseIP(n); ip != nil {
			addrs = append(addrs, ip)
			continue
		}
		if n == "" || strings.ContainsAny(n, " \t/:@") {
			return nil, nil, fmt.Errorf("--name %q: want a DNS name such as plumbline.example.com", n)
		}
		dns = append(dns, n)
	}
	for _, s := range ips {
		ip := net.ParseIP(strings.TrimSpace(s))
		if ip == nil {
			return nil, nil, fmt.Errorf("--ip %q: not an IP address", s)
		}
		addrs = append(addrs, ip)
	}
	if required && len(dns) == 0 && len(addrs) == 0 {
		return nil, nil, errors.New("give at least one --name (or --ip): the name agents dial this server by, e.g. --name $(hostname -f)")
	}
	return dns, addrs, nil
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

then start the server, create a join token (plumbline-server token create --config /etc/plumbline/server.yaml)
and on each agent host, as the agent's user (the packaged unit's state directory):
  plumbline-agent enroll --server %s --ca-hash %s --token-file FILE --dir /var/lib/plumbline-agent/tls
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
