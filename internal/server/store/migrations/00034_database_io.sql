-- A database's own I/O statistics (plumbline.v1.DatabaseIO), one row per
-- operation of each counter set of an interval, under the record's server
-- sequence:
--
--   database_io          the interval (source, engine, version, start,
--                        length), the location of the files and the
--                        volume holding them (mount_point empty: not
--                        attributed, attribution says why), the operation
--                        and its deltas. time_ns is NULL when the
--                        database did not time the operations
--                        (not_measured says why): never 0 for "unknown".
--   database_watermarks  how far the evaluator has judged each agent's
--                        database intervals (server sequence).
--   database_states      the evaluator's judgement of each volume,
--                        source and operation: its detector, the last
--                        interval's latency and rate, the history's
--                        median, the status (learning, ok, degraded, or
--                        not-measured with the database's reason).
--   inventory_database   each volume's database state, with the
--                        attribution of a regression (device,
--                        load-or-database, throttle) and its numbers.
--
-- Same conventions as 00001.

-- +goose Up
CREATE TABLE database_io (
    agent_id     TEXT NOT NULL,
    sequence     BIGINT NOT NULL,
    ordinal      INTEGER NOT NULL,
    source       TEXT NOT NULL,
    engine       TEXT NOT NULL,
    version      TEXT NOT NULL,
    started_ns   BIGINT NOT NULL,
    interval_ns  BIGINT NOT NULL CHECK (interval_ns > 0),
    location     TEXT NOT NULL,
    path         TEXT NOT NULL,
    mount_point  TEXT NOT NULL,
    device       TEXT NOT NULL,
    attribution  TEXT NOT NULL,
    op           TEXT NOT NULL,
    count        BIGINT NOT NULL CHECK (count >= 0),
    bytes        BIGINT NOT NULL CHECK (bytes >= 0),
    time_ns      BIGINT CHECK (time_ns >= 0),
    not_measured TEXT NOT NULL,
    PRIMARY KEY (agent_id, sequence, ordinal)
);
CREATE INDEX database_io_volume ON database_io (agent_id, mount_point, started_ns);
CREATE TABLE database_watermarks (
    agent_id          TEXT PRIMARY KEY,
    evaluated_through BIGINT NOT NULL
);
CREATE TABLE database_states (
    agent_id       TEXT NOT NULL,
    mount_point    TEXT NOT NULL,
    source         TEXT NOT NULL,
    op             TEXT NOT NULL,
    engine         TEXT NOT NULL,
    detector       BYTEA NOT NULL,
    status         TEXT NOT NULL,
    ratio          DOUBLE PRECISION NOT NULL,
    since_ns       BIGINT NOT NULL,
    history_median DOUBLE PRECISION NOT NULL,
    latency        DOUBLE PRECISION NOT NULL,
    ops_rate       DOUBLE PRECISION NOT NULL,
    bytes_rate     DOUBLE PRECISION NOT NULL,
    not_measured   TEXT NOT NULL,
    last_ns        BIGINT NOT NULL,
    intervals      BIGINT NOT NULL,
    PRIMARY KEY (agent_id, mount_point, source, op)
);
CREATE TABLE inventory_database (
    agent_id    TEXT NOT NULL,
    mount_point TEXT NOT NULL,
    state       TEXT NOT NULL,
    attribution TEXT NOT NULL,
    reason      TEXT NOT NULL,
    updated_ns  BIGINT NOT NULL,
    PRIMARY KEY (agent_id, mount_point)
);

-- +goose Down
DROP TABLE inventory_database;
DROP TABLE database_states;
DROP TABLE database_watermarks;
DROP INDEX database_io_volume;
DROP TABLE database_io;
