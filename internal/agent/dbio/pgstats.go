package dbio

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/plumbline/plumbline/internal/vocab"
)

// pg_stat_io (16+) summed over backend types and contexts, one row per
// object: relation and temp relation are the data files' I/O, wal (18+)
// the WAL's. PostgreSQL 16 and 17 state sizes as op_bytes per operation;
// 18 states bytes per operation kind (writebacks stay in blocks).
const (
	pgStatIOSums = `coalesce(sum(reads), 0)::int8, coalesce(sum(read_time), 0)::float8,
  coalesce(sum(writes), 0)::int8, coalesce(sum(write_time), 0)::float8,
  coalesce(sum(writebacks), 0)::int8, coalesce(sum(writeback_time), 0)::float8,
  coalesce(sum(extends), 0)::int8, coalesce(sum(extend_time), 0)::float8,
  coalesce(sum(fsyncs), 0)::int8, coalesce(sum(fsync_time), 0)::float8,
  coalesce(max(stats_reset)::text, '')`
	pgStatIO16 = `SELECT object, ` + pgStatIOSums + `,
  coalesce(sum(reads * op_bytes), 0)::int8, coalesce(sum(writes * op_bytes), 0)::int8,
  coalesce(sum(writebacks * op_bytes), 0)::int8, coalesce(sum(extends * op_bytes), 0)::int8
FROM pg_stat_io GROUP BY object ORDER BY object`
	pgStatIO18 = `SELECT object, ` + pgStatIOSums + `,
  coalesce(sum(read_bytes), 0)::int8, coalesce(sum(write_bytes), 0)::int8,
  coalesce(sum(writebacks), 0)::int8 * current_setting('block_size')::int8, coalesce(sum(extend_bytes), 0)::int8
FROM pg_stat_io GROUP BY object ORDER BY object`
)

// pgIORow is one object's row of pgStatIO16/18.
type pgIORow struct {
	object                                             string
	reads, writes, writebacks, extends, fsyncs         int64
	readMS, writeMS, writebackMS, extendMS, fsyncMS    float64
	reset                                              string
	readBytes, writeBytes, writebackBytes, extendBytes int64
}

// pgStatIO reads pg_stat_io into the data and WAL sets; the epoch is the
// latest stats_reset.
func pgStatIO(ctx context.Context, tx pgx.Tx, st pgSettings, data, wal *Set) (string, error) {
	q := pgStatIO16
	if st.versionNum >= 180000 {
		q = pgStatIO18
	}
	rows, err := tx.Query(ctx, q)
	if err != nil {
		return "", fmt.Errorf("pg_stat_io: %w", err)
	}
	defer rows.Close()
	epoch := "io:"
	ioT := timing(st.ioTiming, "track_io_timing")
	walT := timing(st.walTiming, "track_wal_io_timing")
	for rows.Next() {
		var r pgIORow
		if err := rows.Scan(&r.object, &r.reads, &r.readMS, &r.writes, &r.writeMS, &r.writebacks, &r.writebackMS,
			&r.extends, &r.extendMS, &r.fsyncs, &r.fsyncMS, &r.reset, &r.readBytes, &r.writeBytes, &r.writebackBytes, &r.extendBytes); err != nil {
			return "", fmt.Errorf("pg_stat_io: %w", err)
		}
		epoch = max(epoch, "io:"+r.reset)
		switch r.object {
		case "relation", "temp relation":
			add(data, vocab.DBOpRead, counter(r.reads, r.readBytes, r.readMS, ioT))
			add(data, vocab.DBOpWrite, counter(r.writes, r.writeBytes, r.writeMS, ioT))
			add(data, vocab.DBOpWriteback, counter(r.writebacks, r.writebackBytes, r.writebackMS, ioT))
			add(data, vocab.DBOpExtend, counter(r.extends, r.extendBytes, r.extendMS, ioT))
			add(data, vocab.DBOpFsync, counter(r.fsyncs, 0, r.fsyncMS, ioT))
		case "wal":
			add(wal, vocab.DBOpRead, counter(r.reads, r.readBytes, r.readMS, walT))
			add(wal, vocab.DBOpWALWrite, counter(r.writes, r.writeBytes, r.writeMS, walT))
			add(wal, vocab.DBOpWALSync, counter(r.fsyncs, 0, r.fsyncMS, walT))
		}
	}
	if err := rows.Err(); err != nil {
		return "", fmt.Errorf("pg_stat_io: %w", err)
	}
	return epoch, nil
}

// add adds c to set's op (the same op of several objects: one counter).
func add(set *Set, op vocab.DatabaseOp, c Counter) {
	if set.Ops == nil {
		set.Ops = map[vocab.DatabaseOp]Counter{}
	}
	p, ok := set.Ops[op]
	if !ok {
		set.Ops[op] = c
		return
	}
	p.Count += c.Count
	p.Bytes += c.Bytes
	p.TimeNS += c.TimeNS
	set.Ops[op] = p
}

// Before 16: reads and their time from pg_stat_database summed over every
// database (the row of shared objects included), writes from
// pg_stat_bgwriter (checkpointer, background writer and backends) with
// pg_stat_database's write time. The epoch changes with a reset or a
// database created or dropped (the sum is over another set of rows).
const pgStatDatabase = `SELECT coalesce(sum(blks_read), 0)::int8, coalesce(sum(blk_read_time), 0)::float8,
  coalesce(sum(blk_write_time), 0)::float8,
  (SELECT buffers_checkpoint + buffers_clean + buffers_backend FROM pg_stat_bgwriter)::int8,
  'db:' || count(*) || '/' || coalesce(sum(datid::int8), 0) || '/' || coalesce(max(stats_reset)::text, '') ||
  ' bgwriter:' || coalesce((SELECT stats_reset::text FROM pg_stat_bgwriter), '')
FROM pg_stat_database`

func pgStatDatabaseRead(ctx context.Context, tx pgx.Tx, st pgSettings, data *Set) (string, error) {
	var reads, writes int64
	var readMS, writeMS float64
	var epoch string
	if err := tx.QueryRow(ctx, pgStatDatabase).Scan(&reads, &readMS, &writeMS, &writes, &epoch); err != nil {
		return "", fmt.Errorf("pg_stat_database: %w", err)
	}
	t := timing(st.ioTiming, "track_io_timing")
	add(data, vocab.DBOpRead, counter(reads, reads*st.blockSize, readMS, t))
	add(data, vocab.DBOpWrite, counter(writes, writes*st.blockSize, writeMS, t))
	return epoch, nil
}

// pg_stat_wal (14–17): WAL writes and syncs with their times. wal_bytes is
// the WAL generated, not written, so the writes' bytes are not stated.
const pgStatWAL = `SELECT wal_write, wal_write_time, wal_sync, wal_sync_time, 'wal:' || coalesce(stats_reset::text, '') FROM pg_stat_wal`

func pgStatWALRead(ctx context.Context, tx pgx.Tx, st pgSettings, wal *Set) (string, error) {
	var writes, syncs int64
	var writeMS, syncMS float64
	var epoch string
	if err := tx.QueryRow(ctx, pgStatWAL).Scan(&writes, &writeMS, &syncs, &syncMS, &epoch); err != nil {
		return "", fmt.Errorf("pg_stat_wal: %w", err)
	}
	t := timing(st.walTiming, "track_wal_io_timing")
	add(wal, vocab.DBOpWALWrite, counter(writes, 0, writeMS, t))
	add(wal, vocab.DBOpWALSync, counter(syncs, 0, syncMS, t))
	return epoch, nil
}
