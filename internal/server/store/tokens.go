package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Enrollment errors (issue 14 §1), checked with errors.Is. An unknown
// token and a wrong secret are one error: the answer tells a guesser
// nothing.
var (
	ErrTokenUnknown = errors.New("unknown join token")
	ErrTokenExpired = errors.New("join token expired")
	ErrTokenUsedUp  = errors.New("join token used up")
	ErrTokenRevoked = errors.New("join token revoked")
	// ErrAgentExists: the id is enrolled (and not revoked), or an agent
	// with a certificate from elsewhere reports under it.
	ErrAgentExists = errors.New("agent id already taken")
	// ErrNotEnrolled: this server did not enroll the agent.
	ErrNotEnrolled = errors.New("agent not enrolled by this server")
	// ErrAgentRevoked: the agent's certificates were revoked.
	ErrAgentRevoked = errors.New("agent revoked")
	// ErrSuperseded: the certificate is neither the agent's current one
	// nor the one before it.
	ErrSuperseded = errors.New("certificate superseded")
)

// JoinToken is a stored join token (the secret only as its hash).
type JoinToken struct {
	ID         string
	SecretHash string
	Labels     map[string]string
	MaxUses    int64
	Uses       int64
	Created    time.Time
	Expires    time.Time
	Revoked    time.Time // zero: not revoked
}

// EnrolledAgent is an agent this server's CA certified.
type EnrolledAgent struct {
	AgentID    string
	TokenID    string
	Labels     map[string]string
	Serial     string // the current certificate's serial (hex)
	PrevSerial string // the one before the last renewal ("" when none)
	NotAfter   time.Time
	Enrolled   time.Time
	Renewed    time.Time // zero: never
	Revoked    time.Time // zero: not revoked
}

// Enrollment is one use of a join token.
type Enrollment struct {
	TokenID, SecretHash string
	AgentID             string
	Serial              string
	NotAfter            time.Time
}

// CreateJoinToken stores a new token (t.Created defaults to now).
func (s *Store) CreateJoinToken(ctx context.Context, t JoinToken) error {
	if t.MaxUses < 1 || t.ID == "" || t.SecretHash == "" {
		return fmt.Errorf("create join token: %w: id, secret hash and at least one use are required", ErrInvalid)
	}
	if t.Created.IsZero() {
		t.Created = s.now()
	}
	labels, err := json.Marshal(nonNil(t.Labels))
	if err != nil {
		return fmt.Errorf("create join token: %w", err)
	}
	return s.inTx(ctx, func(tx *sql.Tx) error {
		_, err := s.txExec(ctx, tx, s.q(`INSERT INTO join_tokens (token_id, secret_sha256, labels, max_uses, created_ns, expires_ns) VALUES (?, ?, ?, ?, ?, ?)`),
			t.ID, t.SecretHash, string(labels), t.MaxUses, unixNano(t.Created), unixNano(t.Expires))
		if err != nil {
			return fmt.Errorf("create join token: %w", err)
		}
		return nil
	})
}

// JoinTokens lists every token, newest first.
func (s *Store) JoinTokens(ctx context.Context) ([]JoinToken, error) {
	return queryAll(ctx, s, "join tokens", `SELECT token_id, secret_sha256, labels, max_uses, uses, created_ns, expires_ns, revoked_ns FROM join_tokens ORDER BY created_ns DESC, token_id`, nil,
		func(row rowScanner) (JoinToken, error) {
			var t JoinToken
			var labels string
			var created, expires, revoked int64
			if err := row.Scan(&t.ID, &t.SecretHash, &labels, &t.MaxUses, &t.Uses, &created, &expires, &revoked); err != nil {
				return t, err
			}
			t.Created, t.Expires, t.Revoked = fromUnixNano(created), fromUnixNano(expires), fromUnixNano(revoked)
			var err error
			t.Labels, err = decodeLabels(labels)
			return t, err
		})
}

// RevokeJoinToken ends a token (ErrNotFound: no such token). Revoking a
// revoked token keeps its first revocation time.
func (s *Store) RevokeJoinToken(ctx context.Context, id string) error {
	return s.revoke(ctx, `UPDATE join_tokens SET revoked_ns = CASE WHEN revoked_ns = 0 THEN ? ELSE revoked_ns END WHERE token_id = ?`, id,
		fmt.Errorf("join token %q: %w", id, ErrNotFound))
}

// revoke runs a revoking UPDATE (now, key) and returns notFound when it
// changed no row.
func (s *Store) revoke(ctx context.Context, update, key string, notFound error) error {
	return s.inTx(ctx, func(tx *sql.Tx) error {
		res, err := s.txExec(ctx, tx, s.q(update), unixNano(s.now()), key)
		if err != nil {
			return fmt.Errorf("revoke %q: %w", key, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return notFound
		}
		return nil
	})
}

// EnrollAgent spends one use of the token on e.AgentID's certificate
// (serial e.Serial) and returns the token's labels, now the agent's. The
// token must exist with this secret, be neither expired, used up nor
// revoked; the id must be free: not enrolled (an enrollment that was
// revoked or whose certificate expired may be replaced) and not reporting
// with a certificate from elsewhere. Nothing changes when it fails.
func (s *Store) EnrollAgent(ctx context.Context, e Enrollment) (map[string]string, error) {
	var labels map[string]string
	now := s.now()
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		lab, maxUses, err := usableToken(s.txQueryRow(ctx, tx, s.q(selectToken), e.TokenID), e.SecretHash, now)
		if err != nil {
			return err
		}
		if labels, err = decodeLabels(lab); err != nil {
			return fmt.Errorf("join token %s: %w", e.TokenID, err)
		}
		res, err := s.txExec(ctx, tx, s.q(`UPDATE join_tokens SET uses = uses + 1 WHERE token_id = ? AND uses < max_uses`), e.TokenID)
		if err != nil {
			return fmt.Errorf("enroll: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("%w: all %d uses spent", ErrTokenUsedUp, maxUses)
		}
		return s.claimAgentID(ctx, tx, e, lab, now)
	})
	return labels, err
}

const selectToken = `SELECT secret_sha256, labels, max_uses, uses, expires_ns, revoked_ns FROM join_tokens WHERE token_id = ?`

// CheckJoinToken tells whether EnrollAgent would accept the token now: nil,
// or the error EnrollAgent would return for it (ErrTokenUnknown,
// ErrTokenRevoked, ErrTokenExpired, ErrTokenUsedUp). It changes nothing,
// so a caller can refuse invalid tokens before spending anything on them.
func (s *Store) CheckJoinToken(ctx context.Context, tokenID, secretHash string) error {
	_, _, err := usableToken(s.db.QueryRowContext(ctx, s.q(selectToken), tokenID), secretHash, s.now())
	return err
}

// usableToken scans a selectToken row and returns the token's labels and
// bound of uses, or why it cannot be used at now.
func usableToken(row rowScanner, secretHash string, now time.Time) (string, int64, error) {
	var hash, lab string
	var maxUses, uses, expires, revoked int64
	err := row.Scan(&hash, &lab, &maxUses, &uses, &expires, &revoked)
	switch {
	case errors.Is(err, sql.ErrNoRows) || err == nil && hash != secretHash:
		return "", 0, ErrTokenUnknown
	case err != nil:
		return "", 0, fmt.Errorf("enroll: %w", err)
	case revoked != 0:
		return "", 0, fmt.Errorf("%w at %s", ErrTokenRevoked, fromUnixNano(revoked).Format(time.RFC3339))
	case unixNano(now) >= expires:
		return "", 0, fmt.Errorf("%w at %s", ErrTokenExpired, fromUnixNano(expires).Format(time.RFC3339))
	case uses >= maxUses:
		return "", 0, fmt.Errorf("%w: all %d uses spent", ErrTokenUsedUp, maxUses)
	}
	return lab, maxUses, nil
}

// claimAgentID records e.AgentID as enrolled: a new row, or a revoked
// enrollment replaced.
func (s *Store) claimAgentID(ctx context.Context, tx *sql.Tx, e Enrollment, labels string, now time.Time) error {
	if err := s.checkReserved(ctx, tx, e.AgentID); err != nil {
		return err
	}
	var revoked, notAfter int64
	err := s.txQueryRow(ctx, tx, s.q(`SELECT revoked_ns, not_after_ns FROM enrolled_agents WHERE agent_id = ?`), e.AgentID).Scan(&revoked, &notAfter)
	switch {
	case err == nil && revoked == 0 && notAfter > unixNano(now):
		return fmt.Errorf("%w: an agent is already enrolled as %q (its certificate is valid until %s). "+
			"Another host: enroll it under another id (agent enroll --agent-id ID; the default id is the host name). "+
			"The same host enrolling again: revoke the old enrollment first (server agent revoke %s)",
			ErrAgentExists, e.AgentID, fromUnixNano(notAfter).Format(time.RFC3339), e.AgentID)
	case err == nil:
		// Revoked, or its certificate expired: the id is free again.
		res, err := s.txExec(ctx, tx, s.q(`UPDATE enrolled_agents SET token_id = ?, labels = ?, serial = ?, prev_serial = '', not_after_ns = ?, enrolled_ns = ?, renewed_ns = 0, revoked_ns = 0
WHERE agent_id = ? AND (revoked_ns <> 0 OR not_after_ns <= ?)`), e.TokenID, labels, e.Serial, unixNano(e.NotAfter), unixNano(now), e.AgentID, unixNano(now))
		if err != nil {
			return fmt.Errorf("enroll: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("%w: %q was enrolled meanwhile", ErrAgentExists, e.AgentID)
		}
		return nil
	case !errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("enroll: %w", err)
	}
	var one int
	err = s.txQueryRow(ctx, tx, s.q(`SELECT 1 FROM agents WHERE agent_id = ?`), e.AgentID).Scan(&one)
	if err == nil {
		return fmt.Errorf("%w: an agent already reports to this server as %q with a certificate enrollment did not issue (a --dev certificate, --insecure, or your own PKI), "+
			"and this server did not enroll it: enroll this host under another id (agent enroll --agent-id ID; the default id is the host name)", ErrAgentExists, e.AgentID)
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("enroll: %w", err)
	}
	res, err := s.txExec(ctx, tx, s.q(`INSERT INTO enrolled_agents (agent_id, token_id, labels, serial, not_after_ns, enrolled_ns) VALUES (?, ?, ?, ?, ?, ?)
ON CONFLICT (agent_id) DO NOTHING`), e.AgentID, e.TokenID, labels, e.Serial, unixNano(e.NotAfter), unixNano(now))
	if err != nil {
		return fmt.Errorf("enroll: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("%w: %q was enrolled meanwhile", ErrAgentExists, e.AgentID)
	}
	return nil
}

// RenewAgent records the agent's new certificate: fromSerial, the one the
// agent renewed with, must be its current or previous one; the current
// one becomes the previous.
func (s *Store) RenewAgent(ctx context.Context, agentID, fromSerial, newSerial string, notAfter time.Time) error {
	return s.inTx(ctx, func(tx *sql.Tx) error {
		a, err := s.enrolledAgent(ctx, tx.QueryRowContext, agentID)
		if err != nil {
			return err
		}
		if err := a.Accepts(fromSerial); err != nil {
			return err
		}
		_, err = s.txExec(ctx, tx, s.q(`UPDATE enrolled_agents SET prev_serial = serial, serial = ?, not_after_ns = ?, renewed_ns = ? WHERE agent_id = ?`),
			newSerial, unixNano(notAfter), unixNano(s.now()), agentID)
		if err != nil {
			return fmt.Errorf("renew: %w", err)
		}
		return nil
	})
}

// Accepts says whether the agent may use the certificate with this
// serial: not revoked, and the current or the previous certificate.
func (a EnrolledAgent) Accepts(serial string) error {
	switch {
	case !a.Revoked.IsZero():
		return fmt.Errorf("%w: agent %q at %s", ErrAgentRevoked, a.AgentID, a.Revoked.Format(time.RFC3339))
	case serial != a.Serial && (serial != a.PrevSerial || a.PrevSerial == ""):
		return fmt.Errorf("%w: agent %q holds a newer certificate than serial %s", ErrSuperseded, a.AgentID, serial)
	}
	return nil
}

// RevokeAgent revokes every certificate of an enrolled agent and its
// renewal (ErrNotEnrolled: this server did not enroll it).
func (s *Store) RevokeAgent(ctx context.Context, agentID string) error {
	return s.revoke(ctx, `UPDATE enrolled_agents SET revoked_ns = CASE WHEN revoked_ns = 0 THEN ? ELSE revoked_ns END WHERE agent_id = ?`, agentID,
		fmt.Errorf("agent %q: %w", agentID, ErrNotEnrolled))
}

const enrolledColumns = `agent_id, token_id, labels, serial, prev_serial, not_after_ns, enrolled_ns, renewed_ns, revoked_ns`

// EnrolledAgent returns one enrolled agent (ErrNotEnrolled when none).
func (s *Store) EnrolledAgent(ctx context.Context, agentID string) (EnrolledAgent, error) {
	return s.enrolledAgent(ctx, s.db.QueryRowContext, agentID)
}

func (s *Store) enrolledAgent(ctx context.Context, queryRow func(context.Context, string, ...any) *sql.Row, agentID string) (EnrolledAgent, error) {
	a, err := scanEnrolled(queryRow(ctx, s.q(`SELECT `+enrolledColumns+` FROM enrolled_agents WHERE agent_id = ?`), agentID))
	if errors.Is(err, sql.ErrNoRows) {
		return a, fmt.Errorf("agent %q: %w", agentID, ErrNotEnrolled)
	}
	if err != nil {
		return a, fmt.Errorf("enrolled agent %q: %w", agentID, err)
	}
	return a, nil
}

// EnrolledAgents lists the enrolled agents by id.
func (s *Store) EnrolledAgents(ctx context.Context) ([]EnrolledAgent, error) {
	return queryAll(ctx, s, "enrolled agents", `SELECT `+enrolledColumns+` FROM enrolled_agents ORDER BY agent_id`, nil, scanEnrolled)
}

// AgentLabels are the labels an agent got from its join token (none for
// an agent this server did not enroll): what central policy selects
// hosts by.
func (s *Store) AgentLabels(ctx context.Context, agentID string) (map[string]string, error) {
	a, err := s.EnrolledAgent(ctx, agentID)
	if errors.Is(err, ErrNotEnrolled) {
		return map[string]string{}, nil
	}
	return a.Labels, err
}

func scanEnrolled(row rowScanner) (EnrolledAgent, error) {
	var a EnrolledAgent
	var labels string
	var notAfter, enrolled, renewed, revoked int64
	if err := row.Scan(&a.AgentID, &a.TokenID, &labels, &a.Serial, &a.PrevSerial, &notAfter, &enrolled, &renewed, &revoked); err != nil {
		return a, err
	}
	var err error
	if a.Labels, err = decodeLabels(labels); err != nil {
		return a, err
	}
	a.NotAfter, a.Enrolled, a.Renewed, a.Revoked = fromUnixNano(notAfter), fromUnixNano(enrolled), fromUnixNano(renewed), fromUnixNano(revoked)
	return a, nil
}

func decodeLabels(s string) (map[string]string, error) {
	m := map[string]string{}
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		return nil, fmt.Errorf("labels: %w", err)
	}
	return m, nil
}

func nonNil(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}
