package store

import (
	"context"
	"database/sql"
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
	out := map[string][]StripeScanRun{}
	type row struct {
		mount string
		run   StripeScanRun
	}
	err := eachRow(ctx, s, "stripe-scan runs of "+agentID, query, args, func(rows *sql.Rows) (row, error) {
		var r row
		var seq, started int64
		err := rows.Scan(&r.mount, &seq, &started, &r.run.Scan)
		r.run.Sequence, r.run.StartedAt = uint64(seq), fromUnixNano(started)
		return r, err
	}, func(r row) error {
		if len(out[r.mount]) < MaxStripeScanRuns {
			out[r.mount] = append(out[r.mount], r.run)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
