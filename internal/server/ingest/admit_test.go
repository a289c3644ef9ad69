package ingest

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/plumbline/plumbline/internal/server/store"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// enrollStub stands for the enrollment authority (internal/server/authority
// registers the real one on the same server).
type enrollStub struct {
	plumblinev1.UnimplementedEnrollmentServiceServer
}

func (enrollStub) GetTrustBundle(context.Context, *plumblinev1.GetTrustBundleRequest) (*plumblinev1.GetTrustBundleResponse, error) {
	return &plumblinev1.GetTrustBundleResponse{CaCertificatesPem: []byte("bundle")}, nil
}

func (enrollStub) Renew(context.Context, *plumblinev1.RenewRequest) (*plumblinev1.RenewResponse, error) {
	return &plumblinev1.RenewResponse{}, nil
}

var publicMethods = []string{enrollSvc + "GetTrustBundle", enrollSvc + "Enroll"}

// startOpenServer is startServer as the server runs with enrollment on:
// connections without a certificate are accepted, for the public
// enrollment methods only, and the enrollment service is registered.
func startOpenServer(t *testing.T, opts Options) *env {
	t.Helper()
	p := newPKI(t)
	st, err := store.Open(context.Background(), sqliteDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	tc, err := ServerTLSConfig(p.certFile, p.keyFile, p.caFile)
	if err != nil {
		t.Fatal(err)
	}
	tc.ClientAuth = tls.VerifyClientCertIfGiven
	opts.PublicMethods = publicMethods
	svc := New(st, opts)
	gs, _, err := NewGRPCServer(svc, tc)
	if err != nil {
		t.Fatal(err)
	}
	plumblinev1.RegisterEnrollmentServiceServer(gs, enrollStub{})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go gs.Serve(l)
	t.Cleanup(func() { gs.Stop(); st.Close() })
	return &env{addr: l.Addr().String(), pki: p, store: st, svc: svc, gs: gs}
}

// Every method the gRPC server serves has its own admission rule: a
// service registered later cannot fall through to the default unnoticed.
func TestEveryMethodHasAnAdmissionRule(t *testing.T) {
	t.Parallel()
	e := startOpenServer(t, Options{})
	rules := methodRules()
	n := 0
	for svc, info := range e.gs.GetServiceInfo() {
		for _, m := range info.Methods {
			full := "/" + svc + "/" + m.Name
			n++
			if _, ok := rules[full]; !ok {
				t.Errorf("%s has no admission rule (methodRules)", full)
			}
			if inputType(full) == "" {
				t.Errorf("%s: request type unknown: its message limit cannot be checked", full)
			}
		}
	}
	if n < 9 {
		t.Fatalf("only %d methods registered", n)
	}
}

// A call without a certificate to a method that needs one is refused when
// its headers arrive: the server answers Unauthenticated without asking
// for a byte of the 4 MiB message (no WINDOW_UPDATE for the stream), for
// the enrollment service's Renew and the health service as for the agent
// service and a method nobody registered.
func TestUnauthenticatedRefusedBeforeRead(t *testing.T) {
	t.Parallel()
	e := startOpenServer(t, Options{})
	raw := dialH2(t, e, "")
	for _, m := range []string{
		enrollSvc + "Renew", healthSvc + "Check", healthSvc + "Watch", agentSvc + "Hello",
		agentSvc + "Report", agentSvc + "WatchPolicy", "/plumbline.v1.Later/Added",
	} {
		id := raw.announceCall(t, m, 4<<20-64)
		got := raw.firstWord(t, id)
		if got.window != 0 || got.status != "200/16" {
			t.Errorf("%s without a certificate: first word %+v, want HEADERS with grpc-status 16 (Unauthenticated) and no window for the message", m, got)
		}
	}
	if n := e.svc.adm.stats.bytesRead(); n != 0 {
		t.Errorf("the server read %d bytes of refused messages", n)
	}
}

// An anonymous caller's big enrollment messages count against its
// address: two calls stuck in the middle of 4 MiB hold its budget, the
// third is refused before it is read, and a message over the method's
// limit is refused before it is decoded.
func TestAnonymousCallsCountAgainstTheirAddress(t *testing.T) {
	t.Parallel()
	e := startOpenServer(t, Options{})
	raw := dialH2(t, e, "")
	raw.announceCall(t, enrollSvc+"Enroll", 4<<20-64)
	raw.announceCall(t, enrollSvc+"Enroll", 4<<20-64)
	third := raw.announceCall(t, enrollSvc+"Enroll", 4<<20-64)
	if got := raw.firstWord(t, third); got.status != "200/8" {
		t.Fatalf("third stuck Enroll from one address: first word %+v, want grpc-status 8 (ResourceExhausted)", got)
	}
	if got := e.svc.adm.agentInflight("peer 127.0.0.1"); got != 8<<20 {
		t.Fatalf("address holds %d bytes, want %d", got, 8<<20)
	}
	raw.conn.Close()
	// The server releases the stuck calls' budget when it sees the
	// connection go: wait for that, or the next call meets the old budget.
	for deadline := time.Now().Add(10 * time.Second); e.svc.adm.agentInflight("peer 127.0.0.1") != 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("address still holds %d bytes after its connection closed", e.svc.adm.agentInflight("peer 127.0.0.1"))
		}
	}

	cc := dialEnroll(t, e, nil)
	_, err := cc.Enroll(ctxT(t), &plumblinev1.EnrollRequest{Token: strings.Repeat("x", 64<<10)})
	wantCode(t, "Enroll of 64 KiB", err, codes.ResourceExhausted, "at most")
	if got := e.svc.adm.stats.refusals(enrollSvc+"Enroll", reasonTooBig); got != 1 {
		t.Fatalf("message-size refusals of Enroll: %d, want 1", got)
	}
	if _, err := cc.GetTrustBundle(ctxT(t), &plumblinev1.GetTrustBundleRequest{}); err != nil {
		t.Fatalf("GetTrustBundle: %v", err)
	}
}

func dialEnroll(t *testing.T, e *env, leafID *string) plumblinev1.EnrollmentServiceClient {
	t.Helper()
	tc := clientTLS(e.pki.ca.Pool(), nil)
	if leafID != nil {
		leaf, err := e.pki.ca.IssueAgent(*leafID)
		if err != nil {
			t.Fatal(err)
		}
		tc = clientTLS(e.pki.ca.Pool(), leaf)
	}
	cc, err := grpc.NewClient(e.addr, grpc.WithTransportCredentials(credentials.NewTLS(tc)), grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(64<<20)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return plumblinev1.NewEnrollmentServiceClient(cc)
}

// One identity renewing in a loop uses up its own renewals, not another
// agent's: refused before its message is read, with the wait to retry.
func TestRenewRateIsPerIdentity(t *testing.T) {
	t.Parallel()
	e := startOpenServer(t, Options{RenewRatePerSecond: 0.001, RenewBurst: 3})
	greedy, other := "renew-greedy", "renew-other"
	g, o := dialEnroll(t, e, &greedy), dialEnroll(t, e, &other)
	var refused error
	for i := range 20 {
		if _, err := g.Renew(ctxT(t), &plumblinev1.RenewRequest{}); err != nil {
			if i < 3 {
				t.Fatalf("renewal %d within the burst: %v", i+1, err)
			}
			refused = err
		}
	}
	wantCode(t, "greedy renewal past its burst", refused, codes.ResourceExhausted, "rate limit")
	if d := retryDelay(refused); d <= 0 {
		t.Fatalf("refusal %v carries no retry delay", refused)
	}
	for i := range 3 {
		if _, err := o.Renew(ctxT(t), &plumblinev1.RenewRequest{}); err != nil {
			t.Fatalf("other agent's renewal %d: %v", i+1, err)
		}
	}
}

// retryDelay is the RetryInfo of err's status (0: none).
func retryDelay(err error) time.Duration {
	for _, d := range status.Convert(err).Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			return ri.GetRetryDelay().AsDuration()
		}
	}
	return 0
}

// One agent holds at most MaxLongPolls WatchPolicy calls; the next is
// refused before it is read, another agent's still waits.
func TestLongPollsCappedPerAgent(t *testing.T) {
	t.Parallel()
	e := startServer(t, sqliteDSN(t), newPKI(t), Options{MaxLongPolls: 2, RatePerSecond: -1})
	a, b := e.agent(t, "poller"), e.agent(t, "other-poller")
	hello(t, a, "poller")
	hello(t, b, "other-poller")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	watch := func(c plumblinev1.AgentServiceClient, id string) error {
		_, err := c.WatchPolicy(ctx, &plumblinev1.WatchPolicyRequest{AgentId: id, Wait: durationpb.New(time.Hour)})
		return err
	}
	errs := make(chan error, 2)
	for range 2 {
		go func() { errs <- watch(a, "poller") }()
	}
	deadline := time.Now().Add(30 * time.Second)
	for e.svc.adm.polls("poller") < 2 {
		if time.Now().After(deadline) {
			t.Fatal("the two long-polls never arrived")
		}
		time.Sleep(5 * time.Millisecond)
	}
	wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer wcancel()
	_, err := a.WatchPolicy(wctx, &plumblinev1.WatchPolicyRequest{AgentId: "poller", Wait: durationpb.New(time.Hour)})
	wantCode(t, "third long-poll", err, codes.ResourceExhausted, "waiting")
	go func() { errs <- watch(b, "other-poller") }()
	for e.svc.adm.polls("other-poller") < 1 {
		if time.Now().After(deadline) {
			t.Fatal("the other agent's long-poll was not admitted")
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	for range 3 {
		<-errs
	}
}

// Over capacity, a Report is refused before it is read with Unavailable
// and a retry hint, and admitted again once the reports in progress end.
func TestBusyServerRefusesReportsWithRetryHint(t *testing.T) {
	t.Parallel()
	e := startServer(t, sqliteDSN(t), newPKI(t), Options{MaxPendingReports: 1, BusyRetryAfter: 3 * time.Second, RatePerSecond: -1})
	c := e.agent(t, "honest")
	hello(t, c, "honest")
	raw := dialH2(t, e, "slow")
	raw.announce(t, 1<<10)
	deadline := time.Now().Add(30 * time.Second)
	for e.svc.adm.pendingReports() < 1 {
		if time.Now().After(deadline) {
			t.Fatal("the stuck report was not admitted")
		}
		time.Sleep(5 * time.Millisecond)
	}
	err := reportOK(t, c, "honest", 1, 10*time.Second)
	wantCode(t, "report while the server is at capacity", err, codes.Unavailable, "capacity")
	if d := retryDelay(err); d != 3*time.Second {
		t.Fatalf("retry delay %v, want 3s", d)
	}
	raw.conn.Close()
	for e.svc.adm.pendingReports() > 0 {
		if time.Now().After(deadline) {
			t.Fatal("the stuck report still counts after its connection closed")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := reportOK(t, c, "honest", 1, 10*time.Second); err != nil {
		t.Fatalf("report once the server has room: %v", err)
	}
}

// A health check needs a certificate and a small message.
func TestHealthCheckAdmitted(t *testing.T) {
	t.Parallel()
	e := startServer(t, sqliteDSN(t), newPKI(t), Options{})
	leaf, err := e.pki.ca.IssueAgent("checker")
	if err != nil {
		t.Fatal(err)
	}
	cc, err := grpc.NewClient(e.addr, grpc.WithTransportCredentials(credentials.NewTLS(clientTLS(e.pki.ca.Pool(), leaf))))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	h := healthpb.NewHealthClient(cc)
	if _, err := h.Check(ctxT(t), &healthpb.HealthCheckRequest{Service: plumblinev1.AgentService_ServiceDesc.ServiceName}); err != nil {
		t.Fatalf("Check: %v", err)
	}
	_, err = h.Check(ctxT(t), &healthpb.HealthCheckRequest{Service: strings.Repeat("s", 4<<10)})
	wantCode(t, fmt.Sprintf("Check of %d bytes", 4<<10), err, codes.ResourceExhausted, "at most")
}

// A call that announces its message and never sends it gives its
// reservations back after MessageReadTimeout, while its connection stays
// open: a slow sender cannot hold an agent's budget or a report slot.
func TestLateMessageReleasesReservations(t *testing.T) {
	t.Parallel()
	e := startServer(t, sqliteDSN(t), newPKI(t), Options{MessageReadTimeout: 200 * time.Millisecond, RatePerSecond: -1})
	raw := dialH2(t, e, "slowloris")
	raw.announce(t, 1<<20)
	deadline := time.Now().Add(30 * time.Second)
	for e.svc.adm.stats.refusals(agentSvc+"Report", reasonSlow) == 0 || e.svc.adm.agentInflight("slowloris") != 0 || e.svc.adm.pendingReports() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("after the read timeout: %d bytes held, %d reports in progress, %d slow refusals",
				e.svc.adm.agentInflight("slowloris"), e.svc.adm.pendingReports(), e.svc.adm.stats.refusals(agentSvc+"Report", reasonSlow))
		}
		time.Sleep(5 * time.Millisecond)
	}
	c := e.agent(t, "slowloris")
	hello(t, c, "slowloris")
	if err := reportOK(t, c, "slowloris", 1, 10*time.Second); err != nil {
		t.Fatalf("report after the late call was cancelled: %v", err)
	}
}
