package authority

import (
	"context"
	"errors"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/plumbline/plumbline/internal/certmint"
	"github.com/plumbline/plumbline/internal/enroll"
	"github.com/plumbline/plumbline/internal/identity"
	"github.com/plumbline/plumbline/internal/labels"
	"github.com/plumbline/plumbline/internal/server/grpcservice"
	"github.com/plumbline/plumbline/internal/server/store"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// PublicMethods are the only methods of the gRPC server a client without
// a certificate may call (ingest.Options.PublicMethods).
func PublicMethods() []string {
	prefix := "/" + plumblinev1.EnrollmentService_ServiceDesc.ServiceName + "/"
	return []string{prefix + "GetTrustBundle", prefix + "Enroll"}
}

// Register serves the enrollment service on gs.
func (a *Authority) Register(gs *grpc.Server) {
	grpcservice.Register(gs, &plumblinev1.EnrollmentService_ServiceDesc, a)
}

// GetTrustBundle answers with the CAs agents trust for this server.
// It costs the server nothing but the answer: admission's limit per
// address bounds it, and it does not draw on the server-wide enrollment
// bucket, which anonymous callers would otherwise empty for everyone's
// Enroll.
func (a *Authority) GetTrustBundle(context.Context, *plumblinev1.GetTrustBundleRequest) (*plumblinev1.GetTrustBundleResponse, error) {
	return &plumblinev1.GetTrustBundleResponse{CaCertificatesPem: a.ca.bundle}, nil
}

func rateError(what string) error {
	return status.Errorf(codes.ResourceExhausted, "%s: too many requests at once on this server; retry in a few seconds", what)
}

// Enroll spends a use of the join token on a certificate for the CSR's key.
// Only a call whose token is usable draws on the server-wide enrollment
// bucket: invalid ones are refused first (admission's limit per address
// bounds how fast one host can have tokens looked up), so anonymous
// callers with made-up tokens cannot empty it for real enrollments.
func (a *Authority) Enroll(ctx context.Context, req *plumblinev1.EnrollRequest) (*plumblinev1.EnrollResponse, error) {
	tok, err := enroll.ParseToken(req.GetToken())
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	id := req.GetAgentId()
	if err := identity.CheckAgentID(id); err != nil {
		return nil, status.Error(codes.InvalidArgument, "agent_id: "+err.Error())
	}
	pub, err := parseCSR(req.GetCsrDer())
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	if err := a.st.CheckJoinToken(ctx, tok.ID, tok.SecretHash()); err != nil {
		return nil, a.enrollError(ctx, tok.ID, id, err)
	}
	if !a.enrollRL.Allow() {
		return nil, rateError("enrollment")
	}
	now, serial := a.opts.Now(), certmint.Serial()
	notAfter := certmint.NotAfter(now, a.opts.CertTTL, a.ca.cert)
	lbls, err := a.st.EnrollAgent(ctx, store.Enrollment{TokenID: tok.ID, SecretHash: tok.SecretHash(), AgentID: id, Serial: serialText(serial), NotAfter: notAfter})
	if err != nil {
		return nil, a.enrollError(ctx, tok.ID, id, err)
	}
	a.cache.forget(id)
	chain, leaf, err := a.ca.issue(id, pub, serial, now, a.opts.CertTTL)
	if err != nil {
		a.opts.Logger.Error("enroll: signing failed", "agent", id, "err", err)
		return nil, status.Error(codes.Internal, "signing failed")
	}
	a.opts.Logger.Info("agent enrolled", "agent", id, "token", tok.ID, "serial", serialText(serial), "not_after", leaf.NotAfter, "labels", labels.Format(lbls), "peer", peerAddr(ctx))
	return &plumblinev1.EnrollResponse{AgentId: id, CertificateChainPem: chain, NotAfter: timestamppb.New(leaf.NotAfter), Labels: lbls}, nil
}

// enrollError maps the store's refusals to statuses that say why.
func (a *Authority) enrollError(ctx context.Context, tokenID, agentID string, err error) error {
	switch {
	case errors.Is(err, store.ErrTokenUnknown):
		a.opts.Logger.Warn("enrollment refused: unknown token or wrong secret", "token", tokenID, "agent", agentID, "peer", peerAddr(ctx))
		return status.Errorf(codes.Unauthenticated, "join token %s: unknown, or its secret is wrong", tokenID)
	case errors.Is(err, store.ErrTokenExpired), errors.Is(err, store.ErrTokenUsedUp), errors.Is(err, store.ErrTokenRevoked):
		a.opts.Logger.Warn("enrollment refused", "token", tokenID, "agent", agentID, "reason", err, "peer", peerAddr(ctx))
		return status.Errorf(codes.Unauthenticated, "join token %s: %v; ask for a new one (server token create)", tokenID, err)
	case errors.Is(err, store.ErrAgentExists):
		return status.Error(codes.AlreadyExists, err.Error())
	case errors.Is(err, store.ErrAgentReserved):
		a.opts.Logger.Warn("enrollment refused: the agent id is reserved", "token", tokenID, "agent", agentID, "peer", peerAddr(ctx))
		return status.Error(codes.AlreadyExists, err.Error())
	case ctx.Err() != nil:
		return status.FromContextError(ctx.Err()).Err()
	}
	a.opts.Logger.Error("enroll: store", "agent", agentID, "err", err)
	return status.Error(codes.Unavailable, "enroll: store unavailable; retry later")
}

// Renew issues a new certificate to the caller, for its own identity.
func (a *Authority) Renew(ctx context.Context, req *plumblinev1.RenewRequest) (*plumblinev1.RenewResponse, error) {
	if !a.renewRL.Allow() {
		return nil, rateError("renewal")
	}
	p, _ := peer.FromContext(ctx)
	var ti credentials.TLSInfo
	if p != nil {
		ti, _ = p.AuthInfo.(credentials.TLSInfo)
	}
	if len(ti.State.VerifiedChains) == 0 || len(ti.State.VerifiedChains[0]) == 0 {
		return nil, status.Error(codes.Unauthenticated, "renew: no verified client certificate on this connection")
	}
	cert := ti.State.VerifiedChains[0][0]
	id, err := identity.FromCertificate(cert)
	if err != nil {
		return nil, status.Error(codes.Unauthenticated, err.Error())
	}
	if err := a.Authorize(ctx, id, cert); err != nil {
		return nil, err
	}
	if e, err := a.cache.get(ctx, id); err == nil && !e.enrolled {
		return nil, notEnrolled(id)
	}
	pub, err := parseCSR(req.GetCsrDer())
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	now, serial := a.opts.Now(), certmint.Serial()
	err = a.st.RenewAgent(ctx, id, serialText(cert.SerialNumber), serialText(serial), certmint.NotAfter(now, a.opts.CertTTL, a.ca.cert))
	a.cache.forget(id)
	switch {
	case errors.Is(err, store.ErrNotEnrolled):
		return nil, notEnrolled(id)
	case errors.Is(err, store.ErrAgentRevoked), errors.Is(err, store.ErrSuperseded):
		a.opts.Logger.Warn("renewal refused", "agent", id, "reason", err, "peer", peerAddr(ctx))
		return nil, status.Error(codes.PermissionDenied, err.Error())
	case err != nil && ctx.Err() != nil:
		return nil, status.FromContextError(ctx.Err()).Err()
	case err != nil:
		a.opts.Logger.Error("renew: store", "agent", id, "err", err)
		return nil, status.Error(codes.Unavailable, "renew: store unavailable; retry later")
	}
	chain, leaf, err := a.ca.issue(id, pub, serial, now, a.opts.CertTTL)
	if err != nil {
		a.opts.Logger.Error("renew: signing failed", "agent", id, "err", err)
		return nil, status.Error(codes.Internal, "signing failed")
	}
	a.opts.Logger.Info("agent certificate renewed", "agent", id, "serial", serialText(serial), "not_after", leaf.NotAfter.Format(time.RFC3339))
	return &plumblinev1.RenewResponse{CertificateChainPem: chain, NotAfter: timestamppb.New(leaf.NotAfter)}, nil
}

func peerAddr(ctx context.Context) string {
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		return p.Addr.String()
	}
	return ""
}

// notEnrolled refuses the renewal of an agent this server has no
// enrollment record for. That is all the server knows: the certificate
// may come from the operator's own PKI, from a --dev CA, or from an
// enrollment whose record is gone.
func notEnrolled(id string) error {
	return status.Errorf(codes.FailedPrecondition,
		"agent %q: this server has no enrollment record for this agent id, so it does not renew its certificate; "+
			"either enroll the agent with a join token (`plumbline-server token create` here, then `plumbline-agent enroll --server ADDR --token-file FILE --ca-hash sha256:HEX --dir DIR` on its host) and it renews here, "+
			"or keep its bring-your-own-PKI certificate and renew that out of band, with the CA that issued it", id)
}
