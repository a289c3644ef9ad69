package authority_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/plumbline/plumbline/internal/enroll"
	"github.com/plumbline/plumbline/internal/server"
	"github.com/plumbline/plumbline/internal/server/authority"
	"github.com/plumbline/plumbline/internal/server/config"
	"github.com/plumbline/plumbline/internal/server/store"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// flood calls call from workers goroutines until stop is closed.
func flood(workers int, stop <-chan struct{}, call func()) *sync.WaitGroup {
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
					call()
				}
			}
		})
	}
	return &wg
}

// dialFrom connects from source address src (another host on loopback),
// with the pair in certFile/keyFile ("" for none).
func (r *running) dialFrom(t *testing.T, src, certFile, keyFile string) *grpc.ClientConn {
	t.Helper()
	tc := &tls.Config{MinVersion: tls.VersionTLS13, RootCAs: mustPool(t, r.cfg.GRPC.TLS.ClientCAFile), ServerName: "localhost"}
	if certFile != "" {
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			t.Fatal(err)
		}
		tc.Certificates = []tls.Certificate{pair}
	}
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
	conn, err := grpc.NewClient(r.addr, grpc.WithTransportCredentials(credentials.NewTLS(tc)),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }),
		grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(64<<20)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// While another address calls the enrollment service without a
// certificate (15 trust bundles and 15 Enrolls of 4 MiB with a bad token
// per second, the pace that emptied the server-wide enrollment bucket),
// real enrollments from other hosts succeed (≥ 99%: here all of them).
func TestEnrollsSucceedDuringAnonymousFlood(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	r := startServer(t, p, "sqlite://"+filepath.Join(t.TempDir(), "p.db"), time.Hour)
	attacker := plumblinev1.NewEnrollmentServiceClient(r.dialFrom(t, "127.0.0.2", "", ""))
	stop := make(chan struct{})
	var calls, refused atomic.Int64
	count := func(err error) {
		calls.Add(1)
		if status.Code(err) == codes.ResourceExhausted {
			refused.Add(1)
		}
	}
	big := &plumblinev1.EnrollRequest{Token: strings.Repeat("x", 4<<20-1024)}
	wg := paced(15, stop, func(ctx context.Context) {
		_, err := attacker.GetTrustBundle(ctx, &plumblinev1.GetTrustBundleRequest{})
		count(err)
	})
	defer wg.Wait()
	wg2 := paced(15, stop, func(ctx context.Context) {
		_, err := attacker.Enroll(ctx, big)
		count(err)
	})
	defer func() { close(stop); wg2.Wait() }()
	// The flood is at full strength once the server refuses some of it.
	for refused.Load() == 0 {
		time.Sleep(10 * time.Millisecond)
	}
	const n = 10
	failed := 0
	for i := range n {
		token, pin := r.token(t, authority.TokenSpec{})
		if _, err := r.enroll(t.TempDir(), token, pin, fmt.Sprintf("real-%d", i)); err != nil {
			failed++
			t.Logf("enroll %d during the flood: %v", i, err)
		}
	}
	if failed > 0 {
		t.Fatalf("%d of %d real enrollments failed during the flood (%d flood calls, %d refused)", failed, n, calls.Load(), refused.Load())
	}
}

// paced calls call perSecond times a second, each call in its own
// goroutine with a 5 s deadline, until stop is closed.
func paced(perSecond int, stop <-chan struct{}, call func(context.Context)) *sync.WaitGroup {
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(time.Second / time.Duration(perSecond))
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				wg.Go(func() {
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					defer cancel()
					call(ctx)
				})
			}
		}
	})
	return &wg
}

// One certificate renewing as fast as it can does not use up the
// renewals of other agents.
func TestRenewalsSucceedDuringRenewFlood(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	r := startServer(t, p, "sqlite://"+filepath.Join(t.TempDir(), "p.db"), time.Hour)
	enrolled := func(id string) enroll.Result {
		token, pin := r.token(t, authority.TokenSpec{})
		res, err := r.enroll(t.TempDir(), token, pin, id)
		if err != nil {
			t.Fatalf("enroll %s: %v", id, err)
		}
		return res
	}
	g := enrolled("greedy")
	const n = 5
	honest := make([]enroll.Result, n)
	for i := range honest {
		honest[i] = enrolled(fmt.Sprintf("honest-%d", i))
	}
	greedy := plumblinev1.NewEnrollmentServiceClient(r.dial(t, g.CertFile, g.KeyFile))
	csr := newCSR(t)
	stop := make(chan struct{})
	wg := flood(4, stop, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		greedy.Renew(ctx, &plumblinev1.RenewRequest{CsrDer: csr})
	})
	defer func() { close(stop); wg.Wait() }()
	failed := 0
	for i, h := range honest {
		c := plumblinev1.NewEnrollmentServiceClient(r.dial(t, h.CertFile, h.KeyFile))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := c.Renew(ctx, &plumblinev1.RenewRequest{CsrDer: csr})
		cancel()
		if err != nil {
			failed++
			t.Logf("renewal of honest-%d during the flood: %v", i, err)
		}
	}
	if failed > 0 {
		t.Fatalf("%d of %d real renewals failed while one certificate renewed in a loop", failed, n)
	}
}

func newCSR(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "renewal"}}, key)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

// A damaged store page under the enrollment lookup refuses every enrolled
// agent's handshake: the server says so — /readyz 503 with the reason,
// plumbline_enrollment_lookup_errors_total — rather than looking healthy.
func TestEnrollmentLookupStoreErrorMakesServerNotReady(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	dbFile := filepath.Join(t.TempDir(), "p.db")
	dsn := "sqlite://" + dbFile
	dataDir := t.TempDir()
	first, stop := startServerAt(t, p, dsn, dataDir)
	token, pin := first.token(t, authority.TokenSpec{})
	res, err := first.enroll(t.TempDir(), token, pin, "db-1")
	if err != nil {
		t.Fatal(err)
	}
	first.st.Close()
	stop()
	corruptTable(t, dbFile, "enrolled_agents")

	r, _ := startServerAt(t, p, dsn, dataDir)
	if code, body := get(t, "http://"+r.web+"/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz before any lookup: %d %s", code, body)
	}
	if err := hello(r.dial(t, res.CertFile, res.KeyFile), "db-1"); err == nil {
		t.Fatal("Hello of an enrolled agent succeeded over a damaged enrollment table")
	}
	code, body := get(t, "http://"+r.web+"/readyz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "enrollment lookup") {
		t.Fatalf("/readyz after the lookup failed: %d %s; want 503 naming the enrollment lookup", code, body)
	}
	if _, metrics := get(t, "http://"+r.web+"/metrics"); !strings.Contains(metrics, "plumbline_enrollment_lookup_errors_total") ||
		strings.Contains(metrics, "plumbline_enrollment_lookup_errors_total 0") {
		t.Fatalf("/metrics does not count the lookup errors:\n%s", grepLines(metrics, "lookup"))
	}
}

// webRunning is a running server with its web address.
type webRunning struct {
	*running
	web string
}

// startServerAt is startServer over a given data directory, with its web
// address, and a stop that waits for the server to return.
func startServerAt(t *testing.T, p *pki, dsn, dataDir string) (*webRunning, func()) {
	t.Helper()
	cfg := config.Default()
	cfg.DataDir = dataDir
	cfg.Store.DSN = dsn
	cfg.GRPC.ListenAddress, cfg.Web.ListenAddress = "127.0.0.1:0", "127.0.0.1:0"
	cfg.GRPC.TLS = config.TLSConfig{CertFile: p.serverCert, KeyFile: p.serverKey, ClientCAFile: p.rootFile}
	cfg.Enrollment.CACertFile, cfg.Enrollment.CAKeyFile = p.interCert, p.interKey
	cfg.ShutdownTimeout = 5 * time.Second
	type addrs struct{ g, w string }
	ready := make(chan addrs, 1)
	srv, err := server.New(cfg, slog.New(slog.DiscardHandler), server.Options{Ready: func(g, w string) { ready <- addrs{g, w} }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	var once sync.Once
	stop := func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	r := &webRunning{running: &running{cfg: cfg}}
	select {
	case a := <-ready:
		r.addr, r.web = a.g, a.w
	case err := <-done:
		t.Fatalf("server: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("server did not start")
	}
	if r.files, err = server.EnrollmentFiles(cfg); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	r.st = st
	t.Cleanup(func() { st.Close() })
	return r, stop
}

// corruptTable overwrites the root pages of table's b-trees (the table
// and its indexes) in the SQLite file with garbage.
func corruptTable(t *testing.T, file, table string) {
	t.Helper()
	db, err := sql.Open("sqlite", file)
	if err != nil {
		t.Fatal(err)
	}
	var pageSize int64
	if err := db.QueryRow(`PRAGMA page_size`).Scan(&pageSize); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		t.Fatal(err)
	}
	rows, err := db.Query(`SELECT rootpage FROM sqlite_master WHERE tbl_name = ? AND rootpage > 1`, table)
	if err != nil {
		t.Fatal(err)
	}
	var pages []int64
	for rows.Next() {
		var pg int64
		if err := rows.Scan(&pg); err != nil {
			t.Fatal(err)
		}
		pages = append(pages, pg)
	}
	rows.Close()
	db.Close()
	if len(pages) == 0 {
		t.Fatalf("no pages of %s", table)
	}
	f, err := os.OpenFile(file, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	garbage := []byte(strings.Repeat("\xa5", int(pageSize)))
	for _, pg := range pages {
		if _, err := f.WriteAt(garbage, (pg-1)*pageSize); err != nil {
			t.Fatal(err)
		}
	}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
