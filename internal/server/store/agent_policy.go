package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"
)

// AgentPolicy is what an agent last told the server about its central
// policy (table agent_policy).
type AgentPolicy struct {
	AgentID string
	// Hostname is the agents row's (read only).
	Hostname string
	Labels   map[string]string
	// EffectiveConfig is the YAML the agent runs with and AppliedDigest the
	// hex digest of the central policy in it; both "" in a Hello, which
	// keeps the stored ones.
	EffectiveConfig string
	AppliedDigest   string
	ReportedAt      time.Time
}

// PutAgentPolicy records what an agent said of its policy. An empty
// EffectiveConfig (a Hello) keeps the stored configuration and digest.
func (s *Store) PutAgentPolicy(ctx context.Context, p AgentPolicy) error {
	labels, err := json.Marshal(p.Labels)
	if err != nil {
		return fmt.Errorf("put agent policy %q: %w", p.AgentID, err)
	}
	if p.Labels == nil {
		labels = []byte("{}")
	}
	at := p.ReportedAt
	if at.IsZero() {
		at = s.now()
	}
	keep := p.EffectiveConfig == ""
	err = s.write(ctx, p.AgentID, func(ctx context.Context, tx *sql.Tx) error {
		_, err := s.txExec(ctx, tx, s.q(`
INSERT INTO agent_policy (agent_id, labels, effective_config, applied_digest, reported_ns)
VALUES (?, ?, ?, ?, ?)
ON CONFLICT (agent_id) DO UPDATE SET
    labels = excluded.labels, reported_ns = excluded.reported_ns,
    effective_config = CASE WHEN ? THEN agent_policy.effective_config ELSE excluded.effective_config END,
    applied_digest = CASE WHEN ? THEN agent_policy.applied_digest ELSE excluded.applied_digest END`),
			p.AgentID, string(labels), p.EffectiveConfig, p.AppliedDigest, unixNano(at), keep, keep)
		return err
	})
	if err != nil {
		return fmt.Errorf("put agent policy %q: %w", p.AgentID, err)
	}
	return nil
}

// AgentPolicies returns what the agents whose host name or agent id is
// host said of their policy, by agent id.
func (s *Store) AgentPolicies(ctx context.Context, host string) ([]AgentPolicy, error) {
	rows, err := s.db.QueryContext(ctx, s.q(`
SELECT p.agent_id, a.hostname, p.labels, p.effective_config, p.applied_digest, p.reported_ns
FROM agent_policy p JOIN agents a ON a.agent_id = p.agent_id
WHERE a.hostname = ? OR p.agent_id = ?
ORDER BY p.agent_id`), host, host)
	if err != nil {
		return nil, fmt.Errorf("agent policies of %q: %w", host, err)
	}
	defer rows.Close()
	var out []AgentPolicy
	for rows.Next() {
		var p AgentPolicy
		var labels string
		var ns int64
		if err := rows.Scan(&p.AgentID, &p.Hostname, &labels, &p.EffectiveConfig, &p.AppliedDigest, &ns); err != nil {
			return nil, fmt.Errorf("agent policies of %q: %w", host, err)
		}
		if err := json.Unmarshal([]byte(labels), &p.Labels); err != nil {
			return nil, fmt.Errorf("agent policies of %q: labels of %s: %w", host, p.AgentID, err)
		}
		p.ReportedAt = time.Unix(0, ns).UTC()
		out = append(out, p)
	}
	return out, rows.Err()
}
