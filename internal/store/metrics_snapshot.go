package store

import (
	"context"
	"fmt"
)

// MetricsSnapshot is what the Prometheus exporter reads on a scrape.
type MetricsSnapshot struct {
	Hosts      []Agent
	Volumes    []Volume
	Baselines  []ProbeBaseline
	StopCounts []StopCount
	Cohorts    []Cohort
}

// MetricsSnapshot reads the hosts, present volumes, baseline states, stop
// counts and cohorts. Each list is read in one statement; the lists are
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
	if m.Cohorts, err = s.ListCohorts(ctx); err != nil {
		return m, err
	}
	return m, nil
}

// RecordCounts counts the stored records by kind (geometry, probe,
// rejected). It scans the records table: callers on a hot path cache it.
func (s *Store) RecordCounts(ctx context.Context) (map[RecordKind]uint64, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT kind, COUNT(*) FROM records GROUP BY kind`)
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
