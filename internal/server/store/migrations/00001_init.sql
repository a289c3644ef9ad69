-- Plumbline's schema. One text for both engines (SQLite and PostgreSQL):
--   - times are BIGINT Unix nanoseconds (UTC), 0 when unknown;
--   - BYTEA holds serialised protobuf messages (SQLite stores the blob as
--     is under any declared type);
--   - BOOLEAN is a real boolean in PostgreSQL and 0/1 in SQLite;
--   - keys are natural keys, so no engine-specific auto-increment.

-- +goose Up
CREATE TABLE agents (
    agent_id      TEXT PRIMARY KEY,
    hostname      TEXT NOT NULL,
    os            TEXT NOT NULL,
    kernel        TEXT NOT NULL,
    machine_id    TEXT NOT NULL,
    agent_version TEXT NOT NULL,
    first_seen_ns BIGINT NOT NULL,
    last_seen_ns  BIGINT NOT NULL,
    -- The dedup high-water mark: every sequence 1..high_water of this agent
    -- is settled (a row in records, or declared dropped by the agent).
    -- Maintained by the store under this row's lock.
    high_water    BIGINT NOT NULL DEFAULT 0 CHECK (high_water >= 0)
);

-- Every record an agent sent, as received. The primary key is the dedup:
-- a replayed (agent, sequence) is never stored twice, whichever server
-- replica receives it.
CREATE TABLE records (
    agent_id    TEXT NOT NULL REFERENCES agents (agent_id),
    sequence    BIGINT NOT NULL CHECK (sequence >= 1),
    -- geometry, probe, or rejected (the server refused it; reason says why).
    kind        TEXT NOT NULL CHECK (kind IN ('geometry', 'probe', 'rejected')),
    produced_ns BIGINT NOT NULL,
    received_ns BIGINT NOT NULL,
    -- The plumbline.v1.Record as received.
    payload     BYTEA NOT NULL,
    reason      TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (agent_id, sequence)
);

-- The latest geometry of every volume, with the server's own alignment
-- verdict broken out for queries.
CREATE TABLE volumes (
    agent_id           TEXT NOT NULL REFERENCES agents (agent_id),
    mount_point        TEXT NOT NULL,
    device             TEXT NOT NULL,
    fs_type            TEXT NOT NULL,
    -- The record that last set this row; an older record never overwrites it.
    sequence           BIGINT NOT NULL,
    observed_ns        BIGINT NOT NULL,
    -- False once a newer full snapshot of the host no longer lists the volume.
    present            BOOLEAN NOT NULL,
    -- plumbline.v1.Volume (layers, file system, the server's Alignment).
    geometry           BYTEA NOT NULL,
    verdict            TEXT NOT NULL CHECK (verdict IN ('aligned', 'misaligned', 'unknown')),
    data_offset_bytes  BIGINT,
    stripe_unit_bytes  BIGINT NOT NULL,
    split_fraction_8k  DOUBLE PRECISION,
    split_fraction_64k DOUBLE PRECISION,
    PRIMARY KEY (agent_id, mount_point),
    FOREIGN KEY (agent_id, sequence) REFERENCES records (agent_id, sequence)
);
CREATE INDEX volumes_verdict ON volumes (verdict);

-- One row per probe run.
CREATE TABLE probe_results (
    agent_id          TEXT NOT NULL,
    sequence          BIGINT NOT NULL,
    mount_point       TEXT NOT NULL,
    device            TEXT NOT NULL,
    kind              TEXT NOT NULL CHECK (kind IN ('random-read', 'random-write', 'log-write')),
    block_size_bytes  BIGINT NOT NULL CHECK (block_size_bytes > 0),
    queue_depth       BIGINT NOT NULL CHECK (queue_depth > 0),
    started_ns        BIGINT NOT NULL,
    duration_ns       BIGINT NOT NULL CHECK (duration_ns >= 0),
    ops               BIGINT NOT NULL CHECK (ops >= 0),
    errors            BIGINT NOT NULL CHECK (errors >= 0),
    bytes             BIGINT NOT NULL CHECK (bytes >= 0),
    skipped           BOOLEAN NOT NULL,
    stopped_reason    TEXT NOT NULL,
    -- plumbline.v1.Histogram of the operations' latency.
    latency_histogram BYTEA NOT NULL,
    PRIMARY KEY (agent_id, sequence),
    FOREIGN KEY (agent_id, sequence) REFERENCES records (agent_id, sequence)
);
CREATE INDEX probe_results_volume ON probe_results (agent_id, mount_point, kind, started_ns);

-- +goose Down
DROP TABLE probe_results;
DROP TABLE volumes;
DROP TABLE records;
DROP TABLE agents;
