package store

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// MetricsSnapshot is what the Prometheus exporter reads on a scrape.
type MetricsSnapshot struct {
	Hosts      []Agent
	Volumes    []Volume
	Baselines  []ProbeBaseline
	StopCounts []StopCount
	Failing    []ProbeFailing
	Cohorts    []Cohort
}

// MetricsSnapshot reads the hosts, present volumes, baseline states, stop
// counts, failing streaks and cohorts. Each list is read in one statement; the lists are
// not one transaction (a scrape may see a volume before its first state).
func (s *Store) MetricsSnapshot(ctx context.Context) (MetricsSnapshot, error) {
	var m MetricsSnapshot
	var err error
	if m.Hosts, err = s.ListHosts(ctx); err != nil {
		return m, err
	}
	if m.Volumes, err = s.ListVolumes(ctx); err != nil {
		return m, err
	}
	if m.Baselines, err = s.ListProbeBaselines(ctx); err != nil {
		return m, err
	}
	if m.StopCounts, err = s.ListStopCounts(ctx); err != nil {
		return m, err
	}
	if m.Failing, err = s.ListProbeFailing(ctx); err != nil {
		return m, err
	}
	if m.Cohorts, err = s.ListCohorts(ctx); err != nil {
		return m, err
	}
	return m, nil
}

// RecordCounts counts the records ever stored by kind (geometry, probe,
// rejected): those in the records table and those retention pruned. It
// scans the records table: callers on a hot path cache it.
func (s *Store) RecordCounts(ctx context.Context) (map[RecordKind]uint64, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT kind, CAST(SUM(n) AS BIGINT) FROM (SELECT kind, COUNT(*) AS n FROM records GROUP BY kind
UNION ALL SELECT kind, pruned AS n FROM records_pruned) AS stored GROUP BY kind`)
	if err != nil {
		return nil, fmt.Errorf("record counts: %w", err)
	}
	defer rows.Close()
	out := map[RecordKind]uint64{KindGeometry: 0, KindProbe: 0, KindRejected: 0}
	for rows.Next() {
		var k string
		var n int64
		if err := rows.Scan(&k, &n); err != nil {
			return nil, fmt.Errorf("record counts: %w", err)
		}
		out[RecordKind(k)] = uint64(n)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("record counts: %w", err)
	}
	return out, nil
}

// MetricsBaseline is the part of a baseline state (table baseline_states)
// the Prometheus exporter shows: no detector, profile or history median.
type MetricsBaseline struct {
	AgentID         string
	MountPoint      string
	Kind            string
	Status          string
	Reference       string
	Since           time.Time
	HistoryRatio    float64
	CohortRatio     float64
	CohortReference string
	LastRun         time.Time
	Runs            uint64
	// Histogram is the plumbline.v1.Histogram of every judged run, merged.
	Histogram []byte
	// Signal, TailRatio, MeanRatio and RateRatio as in ProbeBaseline.
	Signal                          string
	TailRatio, MeanRatio, RateRatio float64
}

// ListMetricsBaselines returns what the exporter shows of every baseline
// state, by agent, mount point and kind. It reads only those columns: the
// detector bytes are most of a row and the exporter has no use for them.
func (s *Store) ListMetricsBaselines(ctx context.Context) ([]MetricsBaseline, error) {
	return s.listMetricsBaselines(ctx, "", nil)
}

// ListMetricsBaselinesBetween is ListMetricsBaselines of the agents from
// fromAgent (inclusive; "" for the first) to toAgent (exclusive; "" for
// past the last), in the database's order: reads of adjacent ranges can
// run at once and be concatenated.
func (s *Store) ListMetricsBaselinesBetween(ctx context.Context, fromAgent, toAgent string) ([]MetricsBaseline, error) {
	var where []string
	var args []any
	if fromAgent != "" {
		where, args = append(where, "agent_id >= ?"), append(args, fromAgent)
	}
	if toAgent != "" {
		where, args = append(where, "agent_id < ?"), append(args, toAgent)
	}
	if len(where) == 0 {
		return s.listMetricsBaselines(ctx, "", nil)
	}
	return s.listMetricsBaselines(ctx, "WHERE "+strings.Join(where, " AND "), args)
}

// ListMetricsBaselinesOf is ListMetricsBaselines of some volumes only.
func (s *Store) ListMetricsBaselinesOf(ctx context.Context, volumes []VolumeKey) ([]MetricsBaseline, error) {
	var out []MetricsBaseline
	for chunk := range slices.Chunk(volumes, rowsPerInsert) {
		var b strings.Builder
		args := make([]any, 0, 2*len(chunk))
		b.WriteString("WHERE ")
		for i, v := range chunk {
			if i > 0 {
				b.WriteString(" OR ")
			}
			b.WriteString("(agent_id = ? AND mount_point = ?)")
			args = append(args, v.AgentID, v.MountPoint)
		}
		rows, err := s.listMetricsBaselines(ctx, b.String(), args)
		if err != nil {
			return nil, err
		}
		out = append(out, rows...)
	}
	return out, nil
}

func (s *Store) listMetricsBaselines(ctx context.Context, where string, args []any) ([]MetricsBaseline, error) {
	return queryAll(ctx, s, "list metrics baselines", `
SELECT agent_id, mount_point, kind, status, reference, since_ns, history_ratio, cohort_ratio, cohort_reference,
    last_run_ns, runs, latency_histogram, signal, p99_ratio, mean_ratio, rate_ratio
FROM baseline_states `+where+` ORDER BY agent_id, mount_point, kind`, args, func(row rowScanner) (MetricsBaseline, error) {
		var b MetricsBaseline
		var since, last, runs int64
		if err := row.Scan(&b.AgentID, &b.MountPoint, &b.Kind, &b.Status, &b.Reference, &since, &b.HistoryRatio,
			&b.CohortRatio, &b.CohortReference, &last, &runs, &b.Histogram, &b.Signal, &b.TailRatio, &b.MeanRatio, &b.RateRatio); err != nil {
			return b, err
		}
		b.Since, b.LastRun, b.Runs = fromUnixNano(since), fromUnixNano(last), uint64(runs)
		return b, nil
	})
}

// VolumeKey names a volume.
type VolumeKey struct {
	AgentID    string
	MountPoint string
}

// BaselineRuns is how many baseline states a volume has and how many runs
// they judged in all. The evaluator rewrites a state only when it judged a
// run of it, and run counts only grow, so these tell which volumes an
// evaluator pass changed.
type BaselineRuns struct {
	AgentID    string
	MountPoint string
	States     int
	Runs       uint64
}

// ListBaselineRuns returns every volume's BaselineRuns, by agent and mount
// point.
func (s *Store) ListBaselineRuns(ctx context.Context) ([]BaselineRuns, error) {
	return queryAll(ctx, s, "list baseline runs", `
SELECT agent_id, mount_point, COUNT(*), SUM(runs) FROM baseline_states
GROUP BY agent_id, mount_point ORDER BY agent_id, mount_point`, nil, func(row rowScanner) (BaselineRuns, error) {
		var b BaselineRuns
		var n, runs int64
		if err := row.Scan(&b.AgentID, &b.MountPoint, &n, &runs); err != nil {
			return b, err
		}
		b.States, b.Runs = int(n), uint64(runs)
		return b, nil
	})
}

// VolumeSequence is a present volume, the sequence of the geometry
// snapshot that last wrote its row and when its judged record was last
// written (a re-judge moves it on; the zero time: not judged).
type VolumeSequence struct {
	AgentID    string
	MountPoint string
	Sequence   uint64
	JudgedAt   time.Time
}

// ListVolumeSequences returns the present volumes' sequences, by agent and
// mount point: the cheap read that tells whether ListVolumes would return
// anything new (a volume's row changes with its sequence or its
// judgement).
func (s *Store) ListVolumeSequences(ctx context.Context) ([]VolumeSequence, error) {
	return queryAll(ctx, s, "list volume sequences", `
SELECT v.agent_id, v.mount_point, v.sequence, COALESCE(f.judged_ns, 0) FROM volumes v
LEFT JOIN inventory_volumes f ON f.agent_id = v.agent_id AND f.mount_point = v.mount_point
WHERE v.present ORDER BY v.agent_id, v.mount_point`, nil, func(row rowScanner) (VolumeSequence, error) {
		var v VolumeSequence
		var seq, judged int64
		if err := row.Scan(&v.AgentID, &v.MountPoint, &seq, &judged); err != nil {
			return v, err
		}
		v.Sequence, v.JudgedAt = uint64(seq), fromUnixNano(judged)
		return v, nil
	})
}
