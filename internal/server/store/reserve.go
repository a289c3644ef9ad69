package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Where a reservation of an agent id came from.
const (
	// ReservedByOperator: `server agent reserve ID`.
	ReservedByOperator = "operator"
	// ReservedByCertificate: the id presented a verified client
	// certificate that enrollment did not issue (the operator's own PKI).
	ReservedByCertificate = "certificate"
)

// ErrAgentReserved is wrapped by an enrollment under a reserved id.
var ErrAgentReserved = errors.New("agent id reserved")

// Reservation is an agent id a join token cannot enroll.
type Reservation struct {
	AgentID  string
	Source   string // ReservedByOperator or ReservedByCertificate
	Reason   string
	Reserved time.Time
}

// ReserveAgentID reserves id; reserving it again keeps the first
// reservation (and reports false).
func (s *Store) ReserveAgentID(ctx context.Context, r Reservation) (bool, error) {
	if r.AgentID == "" || r.Source == "" {
		return false, fmt.Errorf("reserve agent id: %w: empty id or source", ErrInvalid)
	}
	at := r.Reserved
	if at.IsZero() {
		at = s.now()
	}
	res, err := s.db.ExecContext(ctx, s.q(`INSERT INTO reserved_agent_ids (agent_id, source, reason, reserved_ns) VALUES (?, ?, ?, ?)
ON CONFLICT (agent_id) DO NOTHING`), r.AgentID, r.Source, r.Reason, unixNano(at))
	if err != nil {
		return false, fmt.Errorf("reserve agent id %q: %w", r.AgentID, err)
	}
	n, _ := res.RowsAffected()
	return n > 0, nil
}

// UnreserveAgentID releases id (false: it was not reserved).
func (s *Store) UnreserveAgentID(ctx context.Context, id string) (bool, error) {
	res, err := s.db.ExecContext(ctx, s.q(`DELETE FROM reserved_agent_ids WHERE agent_id = ?`), id)
	if err != nil {
		return false, fmt.Errorf("unreserve agent id %q: %w", id, err)
	}
	n, _ := res.RowsAffected()
	return n > 0, nil
}

// ReservedAgentIDs lists the reservations by agent id.
func (s *Store) ReservedAgentIDs(ctx context.Context) ([]Reservation, error) {
	return queryAll(ctx, s, "reserved agent ids", `SELECT agent_id, source, reason, reserved_ns FROM reserved_agent_ids ORDER BY agent_id`, nil,
		func(row rowScanner) (Reservation, error) {
			var r Reservation
			var at int64
			err := row.Scan(&r.AgentID, &r.Source, &r.Reason, &at)
			r.Reserved = fromUnixNano(at)
			return r, err
		})
}

// checkReserved refuses an enrollment under a reserved id, saying what
// holds it and what to do.
func (s *Store) checkReserved(ctx context.Context, tx *sql.Tx, id string) error {
	var source, reason string
	var at int64
	err := s.txQueryRow(ctx, tx, s.q(`SELECT source, reason, reserved_ns FROM reserved_agent_ids WHERE agent_id = ?`), id).Scan(&source, &reason, &at)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil
	case err != nil:
		return fmt.Errorf("enroll: reservation of %q: %w", id, err)
	}
	what := "an operator reserved it"
	if source == ReservedByCertificate {
		what = "an agent presented a certificate of another CA (your own PKI) under it"
	}
	if reason != "" {
		what += " (" + reason + ")"
	}
	return fmt.Errorf("%w: agent id %q is reserved since %s: %s, and a join token cannot take it. "+
		"Enroll this host under another id (agent enroll --agent-id ID); if this host is meant to have the id, release it first (server agent unreserve %s)",
		ErrAgentReserved, id, fromUnixNano(at).UTC().Format(time.RFC3339), what, id)
}
