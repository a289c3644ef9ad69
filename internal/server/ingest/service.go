// Package ingest is the server side of the agent service
// (plumbline.v1.AgentService): who is calling (the client certificate),
// whether they may (their own identity only, a per-agent rate limit), what
// they sent (validation of every record) and storing it exactly once
// (internal/server/store's dedup by agent and sequence).
//
// Identity: with mutual TLS (the default) an agent's identity is read from
// its verified client certificate by identity.FromCertificate — the URI SAN
// plumbline://agent/<id> when present, else the subject common name. A
// Hello or Report whose agent_id differs is refused with PermissionDenied.
// Only with Options.Insecure (plaintext, `server --insecure`) is the
// agent_id of the request taken on trust.
package ingest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"
	"time"

	"golang.org/x/time/rate"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/plumbline/plumbline/internal/identity"
	"github.com/plumbline/plumbline/internal/labels"
	"github.com/plumbline/plumbline/internal/policy"
	"github.com/plumbline/plumbline/internal/server/grpcservice"
	"github.com/plumbline/plumbline/internal/server/store"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// DefaultMaxRecvMsgSize is the default limit on one incoming message.
const DefaultMaxRecvMsgSize = 4 << 20

// Defaults of the admission bounds (Options).
const (
	DefaultMaxConcurrentStreams = 16
	DefaultMaxInflightBytes     = 64 << 20
)

// Flow-control windows of every connection. Setting them turns off gRPC's
// window growth (BDP estimation, up to 16 MiB per stream), so a call not
// yet admitted (admission) has at most streamWindow bytes buffered.
const (
	streamWindow = 64 << 10
	connWindow   = 1 << 20
)

// Options configure a Service. Zero values mean the defaults.
type Options struct {
	Limits Limits
	// Quota bounds what each agent identity may send and store.
	Quota Quota
	// MaxRecvMsgSize bounds one incoming gRPC message (default 4 MiB); a
	// bigger one is refused with ResourceExhausted before it is decoded.
	MaxRecvMsgSize int
	// GeometryRefreshInterval and ReportInterval are announced to agents
	// in HelloResponse (defaults 15m and 10s).
	GeometryRefreshInterval time.Duration
	ReportInterval          time.Duration
	// AgentDownAfter is the down threshold (see liveness.go): how long an
	// agent with no open connection and no report counts as up (default
	// DefaultAgentDownAfter(ReportInterval)). The connected agents are
	// noted every third of it, and the keepalive closes a dead connection
	// within two thirds.
	AgentDownAfter time.Duration
	// RatePerSecond and RateBurst are each agent's token bucket of calls
	// (Hello and Report); a call beyond it is refused with
	// ResourceExhausted. RatePerSecond < 0 turns the limit off; 0 means
	// the default (20 calls/s, burst 40).
	RatePerSecond float64
	RateBurst     int
	// MaxConcurrentStreams bounds the calls one connection carries at a
	// time (default 16; an agent makes one at a time).
	MaxConcurrentStreams uint32
	// MaxInflightBytes bounds the bytes of incoming messages the server
	// holds at once (default 64 MiB), MaxAgentInflightBytes those of one
	// agent (default twice MaxRecvMsgSize). A call reserves
	// MaxRecvMsgSize before its message is read and its real size once
	// decoded (see admission). A call beyond its agent's budget is refused
	// with ResourceExhausted; beyond the server's, it waits. With Insecure
	// (no certificates: no identity before decoding) only the server's
	// budget applies.
	MaxInflightBytes      int64
	MaxAgentInflightBytes int64
	// MaxAnonymousInflightBytes bounds the bytes of messages read at once
	// from callers without a certificate (enrollment; default 16 MiB), so
	// they cannot hold the budget agents need; each address may have
	// MaxAgentInflightBytes of it.
	MaxAnonymousInflightBytes int64
	// MaxLongPolls bounds the calls one identity may have waiting for news
	// (WatchPolicy, the health service's Watch; default 4: an agent makes
	// one).
	MaxLongPolls int
	// MaxPendingReports bounds the Report calls in progress on this
	// server (default 64): beyond it a Report is refused before its
	// message is read (Unavailable, with a RetryInfo of BusyRetryAfter),
	// and agents keep their records and come back. It is what keeps a
	// fleet offering more than the store can take from growing the
	// server's memory and every report's latency. < 0: no cap.
	MaxPendingReports int
	// BusyRetryAfter is the wait the server asks for when it refuses a
	// call for its own load or the caller's in-flight budget (default 1s;
	// agents add jitter).
	BusyRetryAfter time.Duration
	// MessageReadTimeout bounds the time from a call's admission to its
	// message being read (default 30s, an agent's call timeout): a call
	// whose message is late is cancelled and gives its reservations
	// back. < 0: none.
	MessageReadTimeout time.Duration
	// RenewRatePerSecond and RenewBurst bound each identity's certificate
	// renewals (default 0.1/s, burst 10); AddressRatePerSecond and
	// AddressBurst each source address's enrollment calls, GetTrustBundle
	// and Enroll together (default 2/s, burst 40: an enrolling host makes
	// two calls, once; below the server-wide enrollment bucket's 5/s, so
	// one address cannot empty it). < 0: off.
	RenewRatePerSecond   float64
	RenewBurst           int
	AddressRatePerSecond float64
	AddressBurst         int
	// Policy is the central policy agents receive in Hello and through
	// WatchPolicy; nil: none (Hello carries no policy; WatchPolicy waits
	// and answers an empty one). What agents say of their policy is stored
	// either way (PolicyReports). PolicyMaxWait caps a WatchPolicy call's
	// wait (default 5m).
	Policy        *policy.Source
	PolicyMaxWait time.Duration
	// Insecure: no TLS, the agent_id of each request is trusted.
	Insecure bool
	// PublicMethods are full method names a client without a certificate
	// may call (enrollment: the listener then accepts connections without
	// one, tls.VerifyClientCertIfGiven); every other method needs a
	// verified client certificate. They count against the caller's host
	// in admission.
	PublicMethods []string
	// Authorize, when set, may refuse an AgentService call after the
	// identity check, from the connection's verified certificate (an
	// enrolled agent revoked since its handshake, an expired certificate).
	Authorize func(ctx context.Context, agentID string, cert *x509.Certificate) error
	Logger    *slog.Logger
	// Judge judges the volumes of every snapshot and of every stripe-scan
	// run under its rules (nil: the shipped rules). Its loop (Judge.Run)
	// is the caller's to run.
	Judge *Judge
	// Now is the clock (default time.Now).
	Now func() time.Time
}

func (o Options) withDefaults() Options {
	o.Limits = o.Limits.withDefaults()
	if o.MaxRecvMsgSize <= 0 {
		o.MaxRecvMsgSize = DefaultMaxRecvMsgSize
	}
	if o.MaxConcurrentStreams == 0 {
		o.MaxConcurrentStreams = DefaultMaxConcurrentStreams
	}
	if o.MaxInflightBytes <= 0 {
		o.MaxInflightBytes = DefaultMaxInflightBytes
	}
	if o.MaxAgentInflightBytes <= 0 {
		o.MaxAgentInflightBytes = 2 * int64(o.MaxRecvMsgSize)
	}
	o = o.admissionDefaults()
	if o.GeometryRefreshInterval <= 0 {
		o.GeometryRefreshInterval = 15 * time.Minute
	}
	if o.ReportInterval <= 0 {
		o.ReportInterval = 10 * time.Second
	}
	if o.AgentDownAfter <= 0 {
		o.AgentDownAfter = DefaultAgentDownAfter(o.ReportInterval)
	}
	if o.RatePerSecond == 0 {
		o.RatePerSecond = 20
	}
	if o.RateBurst <= 0 {
		o.RateBurst = 40
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.PolicyMaxWait <= 0 {
		o.PolicyMaxWait = DefaultPolicyMaxWait
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	o.Quota = o.Quota.withDefaults(o.Limits)
	return o
}

// Service implements plumbline.v1.AgentService over a store.
type Service struct {
	plumblinev1.UnimplementedAgentServiceServer

	store   Store
	judge   *Judge
	opts    Options
	lim     *limiters
	records *limiters // each agent's record-rate quota (nil: off)
	// conflictLog: one identity-conflict log line per agent per episode.
	conflictLog episodeLog
	adm         *admission
	codec       *sizeCodec
	// live counts the open WatchPolicy calls of each agent (liveness.go).
	live connections
}

// Store is what the ingest service reads and writes.
type Store interface {
	JudgeStore
	UpsertAgent(ctx context.Context, a store.Agent) error
	Hello(ctx context.Context, agentID, incarnation string) (store.HelloState, error)
	AppendBatchQuota(ctx context.Context, agentID, incarnation string, first uint64, records []store.Record, q store.Quota) (store.AppendResult, error)
	CountQuotaRefusal(ctx context.Context, agentID string) error
	MarkConnected(ctx context.Context, ids []string, at time.Time) error
	PutAgentPolicy(ctx context.Context, p store.AgentPolicy) error
	AgentLabels(ctx context.Context, agentID string) (map[string]string, error)
	AgentPolicies(ctx context.Context, host string) ([]store.AgentPolicy, error)
}

var _ Store = (*store.Store)(nil)

// New returns a Service storing into st, judging under opts.Judge's rules
// (nil: a judge of the shipped rules over st).
func New(st Store, opts Options) *Service {
	opts = opts.withDefaults()
	s := &Service{store: st, opts: opts, judge: opts.Judge}
	if s.judge == nil {
		s.judge, _ = NewJudge(st, JudgeOptions{Logger: opts.Logger}) // the shipped rules always check
	}
	if opts.RatePerSecond > 0 {
		s.lim = newLimiters(rate.Limit(opts.RatePerSecond), opts.RateBurst, opts.Now)
	}
	if opts.Quota.RecordsPerSecond > 0 {
		s.records = newLimiters(rate.Limit(opts.Quota.RecordsPerSecond), opts.Quota.RecordBurst, opts.Now)
	}
	var lim [rateFamilies]*limiters
	lim[rateAgent] = s.lim
	if opts.RenewRatePerSecond > 0 {
		lim[rateRenew] = newLimiters(rate.Limit(opts.RenewRatePerSecond), opts.RenewBurst, opts.Now)
	}
	if opts.AddressRatePerSecond > 0 {
		lim[rateAddress] = newLimiters(rate.Limit(opts.AddressRatePerSecond), opts.AddressBurst, opts.Now)
	}
	s.adm = newAdmission(admissionLimits{
		reserve: int64(opts.MaxRecvMsgSize), keyBudget: opts.MaxAgentInflightBytes,
		agentPool: opts.MaxInflightBytes, anonPool: opts.MaxAnonymousInflightBytes,
		maxLongPolls: opts.MaxLongPolls, maxPending: opts.MaxPendingReports, busyRetry: opts.BusyRetryAfter, readTimeout: opts.MessageReadTimeout,
		insecure: opts.Insecure, public: opts.PublicMethods, lim: lim,
	})
	s.codec = newSizeCodec(msgLimits(s.adm.rules, int64(opts.MaxRecvMsgSize)))
	return s
}

// Options returns the service's options with defaults applied.
func (s *Service) Options() Options { return s.opts }

// NewGRPCServer returns a gRPC server with the agent service and the
// standard health service registered, the message size limit, keepalive
// policy, and the identity, rate-limit and panic-recovery interceptor.
// tlsConfig nil means plaintext and requires Options.Insecure.
func NewGRPCServer(svc *Service, tlsConfig *tls.Config) (*grpc.Server, *health.Server, error) {
	if tlsConfig == nil && !svc.opts.Insecure {
		return nil, nil, errors.New("no TLS configuration and not insecure: refusing to serve plaintext")
	}
	opts := []grpc.ServerOption{
		grpc.MaxRecvMsgSize(svc.opts.MaxRecvMsgSize),
		grpc.MaxConcurrentStreams(svc.opts.MaxConcurrentStreams),
		grpc.InitialWindowSize(streamWindow),
		grpc.InitialConnWindowSize(connWindow),
		grpc.InTapHandle(svc.adm.tap),
		grpc.StatsHandler(statsHandler{}),
		grpc.ForceServerCodecV2(svc.codec),
		grpc.ChainUnaryInterceptor(svc.unaryInterceptor),
		grpc.ChainStreamInterceptor(svc.streamInterceptor),
		grpc.KeepaliveParams(svc.opts.keepaliveParams()),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 20 * time.Second, PermitWithoutStream: true}),
		// Memory per connected agent (bench/RESULTS-fleet.md): an agent
		// holds its connection open and calls once per report interval, so
		// per-connection buffers are idle almost all the time. By default
		// gRPC keeps a 32 KiB write buffer and a 32 KiB read buffer per
		// connection for its life — two thirds of an idle connection's
		// heap. The write buffer is taken from a pool for each flush and
		// given back instead.
		grpc.SharedWriteBuffer(true),
	}
	if tlsConfig != nil {
		// No read buffer of gRPC's own over TLS: crypto/tls already reads
		// whole records into its own buffer and serves the HTTP/2 framer
		// from it, so a second 32 KiB buffer per connection only copies.
		// (Plaintext, --insecure, keeps it: there every frame header would
		// be a read system call.)
		creds := handshakeCreds{TransportCredentials: credentials.NewTLS(tlsConfig), log: newHandshakeLog(svc.opts.Logger, svc.opts.Now)}
		opts = append(opts, grpc.Creds(creds), grpc.ReadBufferSize(0))
	}
	gs := grpc.NewServer(opts...)
	grpcservice.Register(gs, &plumblinev1.AgentService_ServiceDesc, svc)
	hs := health.NewServer()
	grpcservice.Register(gs, &healthpb.Health_ServiceDesc, hs)
	hs.SetServingStatus(plumblinev1.AgentService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	return gs, hs, nil
}

type identityKey struct{}

// identityFrom returns the identity the interceptor found ("" when
// insecure).
func identityFrom(ctx context.Context) (string, bool) {
	id, ok := ctx.Value(identityKey{}).(string)
	return id, ok
}

// agentServicePrefix is the full method prefix of AgentService.
var agentServicePrefix = "/" + plumblinev1.AgentService_ServiceDesc.ServiceName + "/"

type agentIDGetter interface{ GetAgentId() string }

func (s *Service) unaryInterceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
	defer func() {
		if p := recover(); p != nil {
			s.opts.Logger.Error("panic in gRPC handler", "method", info.FullMethod, "panic", p, "stack", string(debug.Stack()))
			resp, err = nil, status.Error(codes.Internal, "internal error")
		}
	}()
	if err := s.checkSize(info.FullMethod, req); err != nil {
		return nil, err
	}
	if !strings.HasPrefix(info.FullMethod, agentServicePrefix) {
		if err := s.checkOther(ctx, info.FullMethod); err != nil {
			return nil, err
		}
		return handler(ctx, req)
	}
	id := ""
	if !s.opts.Insecure {
		var cert *x509.Certificate
		id, cert, err = peerIdentity(ctx)
		if err != nil {
			return nil, status.Error(codes.Unauthenticated, err.Error())
		}
		if s.opts.Authorize != nil {
			if err := s.opts.Authorize(ctx, id, cert); err != nil {
				return nil, err
			}
		}
	}
	key := id
	if key == "" {
		if g, ok := req.(agentIDGetter); ok {
			key = g.GetAgentId()
		}
	}
	// With certificates the rate limit ran before the message was read
	// (admission.tap); without, the agent_id is only known now.
	if s.lim != nil && s.opts.Insecure && !s.lim.allow(key) {
		return nil, s.rateError(key)
	}
	return handler(context.WithValue(ctx, identityKey{}, id), req)
}

func (s *Service) rateError(key string) error {
	return status.Errorf(codes.ResourceExhausted, "agent %q: rate limit of %g calls/s (burst %d) exceeded; retry later", key, s.opts.RatePerSecond, s.opts.RateBurst)
}

// streamInterceptor guards the streaming methods (the health service's
// Watch) as checkOther does.
func (s *Service) streamInterceptor(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if err := s.checkOther(ss.Context(), info.FullMethod); err != nil {
		return err
	}
	return handler(srv, sizedStream{ss, s, info.FullMethod})
}

// checkOther is the check of a method outside AgentService: a public one
// (Options.PublicMethods) passes, every other needs a verified client
// certificate (with TLS).
func (s *Service) checkOther(ctx context.Context, method string) error {
	if s.opts.Insecure || s.adm.public[method] {
		return nil
	}
	if _, err := verifiedCert(ctx); err != nil {
		return status.Errorf(codes.Unauthenticated, "%s: %v", method, err)
	}
	return nil
}

// peerIdentity reads the agent identity from the verified client
// certificate of the call's connection, and returns the certificate.
func peerIdentity(ctx context.Context) (string, *x509.Certificate, error) {
	cert, err := verifiedCert(ctx)
	if err != nil {
		return "", nil, err
	}
	id, err := identity.FromCertificate(cert)
	return id, cert, err
}

// verifiedCert is the verified client certificate of the call's connection.
func verifiedCert(ctx context.Context) (*x509.Certificate, error) {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return nil, errors.New("no peer")
	}
	ti, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok {
		return nil, errors.New("not a TLS connection")
	}
	if len(ti.State.VerifiedChains) == 0 || len(ti.State.VerifiedChains[0]) == 0 {
		return nil, errors.New("no verified client certificate")
	}
	return ti.State.VerifiedChains[0][0], nil
}

// checkCaller compares the request's agent_id with the connection's identity.
func (s *Service) checkCaller(ctx context.Context, agentID string) error {
	if err := identity.CheckAgentID(agentID); err != nil {
		return status.Error(codes.InvalidArgument, "agent_id: "+err.Error())
	}
	id, ok := identityFrom(ctx)
	if !ok {
		// Called without the interceptor (not through NewGRPCServer).
		if s.opts.Insecure {
			return nil
		}
		return status.Error(codes.Unauthenticated, "no identity: serve through NewGRPCServer")
	}
	if id != "" && id != agentID {
		return status.Errorf(codes.PermissionDenied, "agent_id %q: this connection's certificate identifies agent %q, which may report only for itself", agentID, id)
	}
	return nil
}

// Hello registers the agent and answers with the intervals and its
// high-water mark.
func (s *Service) Hello(ctx context.Context, req *plumblinev1.HelloRequest) (*plumblinev1.HelloResponse, error) {
	if err := s.checkCaller(ctx, req.GetAgentId()); err != nil {
		return nil, err
	}
	if err := CheckIncarnation(req.GetIncarnation()); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	h := req.GetHost()
	for _, f := range []struct{ name, v string }{
		{"host.hostname", h.GetHostname()}, {"host.os", h.GetOs()}, {"host.kernel", h.GetKernel()},
		{"host.machine_id", h.GetMachineId()}, {"agent_version", req.GetAgentVersion()},
	} {
		if err := checkHostField(f.v); err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "%s: %v", f.name, err)
		}
	}
	if err := labels.Check(req.GetLabels()); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "labels: %v", err)
	}
	// Every string, of the fields above and any added later: printable.
	if err := checkGeneric(req.ProtoReflect(), "hello", s.opts.Limits.withDefaults(), 0); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	hostname := h.GetHostname()
	if hostname == "" {
		hostname = req.GetAgentId()
	}
	now := s.opts.Now()
	agent := store.Agent{
		ID: req.GetAgentId(), Hostname: hostname, OS: h.GetOs(), Kernel: h.GetKernel(),
		MachineID: h.GetMachineId(), AgentVersion: req.GetAgentVersion(), LastSeen: now,
	}
	// Every connection starts with a Hello, so a renewed certificate shows
	// here at the agent's next connection (insecure mode: none).
	if cert, err := verifiedCert(ctx); err == nil {
		agent.CertNotBefore, agent.CertNotAfter = cert.NotBefore, cert.NotAfter
	}
	err := s.store.UpsertAgent(ctx, agent)
	if err != nil {
		return nil, s.storeError(ctx, "hello", req.GetAgentId(), err)
	}
	inc := req.GetIncarnation()
	st, err := s.store.Hello(ctx, req.GetAgentId(), inc)
	if err != nil {
		return nil, s.storeError(ctx, "hello", req.GetAgentId(), err)
	}
	if st.IdentityConflict {
		s.identityConflict(req.GetAgentId(), inc, st.Superseded, "hello")
	}
	s.opts.Logger.Debug("hello", "agent", req.GetAgentId(), "incarnation", inc, "version", req.GetAgentVersion(), "high_water", st.HighWater)
	digest, _ := hex.DecodeString(st.GeometryDigest) // written by the store from a checked digest
	pol, _, err := s.agentPolicy(ctx, req.GetAgentId(), hostname, labels.Fold(req.GetLabels()), nil, now)
	if err != nil {
		return nil, err
	}
	return &plumblinev1.HelloResponse{
		Policy:                  pol,
		GeometryRefreshInterval: durationpb.New(s.opts.GeometryRefreshInterval),
		ReportInterval:          durationpb.New(s.opts.ReportInterval),
		HighWaterSequence:       st.HighWater,
		MaxBatchRecords:         uint32(s.opts.Limits.MaxBatchRecords),
		ServerTime:              timestamppb.New(now),
		GeometryDigest:          digest,
	}, nil
}

// maxHostFieldBytes bounds each host fact of a Hello.
const maxHostFieldBytes = 256

// checkHostField accepts the host facts of a Hello: at most
// maxHostFieldBytes of printable text (labels.CheckText). They are
// printed on operators' terminals (`server inventory list`) and in CSV
// files, where ESC, CR, NUL or a bidi override would rewrite what the
// operator sees.
func checkHostField(v string) error {
	if len(v) > maxHostFieldBytes {
		return fmt.Errorf("%d bytes: want at most %d", len(v), maxHostFieldBytes)
	}
	return labels.CheckText(v)
}

// Report validates a batch, stores it atomically and acknowledges it.
func (s *Service) Report(ctx context.Context, req *plumblinev1.ReportRequest) (*plumblinev1.ReportResponse, error) {
	if err := s.checkCaller(ctx, req.GetAgentId()); err != nil {
		return nil, err
	}
	agent, inc := req.GetAgentId(), req.GetIncarnation()
	if err := CheckIncarnation(inc); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	if err := s.checkRecordRate(ctx, agent, len(req.GetRecords())); err != nil {
		return nil, err
	}
	b, err := ValidateReport(req, s.opts.Limits, s.opts.Now())
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	if err := s.judgeMeasured(ctx, agent, b); err != nil {
		return nil, s.storeError(ctx, "report", agent, err)
	}
	// One commit for first_sequence and the records (grouped with other
	// agents' batches on SQLite): nothing is acknowledged before it.
	res, err := s.store.AppendBatchQuota(ctx, agent, inc, b.FirstSequence, b.Records, s.opts.Quota.storeQuota())
	if err != nil {
		return nil, s.storeError(ctx, "report", agent, err)
	}
	if res.QuotaRefused {
		return nil, s.storageQuotaError(agent, len(b.Records))
	}
	s.rejudgeScanned(ctx, agent, b, res)
	if res.IdentityConflict {
		s.identityConflict(agent, inc, "", "report")
	}
	resp := &plumblinev1.ReportResponse{HighWaterSequence: res.HighWater, Rejections: b.Rejections}
	for _, r := range b.Records { // ascending
		if r.Sequence > res.HighWater {
			resp.AckedSequences = append(resp.AckedSequences, r.Sequence)
		}
	}
	for _, rj := range b.Rejections {
		s.opts.Logger.Warn("record rejected", "agent", agent, "sequence", rj.GetSequence(), "reason", rj.GetReason())
	}
	s.opts.Logger.Debug("report", "agent", agent, "records", len(b.Records), "stored", len(res.Stored),
		"duplicates", len(res.Duplicates), "rejected", len(b.Rejections), "high_water", res.HighWater)
	return resp, nil
}

// storeError maps a store error to a status: an unregistered agent must
// say Hello first; anything else is the server's trouble and retryable.
func (s *Service) storeError(ctx context.Context, op, agent string, err error) error {
	switch {
	case errors.Is(err, store.ErrUnknownAgent):
		return status.Errorf(codes.FailedPrecondition, "agent %q is not registered: call Hello first", agent)
	case errors.Is(err, store.ErrInvalid):
		return status.Error(codes.InvalidArgument, err.Error())
	case ctx.Err() != nil:
		return status.FromContextError(ctx.Err()).Err()
	}
	s.opts.Logger.Error("store", "op", op, "agent", agent, "err", err)
	return status.Error(codes.Unavailable, fmt.Sprintf("%s: store unavailable; retry later", op))
}
