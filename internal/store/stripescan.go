package store

import (
	"context"
	"fmt"
	"time"
)

// StripeScanRun is one stored stripe-scan run's answer.
type StripeScanRun struct {
	Sequence  uint64
	StartedAt time.Time
	// Scan is the run's plumbline.v1.StripeScan.
	Scan []byte
}

// MaxStripeScanRuns is how many of a volume's latest stripe-scan runs the
// server's measured stripe is derived from.
const MaxStripeScanRuns = 16

// StripeScanRuns returns the latest stripe-scan runs (at most
// MaxStripeScanRuns, newest first) of each of the agent's volumes that has
// any, by mount point; mountPoint "" means every volume of the agent.
func (s *Store) StripeScanRuns(ctx context.Context, agentID, mountPoint string) (map[string][]StripeScanRun, error) {
	query := `SELECT mount_point, sequence, started_ns, stripe_scan FROM probe_results
WHERE agent_id = ? AND kind = 'stripe-scan' AND stripe_scan IS NOT NULL`
	args := []any{agentID}
	if mountPoint != "" {
		query += ` AND mount_point = ?`
		args = append(args, mountPoint)
	}
	query += ` ORDER BY mount_point, started_ns DESC, sequence DESC`
	rows, err := s.db.QueryContext(ctx, s.q(query), args...)
	if err != nil {
		return nil, fmt.Errorf("stripe-scan runs of %s: %w", agentID, err)
	}
	defer rows.Close()
	out := map[string][]StripeScanRun{}
	for rows.Next() {
		var mount string
		var seq, started int64
		var scan []byte
		if err := rows.Scan(&mount, &seq, &started, &scan); err != nil {
			return nil, fmt.Errorf("stripe-scan runs of %s: %w", agentID, err)
		}
		if len(out[mount]) < MaxStripeScanRuns {
			out[mount] = append(out[mount], StripeScanRun{Sequence: uint64(seq), StartedAt: fromUnixNano(started), Scan: scan})
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("stripe-scan runs of %s: %w", agentID, err)
	}
	return out, nil
}

// scannedVolumes returns the (agent, mount point) pairs that have stripe-scan
// runs, for RejudgeVolumes to know whose runs to read.
func (s *Store) scannedVolumes(ctx context.Context) (map[volumeKey]bool, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT DISTINCT agent_id, mount_point FROM probe_results WHERE kind = 'stripe-scan' AND stripe_scan IS NOT NULL`)
	if err != nil {
		return nil, fmt.Errorf("scanned volumes: %w", err)
	}
	defer rows.Close()
	out := map[volumeKey]bool{}
	for rows.Next() {
		var k volumeKey
		if err := rows.Scan(&k.agent, &k.mount); err != nil {
			return nil, fmt.Errorf("scanned volumes: %w", err)
		}
		out[k] = true
	}
	return out, rows.Err()
}
