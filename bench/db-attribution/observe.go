//go:build linux

package main

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"time"

	_ "modernc.org/sqlite" // database/sql driver "sqlite"

	"github.com/plumbline/plumbline/internal/vocab"
)

// observer reads what the server made of the agent's records, from the
// server's own store (SQLite, read-only): the database intervals it
// stored, and each volume's database judgement with its attribution.
type observer struct {
	db *sql.DB
}

func openObserver(path string) (*observer, error) {
	q := url.Values{}
	q.Add("mode", "ro")
	q.Add("_pragma", "busy_timeout(5000)")
	db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	return &observer{db: db}, nil
}

func (o *observer) Close() error { return o.db.Close() }

// reported is one operation of one interval as the server stored it,
// summed over the sets of one location on one volume.
type reported struct {
	source   string
	started  time.Time
	interval time.Duration
	location vocab.DatabaseLocation
	mount    string
	op       vocab.DatabaseOp
	count    uint64
	nanos    float64
	measured bool
}

// latency is the reported mean time of one operation, in seconds.
func (r reported) latency() float64 {
	if r.count == 0 {
		return 0
	}
	return r.nanos / float64(r.count) / 1e9
}

// intervals returns the stored intervals of source that started at or
// after since.
func (o *observer) intervals(ctx context.Context, source string, since time.Time) ([]reported, error) {
	rows, err := o.db.QueryContext(ctx, `SELECT started_ns, interval_ns, location, mount_point, op, sum(count), sum(coalesce(time_ns, 0)),
	  min(CASE WHEN time_ns IS NULL THEN 0 ELSE 1 END)
	  FROM database_io WHERE source = ? AND started_ns >= ?
	  GROUP BY started_ns, interval_ns, location, mount_point, op ORDER BY started_ns`, source, since.UnixNano())
	if err != nil {
		return nil, fmt.Errorf("database_io: %w", err)
	}
	defer rows.Close()
	var out []reported
	for rows.Next() {
		var r reported
		var started, interval int64
		var loc, op string
		var measured int
		if err := rows.Scan(&started, &interval, &loc, &r.mount, &op, &r.count, &r.nanos, &measured); err != nil {
			return nil, err
		}
		r.source, r.started, r.interval = source, time.Unix(0, started), time.Duration(interval)
		r.location, r.op, r.measured = vocab.DatabaseLocation(loc), vocab.DatabaseOp(op), measured == 1
		out = append(out, r)
	}
	return out, rows.Err()
}

// judgement is a volume's database state as the server judged it.
type judgement struct {
	state       string
	attribution string
	reason      string
	updated     time.Time
}

// judged returns the volume's database judgement (found false: none yet).
func (o *observer) judged(ctx context.Context, mount string) (judgement, bool, error) {
	var j judgement
	var updated int64
	err := o.db.QueryRowContext(ctx, `SELECT state, attribution, reason, updated_ns FROM inventory_database WHERE mount_point = ?`, mount).
		Scan(&j.state, &j.attribution, &j.reason, &updated)
	if err == sql.ErrNoRows {
		return j, false, nil
	}
	if err != nil {
		return j, false, fmt.Errorf("inventory_database: %w", err)
	}
	j.updated = time.Unix(0, updated)
	return j, true, nil
}

// probe is the volume's probe baseline: kinds judged, kinds whose history
// is trusted, and the volume's baseline state.
type probe struct {
	kinds, trusted int
	state          string
	degraded       bool
}

func (o *observer) probe(ctx context.Context, mount string) (probe, error) {
	var p probe
	if err := o.db.QueryRowContext(ctx, `SELECT count(*), coalesce(sum(CASE WHEN trusted THEN 1 ELSE 0 END), 0) FROM baseline_states WHERE mount_point = ?`, mount).
		Scan(&p.kinds, &p.trusted); err != nil {
		return p, fmt.Errorf("baseline_states: %w", err)
	}
	err := o.db.QueryRowContext(ctx, `SELECT state, degraded FROM inventory_baseline WHERE mount_point = ?`, mount).Scan(&p.state, &p.degraded)
	if err != nil && err != sql.ErrNoRows {
		return p, fmt.Errorf("inventory_baseline: %w", err)
	}
	return p, nil
}
