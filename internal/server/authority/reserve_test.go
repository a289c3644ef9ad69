package authority_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/plumbline/plumbline/internal/lab/pgtest"
	"github.com/plumbline/plumbline/internal/server/authority"
	"github.com/plumbline/plumbline/internal/server/store"
	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// A join token never takes an agent id that the operator's own PKI holds:
// neither one an operator reserved (server agent reserve) nor one that
// connected with a certificate of another CA before it ever reported
// (a token took such an id, and the real agent was then refused at the
// handshake). The refusal says how to go on; the token's use is not
// spent; a released id enrolls. Both engines.
func TestEnrollmentRespectsReservedIDs(t *testing.T) {
	t.Parallel()
	pgtest.ForEachEngine(t, func(t *testing.T, dsn string) {
		p := newPKI(t)
		r := startServer(t, p, dsn, time.Hour)
		ctx := context.Background()
		if _, err := r.st.ReserveAgentID(ctx, store.Reservation{AgentID: "db-reserved", Source: store.ReservedByOperator, Reason: "BYO PKI, ticket 42"}); err != nil {
			t.Fatal(err)
		}
		// byo-early connects with a certificate from the root (not the
		// enrollment CA) and has not said Hello.
		byo, err := p.root.IssueAgent("byo-early")
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		if err := byo.WriteFiles(filepath.Join(dir, "byo.crt"), filepath.Join(dir, "byo.key")); err != nil {
			t.Fatal(err)
		}
		conn := r.dial(t, filepath.Join(dir, "byo.crt"), filepath.Join(dir, "byo.key"))
		_, err = plumblinev1.NewAgentServiceClient(conn).Report(ctx, &plumblinev1.ReportRequest{AgentId: "byo-early"})
		if status.Code(err) != codes.FailedPrecondition {
			t.Fatalf("Report before Hello: %v, want FailedPrecondition", err)
		}

		tok, pin := r.token(t, authority.TokenSpec{Uses: 1})
		for _, c := range []struct{ id, want string }{
			{"db-reserved", "an operator reserved it (BYO PKI, ticket 42)"},
			{"byo-early", "a certificate of another CA"},
		} {
			_, err := r.enroll(t.TempDir(), tok, pin, c.id)
			if status.Code(err) != codes.AlreadyExists || !strings.Contains(err.Error(), c.want) ||
				!strings.Contains(err.Error(), "agent enroll --agent-id ID") || !strings.Contains(err.Error(), "server agent unreserve "+c.id) {
				t.Errorf("enroll as %s: %v; want AlreadyExists saying %q, --agent-id and server agent unreserve", c.id, err, c.want)
			}
		}
		if ok, err := r.st.UnreserveAgentID(ctx, "db-reserved"); !ok || err != nil {
			t.Fatalf("unreserve: %v, %v", ok, err)
		}
		if _, err := r.enroll(t.TempDir(), tok, pin, "db-reserved"); err != nil {
			t.Errorf("enroll a released id with the token whose use the refusals did not spend: %v", err)
		}
	})
}
