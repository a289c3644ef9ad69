package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Agent is a registered agent and the facts it reported about its host.
type Agent struct {
	ID           string
	Hostname     string
	OS           string
	Kernel       string
	MachineID    string
	AgentVersion string
	// FirstSeen is set by the store on the first UpsertAgent. LastSeen is
	// the time UpsertAgent was given (the store's clock when zero), moved
	// forward by every AppendBatch and SettleBelow.
	FirstSeen time.Time
	LastSeen  time.Time
	// HighWater is the dedup high-water mark of the agent's current
	// incarnation (read only; see HighWater).
	HighWater uint64
	// Incarnation is the spool incarnation that said Hello last ('' for
	// agents from before incarnations; read only, see Hello).
	Incarnation string
	// IdentityConflicts counts the times an incarnation of this agent that
	// a newer one had superseded spoke again: two live agents share this
	// identity (two hosts with one certificate, or a copied spool).
	// IdentityConflictAt is the last time (zero: never). Read only.
	IdentityConflicts  uint64
	IdentityConflictAt time.Time
	// CertNotBefore and CertNotAfter are the validity of the client
	// certificate the agent presented at its last UpsertAgent (its Hello);
	// zero when it had none (insecure mode) or is not known yet.
	CertNotBefore, CertNotAfter time.Time
	// ConnectedAt is when a server replica last noted the agent connected
	// (MarkConnected); zero: never. Read only.
	ConnectedAt time.Time
	// QuotaDay is the UTC day QuotaDayBytes counts (zero: none yet): what
	// the agent's records cost that day against its storage quota
	// (store.Quota). RecordsRejected counts the records the server
	// refused; QuotaRefusals the batches refused for a quota. Read only.
	QuotaDay        time.Time
	QuotaDayBytes   uint64
	RecordsRejected uint64
	QuotaRefusals   uint64
}

// Alive is when the agent was last known alive: its last report or the
// last time a replica noted it connected, whichever is later.
func (a Agent) Alive() time.Time {
	if a.ConnectedAt.After(a.LastSeen) {
		return a.ConnectedAt
	}
	return a.LastSeen
}

// StoredBytesOn is QuotaDayBytes when QuotaDay is t's UTC day, else 0.
func (a Agent) StoredBytesOn(t time.Time) uint64 {
	if a.QuotaDay.IsZero() || dayOf(a.QuotaDay) != dayOf(t) {
		return 0
	}
	return a.QuotaDayBytes
}

// MaxIncarnationBytes bounds an incarnation id.
const MaxIncarnationBytes = 64

// UpsertAgent registers an agent or updates its host facts, last-seen
// time and certificate validity (zero: none). FirstSeen is kept from the
// first registration.
func (s *Store) UpsertAgent(ctx context.Context, a Agent) error {
	if a.ID == "" {
		return fmt.Errorf("upsert agent: %w: empty agent id", ErrInvalid)
	}
	seen := a.LastSeen
	if seen.IsZero() {
		seen = s.now()
	}
	err := s.write(ctx, a.ID, func(ctx context.Context, tx *sql.Tx) error {
		_, err := s.txExec(ctx, tx, s.q(`
INSERT INTO agents (agent_id, hostname, os, kernel, machine_id, agent_version, first_seen_ns, last_seen_ns,
    cert_not_before_ns, cert_not_after_ns)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (agent_id) DO UPDATE SET
    hostname = excluded.hostname, os = excluded.os, kernel = excluded.kernel,
    machine_id = excluded.machine_id, agent_version = excluded.agent_version,
    last_seen_ns = excluded.last_seen_ns,
    cert_not_before_ns = excluded.cert_not_before_ns, cert_not_after_ns = excluded.cert_not_after_ns`),
			a.ID, a.Hostname, a.OS, a.Kernel, a.MachineID, a.AgentVersion, unixNano(seen), unixNano(seen),
			unixNano(a.CertNotBefore), unixNano(a.CertNotAfter))
		return err
	})
	if err != nil {
		return fmt.Errorf("upsert agent %q: %w", a.ID, err)
	}
	return nil
}

// HighWater returns the dedup high-water mark of one incarnation of an
// agent: the highest agent sequence q such that every sequence 1..q of the
// incarnation is settled (stored, rejected or declared dropped with
// SettleBelow). 0 when none is, or when the incarnation never reported.
// Agents from before incarnations have the incarnation "".
func (s *Store) HighWater(ctx context.Context, agentID, incarnation string) (uint64, error) {
	var hw int64
	err := s.db.QueryRowContext(ctx, s.q(`SELECT COALESCE((SELECT high_water FROM agent_incarnations
WHERE agent_id = a.agent_id AND incarnation = ?), 0) FROM agents a WHERE a.agent_id = ?`), incarnation, agentID).Scan(&hw)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("high water of %q: %w", agentID, ErrUnknownAgent)
	}
	if err != nil {
		return 0, fmt.Errorf("high water of %q: %w", agentID, err)
	}
	return uint64(hw), nil
}

// HelloState is what the store knows of an agent incarnation at its Hello.
type HelloState struct {
	// HighWater is the incarnation's dedup high-water mark.
	HighWater uint64
	// GeometryDigest is the digest of the geometry snapshot the server
	// holds for the agent ("" when none or unknown).
	GeometryDigest string
	// IdentityConflict: this incarnation had been superseded by a newer
	// one, which is still (or was lately) reporting: two live agents share
	// the identity. Superseded is that newer incarnation.
	IdentityConflict bool
	Superseded       string
}

// Hello records that an incarnation of a registered agent said Hello: it
// becomes the agent's current incarnation. An incarnation seen before that
// is not the current one speaks again only when two agents share the
// identity, and that is counted (Agent.IdentityConflicts). The legacy
// incarnation "" is never counted: an upgraded agent still sends what its
// spool held from before with it.
func (s *Store) Hello(ctx context.Context, agentID, incarnation string) (HelloState, error) {
	if len(incarnation) > MaxIncarnationBytes {
		return HelloState{}, fmt.Errorf("hello of %q: %w: incarnation of %d bytes", agentID, ErrInvalid, len(incarnation))
	}
	var st HelloState
	err := s.write(ctx, agentID, func(ctx context.Context, tx *sql.Tx) error {
		st = HelloState{}
		lk, err := s.lockAgent(ctx, tx, agentID)
		if err != nil {
			return err
		}
		st.GeometryDigest = lk.digest
		hw, existed, err := s.touchIncarnation(ctx, tx, agentID, incarnation)
		if err != nil {
			return err
		}
		st.HighWater = hw
		if superseded(incarnation, existed, lk.incarnation) {
			st.IdentityConflict, st.Superseded = true, lk.incarnation
			if err := s.countConflict(ctx, tx, agentID); err != nil {
				return err
			}
		}
		if incarnation != "" && lk.incarnation != incarnation {
			_, err = s.txExec(ctx, tx, s.q(`UPDATE agents SET incarnation = ? WHERE agent_id = ?`), incarnation, agentID)
		}
		return err
	})
	if err != nil {
		return HelloState{}, fmt.Errorf("hello of %q: %w", agentID, err)
	}
	return st, nil
}

// touchIncarnation creates the incarnation's row if it has none and moves
// its last-seen time; it returns its high-water mark and whether the row
// existed.
func (s *Store) touchIncarnation(ctx context.Context, tx *sql.Tx, agentID, incarnation string) (hw uint64, existed bool, err error) {
	now := unixNano(s.now())
	var cur int64
	err = s.txQueryRow(ctx, tx, s.q(`UPDATE agent_incarnations SET last_seen_ns = CASE WHEN last_seen_ns < ? THEN ? ELSE last_seen_ns END
WHERE agent_id = ? AND incarnation = ? RETURNING high_water`), now, now, agentID, incarnation).Scan(&cur)
	switch {
	case err == nil:
		return uint64(cur), true, nil
	case !errors.Is(err, sql.ErrNoRows):
		return 0, false, fmt.Errorf("incarnation: %w", err)
	}
	if _, err := s.txExec(ctx, tx, s.q(`INSERT INTO agent_incarnations (agent_id, incarnation, high_water, first_seen_ns, last_seen_ns)
VALUES (?, ?, 0, ?, ?)`), agentID, incarnation, now, now); err != nil {
		return 0, false, fmt.Errorf("incarnation: %w", err)
	}
	return 0, false, nil
}

// superseded says whether an incarnation that reports is one a newer one
// replaced: it reported before (existed), and another one said Hello
// since. The legacy incarnation "" never is (an upgraded agent sends its
// older records with it after its new incarnation's Hello), nor is any
// before the agent's first Hello with an incarnation.
func superseded(incarnation string, existed bool, current string) bool {
	return incarnation != "" && existed && current != "" && current != incarnation
}

func (s *Store) countConflict(ctx context.Context, tx *sql.Tx, agentID string) error {
	if _, err := s.txExec(ctx, tx, s.q(`UPDATE agents SET identity_conflicts = identity_conflicts + 1, identity_conflict_ns = ?
WHERE agent_id = ?`), unixNano(s.now()), agentID); err != nil {
		return fmt.Errorf("identity conflict: %w", err)
	}
	return nil
}

// SettleBelow records that an incarnation of the agent will never send a
// sequence below first (it dropped them: spool size cap), so they no
// longer hold its high-water mark back. It returns the new mark.
func (s *Store) SettleBelow(ctx context.Context, agentID, incarnation string, first uint64) (uint64, error) {
	res, err := s.AppendBatchFrom(ctx, agentID, incarnation, first, nil)
	if err != nil {
		return 0, fmt.Errorf("settle below %d for %q: %w", first, agentID, err)
	}
	return res.HighWater, nil
}

// ListHosts returns every registered agent, by hostname.
func (s *Store) ListHosts(ctx context.Context) ([]Agent, error) {
	return queryAll(ctx, s, "list hosts", `SELECT `+agentColumns+` FROM agents a ORDER BY a.hostname, a.agent_id`, nil,
		func(row rowScanner) (Agent, error) { return scanAgent(row) })
}

// scanAgent scans a row of agentColumns (then extra).
func scanAgent(row interface{ Scan(...any) error }, extra ...any) (Agent, error) {
	var a Agent
	var first, last, hw, conflicts, conflictNS, notBefore, notAfter, connected, qDay, qBytes, rejected, refusals int64
	dest := append([]any{&a.ID, &a.Hostname, &a.OS, &a.Kernel, &a.MachineID, &a.AgentVersion, &first, &last,
		&hw, &a.Incarnation, &conflicts, &conflictNS, &notBefore, &notAfter, &connected, &qDay, &qBytes, &rejected, &refusals}, extra...)
	if err := row.Scan(dest...); err != nil {
		return Agent{}, err
	}
	if qDay > 0 {
		a.QuotaDay = time.Unix(qDay*86400, 0).UTC()
	}
	a.QuotaDayBytes, a.RecordsRejected, a.QuotaRefusals = uint64(max(qBytes, 0)), uint64(max(rejected, 0)), uint64(max(refusals, 0))
	a.FirstSeen, a.LastSeen, a.HighWater = fromUnixNano(first), fromUnixNano(last), uint64(hw)
	a.IdentityConflicts = uint64(conflicts)
	if conflictNS != 0 {
		a.IdentityConflictAt = fromUnixNano(conflictNS)
	}
	if notAfter != 0 {
		a.CertNotBefore, a.CertNotAfter = fromUnixNano(notBefore), fromUnixNano(notAfter)
	}
	if connected != 0 {
		a.ConnectedAt = fromUnixNano(connected)
	}
	return a, nil
}

// markConnectedChunk bounds the agent ids of one MarkConnected statement.
const markConnectedChunk = 500

// MarkConnected notes that the agents ids hold an open connection to this
// replica at at: each one's ConnectedAt moves forward to at (never back,
// as another replica may have noted a later time). Unknown ids are
// ignored. One statement and transaction per 500 agents, in id order, so
// no batch holds many agents' rows (which ingest locks) for long.
func (s *Store) MarkConnected(ctx context.Context, ids []string, at time.Time) error {
	ids = slices.Sorted(slices.Values(ids))
	ns := unixNano(at)
	for chunk := range slices.Chunk(ids, markConnectedChunk) {
		args := make([]any, 0, len(chunk)+2)
		args = append(args, ns, ns)
		for _, id := range chunk {
			args = append(args, id)
		}
		q := `UPDATE agents SET connected_ns = ? WHERE connected_ns < ? AND agent_id IN (` + placeholders(len(chunk)) + `)`
		if _, err := s.db.ExecContext(ctx, s.q(q), args...); err != nil {
			return fmt.Errorf("mark %d agents connected: %w", len(ids), err)
		}
	}
	return nil
}
