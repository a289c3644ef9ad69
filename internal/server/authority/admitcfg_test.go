package authority_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/plumbline/plumbline/internal/enroll"
	"github.com/plumbline/plumbline/internal/server/authority"
	"github.com/plumbline/plumbline/internal/server/config"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// wantRateRefusal fails unless err is admission's rate-limit refusal.
func wantRateRefusal(t *testing.T, what string, err error) {
	t.Helper()
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "rate limit") {
		t.Fatalf("%s: %v, want ResourceExhausted for the rate limit", what, err)
	}
}

// enrollment.renew_rate_limit_per_agent bounds one agent's renewals: at
// burst 1 its second renewal is refused (the default allows 10).
func TestConfiguredRenewRatePerAgent(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	r := startServerWith(t, p, "sqlite://"+filepath.Join(t.TempDir(), "p.db"), time.Hour, func(c *config.Config) {
		c.Enrollment.RenewRateLimitPerAgent = config.RateConfig{CallsPerSecond: 0.001, Burst: 1}
	})
	token, pin := r.token(t, authority.TokenSpec{})
	res, err := r.enroll(t.TempDir(), token, pin, "renew-once")
	if err != nil {
		t.Fatal(err)
	}
	c := plumblinev1.NewEnrollmentServiceClient(r.dial(t, res.CertFile, res.KeyFile))
	csr := newCSR(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Renew(ctx, &plumblinev1.RenewRequest{CsrDer: csr}); err != nil {
		t.Fatalf("first renewal: %v", err)
	}
	_, err = c.Renew(ctx, &plumblinev1.RenewRequest{CsrDer: csr})
	wantRateRefusal(t, "second renewal at burst 1", err)
}

// enrollment.rate_limit_per_address bounds one address's enrollment calls
// without a certificate: at burst 1 its second trust-bundle call is
// refused, while another address still gets one.
func TestConfiguredEnrollmentRatePerAddress(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	r := startServerWith(t, p, "sqlite://"+filepath.Join(t.TempDir(), "p.db"), time.Hour, func(c *config.Config) {
		c.Enrollment.RateLimitPerAddress = config.RateConfig{CallsPerSecond: 0.001, Burst: 1}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	one := plumblinev1.NewEnrollmentServiceClient(r.dialFrom(t, "127.0.0.2", "", ""))
	if _, err := one.GetTrustBundle(ctx, &plumblinev1.GetTrustBundleRequest{}); err != nil {
		t.Fatalf("first trust-bundle call: %v", err)
	}
	_, err := one.GetTrustBundle(ctx, &plumblinev1.GetTrustBundleRequest{})
	wantRateRefusal(t, "second trust-bundle call from one address at burst 1", err)
	other := plumblinev1.NewEnrollmentServiceClient(r.dialFrom(t, "127.0.0.3", "", ""))
	if _, err := other.GetTrustBundle(ctx, &plumblinev1.GetTrustBundleRequest{}); err != nil {
		t.Fatalf("another address's trust-bundle call: %v", err)
	}
}

// The renewal refusal for an agent this server did not enroll says what
// the server knows (no enrollment record for the id) and both ways on,
// and does not guess where the certificate comes from.
func TestNotEnrolledRenewalSaysWhatToDo(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	r := startServer(t, p, "sqlite://"+filepath.Join(t.TempDir(), "p.db"), time.Hour)
	byo, err := p.root.IssueAgent("byo-renew")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "byo.crt"), filepath.Join(dir, "byo.key")
	if err := byo.WriteFiles(certFile, keyFile); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = plumblinev1.NewEnrollmentServiceClient(r.dial(t, certFile, keyFile)).Renew(ctx, &plumblinev1.RenewRequest{CsrDer: newCSR(t)})
	if status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("renewal of an agent this server did not enroll: %v, want FailedPrecondition", err)
	}
	msg := status.Convert(err).Message()
	for _, want := range []string{`"byo-renew"`, "no enrollment record for this agent id", "join token", "plumbline-agent enroll", "bring-your-own-PKI certificate", "out of band"} {
		if !strings.Contains(msg, want) {
			t.Errorf("refusal %q does not say %q", msg, want)
		}
	}
	if strings.Contains(msg, "another CA") {
		t.Errorf("refusal %q claims the certificate comes from another CA, which the server does not know", msg)
	}
}

// Enrolls with tokens the server does not have do not draw on the
// server-wide enrollment bucket (enrollment.rate_limit): after more of
// them than its burst, with the limit per address off so nothing else
// stops them, each still refused for its token, a real enrollment
// succeeds.
func TestInvalidTokenEnrollsLeaveServerBucket(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	r := startServerWith(t, p, "sqlite://"+filepath.Join(t.TempDir(), "p.db"), time.Hour, func(c *config.Config) {
		c.Enrollment.RateLimit = config.RateConfig{CallsPerSecond: 0.001, Burst: 3}
		c.Enrollment.RateLimitPerAddress = config.RateConfig{}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	csr := newCSR(t)
	for i, src := range []string{"127.0.0.2", "127.0.0.3", "127.0.0.4"} {
		c := plumblinev1.NewEnrollmentServiceClient(r.dialFrom(t, src, "", ""))
		for j := range 5 {
			req := &plumblinev1.EnrollRequest{Token: enroll.NewToken().String(), AgentId: fmt.Sprintf("flood-%d-%d", i, j), CsrDer: csr}
			if _, err := c.Enroll(ctx, req); status.Code(err) != codes.Unauthenticated {
				t.Fatalf("enroll %d from %s with an unknown token: %v, want Unauthenticated", j, src, err)
			}
		}
	}
	token, pin := r.token(t, authority.TokenSpec{})
	if _, err := r.enroll(t.TempDir(), token, pin, "real"); err != nil {
		t.Fatalf("real enrollment after 15 with unknown tokens: %v", err)
	}
}
