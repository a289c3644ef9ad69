package store

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestEnrollmentLifecycle walks a token and the agents it enrolls through
// every state on both engines: each refusal is the sentinel its reason
// names, and a refused enrollment changes nothing.
func TestEnrollmentLifecycle(t *testing.T) {
	forEachEngine(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := open(t, dsn)
		now := time.Unix(1_800_000_000, 0).UTC()
		s.now = func() time.Time { return now }
		labels := map[string]string{"role": "db", "site": "ams-1"}
		must(t, s.CreateJoinToken(ctx, JoinToken{ID: "tok1", SecretHash: "h1", Labels: labels, MaxUses: 2, Expires: now.Add(time.Hour)}))
		must(t, s.CreateJoinToken(ctx, JoinToken{ID: "old", SecretHash: "h2", MaxUses: 1, Expires: now.Add(-time.Second)}))
		must(t, s.CreateJoinToken(ctx, JoinToken{ID: "gone", SecretHash: "h3", MaxUses: 5, Expires: now.Add(time.Hour)}))
		must(t, s.RevokeJoinToken(ctx, "gone"))
		if err := s.RevokeJoinToken(ctx, "nope"); !errors.Is(err, ErrNotFound) {
			t.Errorf("RevokeJoinToken(nope) = %v, want ErrNotFound", err)
		}
		register(t, s, "byo-host") // reports with a certificate from elsewhere

		enroll := func(tok, hash, id, serial string) error {
			got, err := s.EnrollAgent(ctx, Enrollment{TokenID: tok, SecretHash: hash, AgentID: id, Serial: serial, NotAfter: now.Add(24 * time.Hour)})
			if err == nil && !cmp.Equal(got, labels) {
				t.Errorf("EnrollAgent(%s) labels = %v, want %v", id, got, labels)
			}
			return err
		}
		for _, c := range []struct {
			tok, hash, id string
			want          error
		}{
			{"tok1", "wrong", "h-a", ErrTokenUnknown},
			{"none", "h1", "h-a", ErrTokenUnknown},
			{"old", "h2", "h-a", ErrTokenExpired},
			{"gone", "h3", "h-a", ErrTokenRevoked},
			{"tok1", "h1", "byo-host", ErrAgentExists},
			{"tok1", "h1", "h-a", nil},
			{"tok1", "h1", "h-a", ErrAgentExists},
			{"tok1", "h1", "h-b", nil},
			{"tok1", "h1", "h-c", ErrTokenUsedUp},
		} {
			if err := enroll(c.tok, c.hash, c.id, "s-"+c.id); !errors.Is(err, c.want) {
				t.Errorf("EnrollAgent(%s, %s, %s) = %v, want %v", c.tok, c.hash, c.id, err, c.want)
			}
		}
		clashRefusals(t, s, now)
		toks, err := s.JoinTokens(ctx)
		must(t, err)
		uses := map[string]int64{}
		for _, tk := range toks {
			uses[tk.ID] = tk.Uses
		}
		if want := map[string]int64{"tok1": 2, "old": 0, "gone": 0, "tok9": 0}; !cmp.Equal(uses, want) {
			t.Errorf("uses after the enrollments = %v, want %v (refusals spend nothing)", uses, want)
		}
		if got, err := s.AgentLabels(ctx, "h-a"); err != nil || !cmp.Equal(got, labels) {
			t.Errorf("AgentLabels(h-a) = %v, %v; want %v", got, err, labels)
		}
		if got, err := s.AgentLabels(ctx, "byo-host"); err != nil || len(got) != 0 {
			t.Errorf("AgentLabels(byo-host) = %v, %v; want none", got, err)
		}

		// Renewal: from the current serial, then from the previous one;
		// two renewals back is superseded.
		must(t, s.RenewAgent(ctx, "h-a", "s-h-a", "s2", now.Add(48*time.Hour)))
		must(t, s.RenewAgent(ctx, "h-a", "s-h-a", "s3", now.Add(48*time.Hour)))
		a, err := s.EnrolledAgent(ctx, "h-a")
		must(t, err)
		if a.Serial != "s3" || a.PrevSerial != "s2" || !a.Renewed.Equal(now) {
			t.Errorf("after two renewals: serial %q prev %q renewed %v; want s3, s2, %v", a.Serial, a.PrevSerial, a.Renewed, now)
		}
		for serial, want := range map[string]error{"s3": nil, "s2": nil, "s-h-a": ErrSuperseded, "": ErrSuperseded} {
			if err := a.Accepts(serial); !errors.Is(err, want) {
				t.Errorf("Accepts(%q) = %v, want %v", serial, err, want)
			}
		}
		if err := s.RenewAgent(ctx, "byo-host", "x", "y", now); !errors.Is(err, ErrNotEnrolled) {
			t.Errorf("RenewAgent(byo-host) = %v, want ErrNotEnrolled", err)
		}

		// Revocation: every serial refused, renewal refused; a new token
		// enrolls the id again with a new serial, the old ones stay refused.
		must(t, s.RevokeAgent(ctx, "h-a"))
		a, _ = s.EnrolledAgent(ctx, "h-a")
		if err := a.Accepts("s3"); !errors.Is(err, ErrAgentRevoked) {
			t.Errorf("revoked Accepts(s3) = %v, want ErrAgentRevoked", err)
		}
		if err := s.RenewAgent(ctx, "h-a", "s3", "s4", now); !errors.Is(err, ErrAgentRevoked) {
			t.Errorf("RenewAgent(revoked) = %v, want ErrAgentRevoked", err)
		}
		if err := s.RevokeAgent(ctx, "byo-host"); !errors.Is(err, ErrNotEnrolled) {
			t.Errorf("RevokeAgent(byo-host) = %v, want ErrNotEnrolled", err)
		}
		must(t, s.CreateJoinToken(ctx, JoinToken{ID: "tok2", SecretHash: "h4", Labels: labels, MaxUses: 1, Expires: now.Add(time.Hour)}))
		must(t, enroll("tok2", "h4", "h-a", "s5"))
		a, _ = s.EnrolledAgent(ctx, "h-a")
		for serial, want := range map[string]error{"s5": nil, "s3": ErrSuperseded, "s2": ErrSuperseded} {
			if err := a.Accepts(serial); !errors.Is(err, want) {
				t.Errorf("re-enrolled Accepts(%q) = %v, want %v", serial, err, want)
			}
		}
		// An enrollment whose certificate expired frees its id too (an
		// agent off past its expiry enrolls again).
		must(t, s.RenewAgent(ctx, "h-a", "s5", "s5b", now.Add(48*time.Hour)))
		now = now.Add(25 * time.Hour) // h-b's certificate expired, h-a's renewed one not
		must(t, s.CreateJoinToken(ctx, JoinToken{ID: "tok3", SecretHash: "h5", Labels: labels, MaxUses: 2, Expires: now.Add(time.Hour)}))
		if err := enroll("tok3", "h5", "h-a", "s6"); !errors.Is(err, ErrAgentExists) {
			t.Errorf("enroll h-a (still valid) again: %v, want ErrAgentExists", err)
		}
		must(t, enroll("tok3", "h5", "h-b", "s7"))
		all, err := s.EnrolledAgents(ctx)
		must(t, err)
		if len(all) != 2 || all[0].AgentID != "h-a" || all[1].AgentID != "h-b" {
			t.Errorf("EnrolledAgents() = %+v, want h-a and h-b", all)
		}
	})
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// clashRefusals: enrolling under an id that is taken says what holds it and
// what to do (another id with --agent-id; for the same host, revoke the
// old enrollment) and does not blame another CA.
func clashRefusals(t *testing.T, s *Store, now time.Time) {
	t.Helper()
	ctx := context.Background()
	must(t, s.CreateJoinToken(ctx, JoinToken{ID: "tok9", SecretHash: "h9", MaxUses: 5, Expires: now.Add(time.Hour)}))
	for _, c := range []struct {
		id   string
		want []string
	}{
		{"h-a", []string{`already enrolled as "h-a"`, "--agent-id", "server agent revoke h-a"}},
		{"byo-host", []string{`already reports to this server as "byo-host"`, "did not enroll", "--agent-id"}},
	} {
		_, err := s.EnrollAgent(ctx, Enrollment{TokenID: "tok9", SecretHash: "h9", AgentID: c.id, Serial: "s9", NotAfter: now.Add(time.Hour)})
		if !errors.Is(err, ErrAgentExists) {
			t.Fatalf("EnrollAgent(%s) = %v, want ErrAgentExists", c.id, err)
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("EnrollAgent(%s) refusal %q does not say %q", c.id, err, w)
			}
		}
		if strings.Contains(err.Error(), "another CA") {
			t.Errorf("EnrollAgent(%s) refusal %q blames another CA", c.id, err)
		}
	}
}
