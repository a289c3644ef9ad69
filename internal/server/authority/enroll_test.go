package authority_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"

	"log/slog"
	"math/big"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/plumbline/plumbline/internal/agent"
	agentconfig "github.com/plumbline/plumbline/internal/agent/config"
	"github.com/plumbline/plumbline/internal/enroll"
	"github.com/plumbline/plumbline/internal/lab/pgtest"
	"github.com/plumbline/plumbline/internal/server"
	"github.com/plumbline/plumbline/internal/server/authority"
	"github.com/plumbline/plumbline/internal/server/config"
	"github.com/plumbline/plumbline/internal/server/devca"
	"github.com/plumbline/plumbline/internal/server/store"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// pki is an operator's PKI: a root CA that signs the server certificate
// and bring-your-own agent certificates, and an intermediate CA under it
// that the server enrolls agents with.
type pki struct {
	root                  *devca.CA
	serverCert, serverKey string
	interCert, interKey   string
	rootFile              string
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	dir := t.TempDir()
	// The root: an operator's CA, which (unlike the dev CA) allows an
	// intermediate under it; devca issues the server and BYO certificates.
	rootKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	rootTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "Operator root CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(48 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true,
	}
	rootDER, err := x509.CreateCertificate(rand.Reader, rootTmpl, rootTmpl, rootKey.Public(), rootKey)
	if err != nil {
		t.Fatal(err)
	}
	rootKeyDER, _ := x509.MarshalPKCS8PrivateKey(rootKey)
	os.MkdirAll(filepath.Join(dir, "root"), 0o700)
	writeFile(t, filepath.Join(dir, "root", devca.CertFile), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: rootDER}))
	writeFile(t, filepath.Join(dir, "root", devca.KeyFile), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: rootKeyDER}))
	root, err := devca.Load(filepath.Join(dir, "root"))
	if err != nil {
		t.Fatal(err)
	}
	p := &pki{root: root, rootFile: root.CertPath(),
		serverCert: filepath.Join(dir, "server.crt"), serverKey: filepath.Join(dir, "server.key"),
		interCert: filepath.Join(dir, "inter.crt"), interKey: filepath.Join(dir, "inter.key")}
	srv, err := root.IssueServer("localhost", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.WriteFiles(p.serverCert, p.serverKey); err != nil {
		t.Fatal(err)
	}
	// The intermediate, signed with the root's key.
	rootPair, err := tls.LoadX509KeyPair(root.CertPath(), filepath.Join(root.Dir(), devca.KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(42), Subject: pkix.Name{CommonName: "Plumbline enrollment intermediate"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true, MaxPathLenZero: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, root.Cert, key.Public(), rootPair.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalPKCS8PrivateKey(key)
	writeFile(t, p.interCert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	writeFile(t, p.interKey, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}))
	return p
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// running is a real server (internal/server) on 127.0.0.1:0.
type running struct {
	addr  string
	web   string      // the HTTP listener (/metrics)
	log   *syncBuffer // the server's log
	cfg   config.Config
	files authority.Files
	st    *store.Store // a second handle on its store, as the CLI uses it
}

func startServer(t *testing.T, p *pki, dsn string, certTTL time.Duration) *running {
	t.Helper()
	return startServerWith(t, p, dsn, certTTL, func(*config.Config) {})
}

// startServerWith is startServer with tune's changes to the configuration.
func startServerWith(t *testing.T, p *pki, dsn string, certTTL time.Duration, tune func(*config.Config)) *running {
	t.Helper()
	cfg := config.Default()
	cfg.DataDir = t.TempDir()
	cfg.Store.DSN = dsn
	cfg.GRPC.ListenAddress, cfg.Web.ListenAddress = "127.0.0.1:0", "127.0.0.1:0"
	cfg.GRPC.TLS = config.TLSConfig{CertFile: p.serverCert, KeyFile: p.serverKey, ClientCAFile: p.rootFile}
	cfg.Enrollment.CACertFile, cfg.Enrollment.CAKeyFile = p.interCert, p.interKey
	cfg.Enrollment.CertTTL = certTTL
	cfg.ShutdownTimeout = 5 * time.Second
	tune(&cfg)
	addrs := make(chan [2]string, 1)
	r := running{log: &syncBuffer{}}
	srv, err := server.New(cfg, slog.New(slog.NewTextHandler(r.log, nil)), server.Options{Ready: func(g, w string) { addrs <- [2]string{g, w} }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case a := <-addrs:
		r.addr, r.web = a[0], a[1]
	case err := <-done:
		t.Fatalf("server: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("server did not start")
	}
	r.cfg = cfg
	if r.files, err = server.EnrollmentFiles(cfg); err != nil {
		t.Fatal(err)
	}
	if r.st, err = store.Open(context.Background(), dsn); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.st.Close() })
	return &r
}

// token is `server token create`: the token and the pin.
func (r *running) token(t *testing.T, spec authority.TokenSpec) (string, string) {
	t.Helper()
	ca, err := authority.LoadCA(r.files)
	if err != nil {
		t.Fatal(err)
	}
	tok, _, err := authority.CreateToken(context.Background(), r.st, spec, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return tok.String(), ca.Pin()
}

func (r *running) enroll(dir, token, pin, id string) (enroll.Result, error) {
	return enroll.Enroll(context.Background(), enroll.Options{Server: r.addr, Token: token, Pin: pin, Dir: dir, AgentID: id, Timeout: 10 * time.Second})
}

// dial connects with the pair in certFile/keyFile ("" for none).
func (r *running) dial(t *testing.T, certFile, keyFile string) *grpc.ClientConn {
	t.Helper()
	tc := &tls.Config{MinVersion: tls.VersionTLS13, RootCAs: mustPool(t, r.cfg.GRPC.TLS.ClientCAFile), ServerName: "localhost"}
	if certFile != "" {
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			t.Fatal(err)
		}
		tc.Certificates = []tls.Certificate{pair}
	}
	conn, err := grpc.NewClient(r.addr, grpc.WithTransportCredentials(credentials.NewTLS(tc)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func mustPool(t *testing.T, file string) *x509.CertPool {
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	p := x509.NewCertPool()
	p.AppendCertsFromPEM(b)
	return p
}

func hello(conn *grpc.ClientConn, id string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := plumblinev1.NewAgentServiceClient(conn).Hello(ctx, &plumblinev1.HelloRequest{AgentId: id, Host: &plumblinev1.Host{Hostname: id}})
	return err
}

func serialOf(t *testing.T, certFile string) *big.Int {
	t.Helper()
	return leafOf(t, certFile).SerialNumber
}

// leafOf is the first certificate of a PEM chain file.
func leafOf(t *testing.T, certFile string) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(certFile)
	if err != nil {
		t.Fatal(err)
	}
	certs, err := enroll.ParseCertsPEM(b)
	if err != nil {
		t.Fatal(err)
	}
	return certs[0]
}

func waitFor(t *testing.T, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", limit, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// syncBuffer is a log the agent writes while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestEnrollRunRenewRevoke is the life of an enrolled agent over real TLS
// on a real server, on both store engines: a wrong pin is refused before
// the token is sent; enrollment writes the key (0600), certificate chain
// and CA; the real agent reports with it, renews twice at two thirds of a
// 6 s lifetime without a restart (each renewal reconnects it with the new
// certificate, and the superseded certificate is refused); after `server
// agent revoke` its certificate is refused on new connections, on its open
// connection and for renewal.
func TestEnrollRunRenewRevoke(t *testing.T) {
	pgtest.ForEachEngine(t, func(t *testing.T, dsn string) {
		p := newPKI(t)
		r := startServer(t, p, dsn, 6*time.Second)
		dir := t.TempDir()
		res := enrollChecked(t, r, p, dir)
		first := filepath.Join(t.TempDir(), "first")
		copyFile(t, res.CertFile, first+".crt")
		copyFile(t, res.KeyFile, first+".key")
		ag := runAgent(t, r, res, dir)
		waitFor(t, "the agent's geometry report", 15*time.Second, func() bool { _, hw := ag.lastSeen(); return hw > 0 })

		// Renewal, twice, in the running agent.
		var renewedAt time.Time
		for i := range 2 {
			prev := serialOf(t, res.CertFile)
			waitFor(t, "a renewal", 15*time.Second, func() bool { return serialOf(t, res.CertFile).Cmp(prev) != 0 })
			renewedAt = time.Now()
			ea, err := r.st.EnrolledAgent(context.Background(), "db-1")
			if err != nil || ea.Serial != serialOf(t, res.CertFile).Text(16) {
				t.Fatalf("renewal %d: the server holds serial %q (%v), the agent's file %s", i+1, ea.Serial, err, serialOf(t, res.CertFile).Text(16))
			}
		}
		waitFor(t, "a Hello with the renewed certificate", 10*time.Second, func() bool { ls, _ := ag.lastSeen(); return ls.After(renewedAt) })
		// The server keeps the validity of the certificate presented at
		// the Hello: the renewed one's (PlumblineAgentCertificateExpiring).
		// (The file's, read at each poll: a third renewal may come meanwhile.)
		waitFor(t, "the server to hold the renewed certificate's validity", 10*time.Second, func() bool {
			h, renewed := ag.host(), leafOf(t, res.CertFile)
			return h.CertNotAfter.Equal(renewed.NotAfter) && h.CertNotBefore.Equal(renewed.NotBefore) &&
				renewed.SerialNumber.Cmp(serialOf(t, first+".crt")) != 0
		})
		// The first certificate is two renewals old: refused.
		if err := hello(r.dial(t, first+".crt", first+".key"), "db-1"); err == nil {
			t.Error("Hello with a superseded certificate succeeded")
		}

		// Revocation (as `server agent revoke`): within the cache's 10 s,
		// the calls of a new connection with the current certificate are
		// refused, so are those of a connection opened before, and so is
		// renewal.
		open := r.dial(t, res.CertFile, res.KeyFile)
		if err := hello(open, "db-1"); err != nil {
			t.Fatalf("Hello with the current certificate: %v", err)
		}
		if err := r.st.RevokeAgent(context.Background(), "db-1"); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the revoked certificate refused", 15*time.Second, func() bool {
			return hello(r.dial(t, res.CertFile, res.KeyFile), "db-1") != nil
		})
		if err := hello(open, "db-1"); status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "agent revoked") {
			t.Errorf("Hello on a connection opened before the revocation: %v; want PermissionDenied, agent revoked", err)
		}
		waitFor(t, "the agent to log the refused renewal", 15*time.Second, func() bool {
			return strings.Contains(ag.log.String(), "it was revoked")
		})
		ag.checkMetrics(t)
	})
}

// enrollChecked enrolls db-1 after a refused wrong pin and checks what
// was written.
func enrollChecked(t *testing.T, r *running, p *pki, dir string) enroll.Result {
	t.Helper()
	token, pin := r.token(t, authority.TokenSpec{Labels: map[string]string{"role": "db", "site": "ams"}})
	// A wrong pin: refused, nothing written, the token unspent.
	wrong := enroll.Pin(p.root.Cert)[:len(pin)-4] + "0000"
	if _, err := r.enroll(dir, token, wrong, "db-1"); err == nil || !strings.Contains(err.Error(), "matches the pin") {
		t.Fatalf("enroll with a wrong pin: %v; want a pin mismatch", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("a refused enrollment wrote %d files", len(ents))
	}
	res, err := r.enroll(dir, token, pin, "db-1")
	if err != nil {
		t.Fatalf("enroll: %v", err)
	}
	if res.AgentID != "db-1" || res.Labels["role"] != "db" || res.Labels["site"] != "ams" {
		t.Errorf("enroll result = %+v", res)
	}
	if fi, err := os.Stat(res.KeyFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("agent.key: %v, mode %v; want 0600", err, fi.Mode().Perm())
	}
	chainPEM, _ := os.ReadFile(res.CertFile)
	chain, _ := enroll.ParseCertsPEM(chainPEM)
	if len(chain) != 2 || chain[0].URIs[0].String() != "plumbline://agent/db-1" || chain[1].Subject.CommonName != "Plumbline enrollment intermediate" {
		t.Fatalf("agent.crt: %d certificates, leaf URIs %v; want the leaf with plumbline://agent/db-1 and the intermediate", len(chain), chain[0].URIs)
	}
	if got, err := r.st.AgentLabels(context.Background(), "db-1"); err != nil || got["site"] != "ams" {
		t.Errorf("AgentLabels(db-1) = %v, %v", got, err)
	}
	return res
}

// agentRun is the real agent running on enrolled files until the test ends.
type agentRun struct {
	a       *agent.Agent
	renewer *enroll.Renewer
	log     *syncBuffer
	st      *store.Store
}

func runAgent(t *testing.T, r *running, res enroll.Result, dir string) *agentRun {
	t.Helper()
	ag := &agentRun{log: &syncBuffer{}, st: r.st}
	logger := slog.New(slog.NewTextHandler(ag.log, nil))
	ac := agentconfig.Default()
	ac.Server = agentconfig.Server{Address: r.addr, TLS: agentconfig.ClientTLS{CAFile: res.CAFile, CertFile: res.CertFile, KeyFile: res.KeyFile, ServerName: "localhost"}}
	ac.Spool.Dir = filepath.Join(dir, "spool")
	ac.Probes = nil
	tc, renewer, id, err := agent.RenewingTLS(ac.Server, logger)
	if err != nil {
		t.Fatal(err)
	}
	ag.renewer = renewer
	ag.a, err = agent.New(agent.Options{
		Config: ac, AgentID: id, Version: "test", Creds: credentials.NewTLS(tc), Renewer: renewer,
		Discover: func(context.Context) (agent.Discovery, error) {
			return agent.Discovery{Inventory: &plumblinev1.Inventory{Host: &plumblinev1.Host{Hostname: id}}}, nil
		},
		BackoffBase: 50 * time.Millisecond, BackoffMax: 500 * time.Millisecond, Logger: logger,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- ag.a.Run(ctx) }()
	t.Cleanup(func() {
		stop()
		<-ran
		if t.Failed() {
			t.Logf("agent log:\n%s", ag.log.String())
		}
	})
	return ag
}

// host is db-1 as the server's store holds it (zero when not registered).
func (ag *agentRun) host() store.Agent {
	hosts, _ := ag.st.ListHosts(context.Background())
	for _, h := range hosts {
		if h.ID == "db-1" {
			return h
		}
	}
	return store.Agent{}
}

// lastSeen is the server's last-seen time and high-water mark of db-1.
func (ag *agentRun) lastSeen() (time.Time, uint64) {
	h := ag.host()
	return h.LastSeen, h.HighWater
}

// checkMetrics: the agent's /metrics shows the current expiry, the
// renewals and the refused one.
func (ag *agentRun) checkMetrics(t *testing.T) {
	t.Helper()
	metrics := scrape(t, ag.a)
	if want := fmt.Sprintf("plumbline_agent_client_certificate_expiry_timestamp_seconds %g", float64(ag.renewer.Leaf().NotAfter.Unix())); !strings.Contains(metrics, want) {
		t.Errorf("agent /metrics lacks %q:\n%s", want, grepLines(metrics, "client_certificate"))
	}
	for _, result := range []string{"ok", "error"} {
		line := `plumbline_agent_client_certificate_renewals_total{result="` + result + `"} `
		if !strings.Contains(metrics, line) || strings.Contains(metrics, line+"0\n") {
			t.Errorf("agent /metrics counts no renewal with result %s:\n%s", result, grepLines(metrics, "client_certificate"))
		}
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, to, b)
}

// TestTokenRefusals: an expired, used-up, revoked or unknown token is
// refused with a message that says which, on both engines.
func TestTokenRefusals(t *testing.T) {
	t.Parallel()
	pgtest.ForEachEngine(t, func(t *testing.T, dsn string) {
		p := newPKI(t)
		r := startServer(t, p, dsn, time.Hour)
		short, pin := r.token(t, authority.TokenSpec{TTL: time.Second})
		shortExpired := time.Now().Add(time.Second + 100*time.Millisecond) // its expiry is before this
		once, _ := r.token(t, authority.TokenSpec{Uses: 1})
		gone, _ := r.token(t, authority.TokenSpec{})
		goneTok, _ := enroll.ParseToken(gone)
		if err := r.st.RevokeJoinToken(context.Background(), goneTok.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := r.enroll(t.TempDir(), once, pin, "h-1"); err != nil {
			t.Fatalf("first use: %v", err)
		}
		unknown := enroll.NewToken().String()
		wrongSecret := once[:len(once)-4] + "aaaa"
		// A real expiry on the server's clock (the server has no other):
		// wait out what is left of short's second.
		time.Sleep(time.Until(shortExpired))
		for _, c := range []struct{ name, token, want string }{
			{"expired", short, "join token expired"},
			{"used up", once, "join token used up: all 1 uses spent"},
			{"revoked", gone, "join token revoked"},
			{"unknown", unknown, "unknown, or its secret is wrong"},
			{"wrong secret", wrongSecret, "unknown, or its secret is wrong"},
			{"malformed", "plb1.short", "malformed join token"},
		} {
			dir := t.TempDir()
			_, err := r.enroll(dir, c.token, pin, "h-2")
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s token: %v; want %q", c.name, err, c.want)
			}
			if ents, _ := os.ReadDir(dir); len(ents) != 0 {
				t.Errorf("%s token: %d files written", c.name, len(ents))
			}
		}
		// The id h-1 is taken.
		fresh, _ := r.token(t, authority.TokenSpec{Uses: 5})
		if _, err := r.enroll(t.TempDir(), fresh, pin, "h-1"); status.Code(err) != codes.AlreadyExists || !strings.Contains(err.Error(), "already taken") {
			t.Errorf("enroll h-1 again: %v; want AlreadyExists, already taken", err)
		}
	})
}

// TestGRPCAuthMatrix: with enrollment on, the listener accepts clients
// without a certificate, but only GetTrustBundle and Enroll answer them;
// every other method (AgentService, Renew, health Check and Watch) is
// refused Unauthenticated. A bring-your-own certificate from the root
// works as before, and Renew tells it to renew where it came from.
func TestGRPCAuthMatrix(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	r := startServer(t, p, "sqlite://"+filepath.Join(t.TempDir(), "p.db"), time.Hour)
	byo, err := p.root.IssueAgent("byo-1")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := byo.WriteFiles(filepath.Join(dir, "byo.crt"), filepath.Join(dir, "byo.key")); err != nil {
		t.Fatal(err)
	}
	anon := r.dial(t, "", "")
	withCert := r.dial(t, filepath.Join(dir, "byo.crt"), filepath.Join(dir, "byo.key"))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	calls := []struct {
		name string
		call func(*grpc.ClientConn) error
		anon codes.Code // without a certificate
		byo  codes.Code // with a bring-your-own certificate
	}{
		{"GetTrustBundle", func(c *grpc.ClientConn) error {
			_, err := plumblinev1.NewEnrollmentServiceClient(c).GetTrustBundle(ctx, &plumblinev1.GetTrustBundleRequest{})
			return err
		}, codes.OK, codes.OK},
		{"Enroll (bad token)", func(c *grpc.ClientConn) error {
			_, err := plumblinev1.NewEnrollmentServiceClient(c).Enroll(ctx, &plumblinev1.EnrollRequest{Token: "x"})
			return err
		}, codes.InvalidArgument, codes.InvalidArgument},
		{"Renew", func(c *grpc.ClientConn) error {
			_, err := plumblinev1.NewEnrollmentServiceClient(c).Renew(ctx, &plumblinev1.RenewRequest{})
			return err
		}, codes.Unauthenticated, codes.FailedPrecondition},
		{"Hello", func(c *grpc.ClientConn) error { return hello(c, "byo-1") }, codes.Unauthenticated, codes.OK},
		{"Report", func(c *grpc.ClientConn) error {
			_, err := plumblinev1.NewAgentServiceClient(c).Report(ctx, &plumblinev1.ReportRequest{AgentId: "byo-1"})
			return err
		}, codes.Unauthenticated, codes.OK},
		{"health Check", func(c *grpc.ClientConn) error {
			_, err := healthpb.NewHealthClient(c).Check(ctx, &healthpb.HealthCheckRequest{})
			return err
		}, codes.Unauthenticated, codes.OK},
		{"health Watch", func(c *grpc.ClientConn) error {
			w, err := healthpb.NewHealthClient(c).Watch(ctx, &healthpb.HealthCheckRequest{})
			if err == nil {
				_, err = w.Recv()
			}
			return err
		}, codes.Unauthenticated, codes.OK},
	}
	for _, c := range calls {
		if got := status.Code(c.call(anon)); got != c.anon {
			t.Errorf("%s without a certificate: %v, want %v", c.name, got, c.anon)
		}
		if got := status.Code(c.call(withCert)); got != c.byo {
			t.Errorf("%s with a bring-your-own certificate: %v, want %v", c.name, got, c.byo)
		}
	}
}

// scrape is the agent's /metrics page.
func scrape(t *testing.T, a *agent.Agent) string {
	t.Helper()
	rec := httptest.NewRecorder()
	a.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	return rec.Body.String()
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
