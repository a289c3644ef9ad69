package store

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// KindDatabase is a record carrying one interval of a database's own I/O
// statistics (plumbline.v1.DatabaseIO).
const KindDatabase RecordKind = "database"

// DatabaseIO is one interval of a database's own I/O statistics, as ingest
// validated it: every operation of every counter set, flattened.
type DatabaseIO struct {
	// Source is the source's name in the agent's configuration; Engine
	// (vocab.DatabaseEngine) and Version the database's.
	Source, Engine, Version string
	// StartedAt is the interval's first sample; Interval the time to the
	// second (> 0).
	StartedAt time.Time
	Interval  time.Duration
	// Ops are the operations counted, one per (counter set, op), in the
	// record's order.
	Ops []DatabaseOp
}

// DatabaseOp is one operation's delta over an interval, for one location
// of a database's files.
type DatabaseOp struct {
	// Location (vocab.DatabaseLocation) and Path say which files; MountPoint
	// and Device the volume holding them, empty when the agent could not
	// attribute them (Attribution says why).
	Location, Path, MountPoint, Device, Attribution string
	// Op is the vocab.DatabaseOp.
	Op           string
	Count, Bytes uint64
	// Measured: the database timed the operations and Time is what they
	// took. Unmeasured operations carry NotMeasured (why), never a 0 time.
	Measured    bool
	Time        time.Duration
	NotMeasured string
}

// checkDatabase checks what the store needs of a database record: counters
// within a BIGINT, a positive interval.
func checkDatabase(r *Record) error {
	d := r.Database
	if (r.Kind == KindDatabase) != (d != nil) {
		return fmt.Errorf("%w: sequence %d: a database interval goes with kind %q and only with it", ErrInvalid, r.Sequence, KindDatabase)
	}
	if d == nil {
		return nil
	}
	if d.Interval <= 0 {
		return fmt.Errorf("%w: sequence %d: database interval %s: want > 0", ErrInvalid, r.Sequence, d.Interval)
	}
	for _, o := range d.Ops {
		if o.Count > math.MaxInt64 || o.Bytes > math.MaxInt64 || o.Time < 0 {
			return fmt.Errorf("%w: sequence %d: database counters outside 0 to 2^63-1", ErrInvalid, r.Sequence)
		}
	}
	return nil
}

const (
	insertDatabaseSQL = `INSERT INTO database_io (agent_id, sequence, ordinal, source, engine, version, started_ns, interval_ns,
    location, path, mount_point, device, attribution, op, count, bytes, time_ns, not_measured) VALUES `
	databaseRowSQL = "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)

// insertDatabase stores the operations of the batch's database records,
// one row each, under the record's server sequence.
func (s *Store) insertDatabase(ctx context.Context, tx *sql.Tx, agentID string, recs []stored) error {
	type row struct {
		r       stored
		ordinal int
	}
	var rows []row
	for _, r := range recs {
		for i := range r.Database.Ops {
			rows = append(rows, row{r, i})
		}
	}
	for chunk := range slices.Chunk(rows, s.recordRowsPerInsert()) {
		var b strings.Builder
		b.WriteString(insertDatabaseSQL)
		b.WriteString(tupleList(databaseRowSQL, len(chunk)))
		args := make([]any, 0, len(chunk)*18)
		for _, x := range chunk {
			d, o := x.r.Database, x.r.Database.Ops[x.ordinal]
			var t any // NULL: not measured
			if o.Measured {
				t = int64(o.Time)
			}
			args = append(args, agentID, int64(x.r.server), x.ordinal, d.Source, d.Engine, d.Version,
				unixNano(d.StartedAt), int64(d.Interval), o.Location, o.Path, o.MountPoint, o.Device, o.Attribution,
				o.Op, int64(o.Count), int64(o.Bytes), t, o.NotMeasured)
		}
		if _, err := s.txExec(ctx, tx, s.q(b.String()), args...); err != nil {
			return fmt.Errorf("insert database intervals: %w", err)
		}
	}
	return nil
}

// DatabaseRun is a stored database interval with the agent and server
// sequence it came with.
type DatabaseRun struct {
	AgentID  string
	Sequence uint64
	DatabaseIO
}

// PendingDatabaseRuns returns the database intervals the evaluator has not
// judged yet, whole, by agent and sequence: those above the agent's
// database watermark and at or below its dedup high-water mark. It reads
// at most limit operation rows, then completes the last interval.
func (s *Store) PendingDatabaseRuns(ctx context.Context, limit int) ([]DatabaseRun, error) {
	type opRow struct {
		agent string
		seq   uint64
		io    DatabaseIO
		op    DatabaseOp
	}
	scan := func(row rowScanner) (opRow, error) {
		var x opRow
		var seq, started, interval, count, bytes int64
		var t sql.NullInt64
		if err := row.Scan(&x.agent, &seq, &x.io.Source, &x.io.Engine, &x.io.Version, &started, &interval,
			&x.op.Location, &x.op.Path, &x.op.MountPoint, &x.op.Device, &x.op.Attribution, &x.op.Op, &count, &bytes, &t, &x.op.NotMeasured); err != nil {
			return x, err
		}
		x.seq, x.io.StartedAt, x.io.Interval = uint64(seq), fromUnixNano(started), time.Duration(interval)
		x.op.Count, x.op.Bytes = uint64(count), uint64(bytes)
		x.op.Measured, x.op.Time = t.Valid, time.Duration(t.Int64)
		return x, nil
	}
	const cols = `d.agent_id, d.sequence, d.source, d.engine, d.version, d.started_ns, d.interval_ns,
    d.location, d.path, d.mount_point, d.device, d.attribution, d.op, d.count, d.bytes, d.time_ns, d.not_measured`
	rows, err := queryAll(ctx, s, "pending database intervals", `
SELECT `+cols+`
FROM database_io d
JOIN agents a ON a.agent_id = d.agent_id
LEFT JOIN database_watermarks w ON w.agent_id = d.agent_id
WHERE d.sequence > COALESCE(w.evaluated_through, 0) AND d.sequence <= a.high_water
ORDER BY d.agent_id, d.sequence, d.ordinal
LIMIT ?`, []any{limit}, scan)
	if err != nil {
		return nil, err
	}
	if len(rows) == limit && limit > 0 {
		// The last interval may be cut: read the rest of it.
		last := rows[len(rows)-1]
		rest, err := queryAll(ctx, s, "pending database intervals", `
SELECT `+cols+` FROM database_io d WHERE d.agent_id = ? AND d.sequence = ? ORDER BY d.ordinal`,
			[]any{last.agent, int64(last.seq)}, scan)
		if err != nil {
			return nil, err
		}
		for len(rows) > 0 && rows[len(rows)-1].agent == last.agent && rows[len(rows)-1].seq == last.seq {
			rows = rows[:len(rows)-1]
		}
		rows = append(rows, rest...)
	}
	var out []DatabaseRun
	for _, x := range rows {
		if n := len(out); n == 0 || out[n-1].AgentID != x.agent || out[n-1].Sequence != x.seq {
			out = append(out, DatabaseRun{AgentID: x.agent, Sequence: x.seq, DatabaseIO: x.io})
		}
		r := &out[len(out)-1]
		r.Ops = append(r.Ops, x.op)
	}
	return out, nil
}

// DatabaseHistory returns the stored intervals of one volume (agent and
// mount point) that started at or after since, oldest first, at most
// limit operation rows: the history the API shows beside the probe's.
func (s *Store) DatabaseHistory(ctx context.Context, agentID, mountPoint string, since time.Time, limit int) ([]DatabaseRun, error) {
	rows, err := queryAll(ctx, s, "database history", `
SELECT d.sequence, d.source, d.engine, d.version, d.started_ns, d.interval_ns,
    d.location, d.path, d.device, d.attribution, d.op, d.count, d.bytes, d.time_ns, d.not_measured
FROM database_io d
WHERE d.agent_id = ? AND d.mount_point = ? AND d.started_ns >= ?
ORDER BY d.started_ns, d.sequence, d.ordinal
LIMIT ?`, []any{agentID, mountPoint, unixNano(since), limit}, func(row rowScanner) (DatabaseRun, error) {
		r := DatabaseRun{AgentID: agentID}
		var o DatabaseOp
		var seq, started, interval, count, bytes int64
		var t sql.NullInt64
		if err := row.Scan(&seq, &r.Source, &r.Engine, &r.Version, &started, &interval,
			&o.Location, &o.Path, &o.Device, &o.Attribution, &o.Op, &count, &bytes, &t, &o.NotMeasured); err != nil {
			return r, err
		}
		r.Sequence, r.StartedAt, r.Interval = uint64(seq), fromUnixNano(started), time.Duration(interval)
		o.MountPoint, o.Count, o.Bytes, o.Measured, o.Time = mountPoint, uint64(count), uint64(bytes), t.Valid, time.Duration(t.Int64)
		r.Ops = []DatabaseOp{o}
		return r, nil
	})
	if err != nil {
		return nil, err
	}
	var out []DatabaseRun
	for _, r := range rows {
		if n := len(out); n > 0 && out[n-1].Sequence == r.Sequence {
			out[n-1].Ops = append(out[n-1].Ops, r.Ops...)
			continue
		}
		out = append(out, r)
	}
	return out, nil
}
