package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// DatabaseState is the evaluator's judgement of one operation of one
// database source on one volume (table database_states).
type DatabaseState struct {
	AgentID, MountPoint, Source, Op string
	Engine                          string
	// Detector is the baseline.Detector of the operation's latency;
	// RateHistory the evaluator's history of its rate (nil: none yet).
	Detector    []byte
	RateHistory []byte
	// Status is learning, ok, degraded or not-measured (NotMeasured says
	// why: the database does not time the operation).
	Status string
	// Ratio is the last judged interval's latency over the history's
	// median, since when the status holds.
	Ratio float64
	Since time.Time
	// HistoryMedian, Latency: seconds (the history's median and the last
	// interval's Δtime/Δops; 0 when not measured). OpsRate and BytesRate:
	// per second over the last interval.
	HistoryMedian, Latency float64
	OpsRate, BytesRate     float64
	NotMeasured            string
	// Last is the end of the last interval; Intervals counts those judged.
	Last      time.Time
	Intervals uint64
}

// DatabaseVolume is the database state of one volume (table
// inventory_database): the worst of its operations, and when degraded the
// attribution (vocab.Attribution) with its numbers in Reason.
type DatabaseVolume struct {
	AgentID, MountPoint string
	State               string
	Attribution         string
	Reason              string
	UpdatedAt           time.Time
}

// DatabaseUpdate is what one evaluator pass writes of the databases, in
// one transaction.
type DatabaseUpdate struct {
	// States and Volumes replace the stored rows of the same keys.
	States  []DatabaseState
	Volumes []DatabaseVolume
	// Watermarks move each agent's database watermark forward (never back).
	Watermarks map[string]uint64
}

// SaveDatabaseStates writes one pass of the database judge.
func (s *Store) SaveDatabaseStates(ctx context.Context, u DatabaseUpdate) error {
	return s.inTx(ctx, func(tx *sql.Tx) error {
		for agent, seq := range u.Watermarks {
			if _, err := tx.ExecContext(ctx, s.q(`
INSERT INTO database_watermarks (agent_id, evaluated_through) VALUES (?, ?)
ON CONFLICT (agent_id) DO UPDATE SET evaluated_through = excluded.evaluated_through
WHERE database_watermarks.evaluated_through < excluded.evaluated_through`), agent, int64(seq)); err != nil {
				return fmt.Errorf("database watermark %s: %w", agent, err)
			}
		}
		for _, d := range u.States {
			if _, err := tx.ExecContext(ctx, s.q(`
INSERT INTO database_states (agent_id, mount_point, source, op, engine, detector, status, ratio, since_ns, history_median,
    latency, ops_rate, bytes_rate, not_measured, last_ns, intervals, rate_history) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (agent_id, mount_point, source, op) DO UPDATE SET engine = excluded.engine, detector = excluded.detector,
    status = excluded.status, ratio = excluded.ratio, since_ns = excluded.since_ns, history_median = excluded.history_median,
    latency = excluded.latency, ops_rate = excluded.ops_rate, bytes_rate = excluded.bytes_rate,
    not_measured = excluded.not_measured, last_ns = excluded.last_ns, intervals = excluded.intervals,
    rate_history = excluded.rate_history`),
				d.AgentID, d.MountPoint, d.Source, d.Op, d.Engine, append([]byte{}, d.Detector...), d.Status, d.Ratio, unixNano(d.Since),
				d.HistoryMedian, d.Latency, d.OpsRate, d.BytesRate, d.NotMeasured, unixNano(d.Last), int64(d.Intervals),
				append([]byte{}, d.RateHistory...)); err != nil {
				return fmt.Errorf("database state %s:%s %s %s: %w", d.AgentID, d.MountPoint, d.Source, d.Op, err)
			}
		}
		for _, v := range u.Volumes {
			if _, err := tx.ExecContext(ctx, s.q(`
INSERT INTO inventory_database (agent_id, mount_point, state, attribution, reason, updated_ns) VALUES (?, ?, ?, ?, ?, ?)
ON CONFLICT (agent_id, mount_point) DO UPDATE SET state = excluded.state, attribution = excluded.attribution,
    reason = excluded.reason, updated_ns = excluded.updated_ns`),
				v.AgentID, v.MountPoint, v.State, v.Attribution, v.Reason, unixNano(v.UpdatedAt)); err != nil {
				return fmt.Errorf("database volume %s:%s: %w", v.AgentID, v.MountPoint, err)
			}
		}
		if len(u.Volumes) == 0 {
			return nil
		}
		return bumpGeneration(ctx, tx)
	})
}

// ListDatabaseStates returns every volume's database operation states, by
// agent, mount point, source and op.
func (s *Store) ListDatabaseStates(ctx context.Context) ([]DatabaseState, error) {
	return queryAll(ctx, s, "database states", `
SELECT agent_id, mount_point, source, op, engine, detector, status, ratio, since_ns, history_median,
    latency, ops_rate, bytes_rate, not_measured, last_ns, intervals, rate_history
FROM database_states ORDER BY agent_id, mount_point, source, op`, nil, func(row rowScanner) (DatabaseState, error) {
		var d DatabaseState
		var since, last, n int64
		err := row.Scan(&d.AgentID, &d.MountPoint, &d.Source, &d.Op, &d.Engine, &d.Detector, &d.Status, &d.Ratio, &since,
			&d.HistoryMedian, &d.Latency, &d.OpsRate, &d.BytesRate, &d.NotMeasured, &last, &n, &d.RateHistory)
		d.Since, d.Last, d.Intervals = fromUnixNano(since), fromUnixNano(last), uint64(n)
		return d, err
	})
}

// ListDatabaseVolumes returns every volume's database state, by agent and
// mount point.
func (s *Store) ListDatabaseVolumes(ctx context.Context) ([]DatabaseVolume, error) {
	return queryAll(ctx, s, "database volumes", `
SELECT agent_id, mount_point, state, attribution, reason, updated_ns
FROM inventory_database ORDER BY agent_id, mount_point`, nil, func(row rowScanner) (DatabaseVolume, error) {
		var v DatabaseVolume
		var updated int64
		err := row.Scan(&v.AgentID, &v.MountPoint, &v.State, &v.Attribution, &v.Reason, &updated)
		v.UpdatedAt = fromUnixNano(updated)
		return v, err
	})
}

// DatabaseVolumeOf returns one volume's database state and operations;
// ok false when the volume has none.
func (s *Store) DatabaseVolumeOf(ctx context.Context, agentID, mountPoint string) (DatabaseVolume, []DatabaseState, bool, error) {
	vols, err := queryAll(ctx, s, "database volume", `
SELECT state, attribution, reason, updated_ns FROM inventory_database WHERE agent_id = ? AND mount_point = ?`,
		[]any{agentID, mountPoint}, func(row rowScanner) (DatabaseVolume, error) {
			v := DatabaseVolume{AgentID: agentID, MountPoint: mountPoint}
			var updated int64
			err := row.Scan(&v.State, &v.Attribution, &v.Reason, &updated)
			v.UpdatedAt = fromUnixNano(updated)
			return v, err
		})
	if err != nil || len(vols) == 0 {
		return DatabaseVolume{}, nil, false, err
	}
	states, err := queryAll(ctx, s, "database volume", `
SELECT source, op, engine, status, ratio, since_ns, history_median, latency, ops_rate, bytes_rate, not_measured, last_ns, intervals,
    rate_history
FROM database_states WHERE agent_id = ? AND mount_point = ? ORDER BY source, op`, []any{agentID, mountPoint},
		func(row rowScanner) (DatabaseState, error) {
			d := DatabaseState{AgentID: agentID, MountPoint: mountPoint}
			var since, last, n int64
			err := row.Scan(&d.Source, &d.Op, &d.Engine, &d.Status, &d.Ratio, &since, &d.HistoryMedian, &d.Latency,
				&d.OpsRate, &d.BytesRate, &d.NotMeasured, &last, &n, &d.RateHistory)
			d.Since, d.Last, d.Intervals = fromUnixNano(since), fromUnixNano(last), uint64(n)
			return d, err
		})
	return vols[0], states, true, err
}
