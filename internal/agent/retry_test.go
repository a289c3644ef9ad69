package agent

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

func refusal(t *testing.T, code codes.Code, wait time.Duration) error {
	t.Helper()
	st, err := status.New(code, "refused").WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(wait)})
	if err != nil {
		t.Fatal(err)
	}
	return st.Err()
}

// A refusal with the server's retry hint is waited out with jitter
// (between the hint and twice it, capped); anything else is not a hint.
func TestRetryAfter(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name    string
		err     error
		r       float64
		want    time.Duration
		wantOK  bool
		ceiling time.Duration
	}{
		{"busy, no jitter", refusal(t, codes.Unavailable, time.Second), 0, time.Second, true, time.Minute},
		{"busy, half jitter", refusal(t, codes.Unavailable, time.Second), 0.5, 1500 * time.Millisecond, true, time.Minute},
		{"rate, capped", refusal(t, codes.ResourceExhausted, time.Minute), 0.9, 30 * time.Second, true, 30 * time.Second},
		{"other code", refusal(t, codes.PermissionDenied, time.Second), 0, 0, false, time.Minute},
		{"no hint", status.Error(codes.Unavailable, "store unavailable"), 0, 0, false, time.Minute},
		{"not a status", errors.New("eof"), 0, 0, false, time.Minute},
		{"no error", nil, 0, 0, false, time.Minute},
	} {
		got, ok := RetryAfter(c.err, c.ceiling, c.r)
		if got != c.want || ok != c.wantOK {
			t.Errorf("%s: RetryAfter = %v, %v; want %v, %v", c.name, got, ok, c.want, c.wantOK)
		}
	}
}

// busyServer is testServer refusing every other Report before handling it,
// as admission does at capacity: Unavailable with a retry hint.
type busyServer struct {
	*testServer
	mu      sync.Mutex
	calls   int
	refused int
}

func (b *busyServer) Report(ctx context.Context, r *plumblinev1.ReportRequest) (*plumblinev1.ReportResponse, error) {
	b.mu.Lock()
	b.calls++
	refuse := b.calls%2 == 1
	if refuse {
		b.refused++
	}
	b.mu.Unlock()
	if refuse {
		st, _ := status.New(codes.Unavailable, "at capacity").WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(20 * time.Millisecond)})
		return nil, st.Err()
	}
	return b.testServer.Report(ctx, r)
}

// A server refusing Reports with a retry hint slows the agent down without
// costing a record or a session: every record arrives exactly once, on the
// one connection the agent said Hello on, and the refusals are counted.
func TestReportRefusalsKeepRecordsAndSession(t *testing.T) {
	p := newPKI(t, "db1")
	ts := &testServer{stored: map[uint64]*plumblinev1.Record{}, dropped: map[uint64]bool{}, maxBatch: 7}
	ts.creds = credentials.NewTLS(&tls.Config{
		MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{p.serverCert},
		ClientCAs: p.pool, ClientAuth: tls.RequireAndVerifyClientCert,
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ts.addr = ln.Addr().String()
	b := &busyServer{testServer: ts}
	ts.srv = grpc.NewServer(grpc.Creds(ts.creds))
	plumblinev1.RegisterAgentServiceServer(ts.srv, b)
	go ts.srv.Serve(ln)
	defer ts.stop()

	fp := &fakeProber{sleep: time.Millisecond}
	a := newTestAgent(t, testConfig(ts.addr, p, t.TempDir()), p, fp.run, fakeInventory("/data1"))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	waitFor(t, "40 records at the server", func() bool { s, _, _ := ts.snapshot(); return len(s) >= 40 })
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v", err)
	}
	stored, _, _ := ts.snapshot()
	checkExactlyOnce(t, stored)
	ts.mu.Lock()
	hellos := len(ts.hellos)
	ts.mu.Unlock()
	b.mu.Lock()
	refused := b.refused
	b.mu.Unlock()
	if hellos != 1 {
		t.Errorf("%d Hellos: a refusal with a retry hint ended the session", hellos)
	}
	if got := testutil.ToFloat64(a.metrics.refused); got == 0 || int(got) > refused {
		t.Errorf("plumbline_agent_reports_refused_total = %v, the server refused %d", got, refused)
	}
}
