-- The geometry probe (issue 13): stripe-scan runs are stored like every
-- probe result, with their answer.
--
--   probe_results.kind        no longer a CHECK list: ingest validates the
--                             kind against internal/vocab, the one list of
--                             probe kinds, so a new kind needs no migration.
--                             (SQLite cannot drop a CHECK: the table is
--                             rebuilt, on PostgreSQL too, for one schema.)
--   probe_results.stripe_scan the plumbline.v1.StripeScan of a stripe-scan
--                             run; NULL for every other kind.
--   probe_results_stripe_scan the volumes with stripe-scan runs, newest
--                             first: the server derives each volume's
--                             measured stripe from its latest runs when it
--                             judges the volume (nothing else to keep in
--                             step).

-- +goose Up
CREATE TABLE probe_results_new (
    agent_id          TEXT NOT NULL,
    sequence          BIGINT NOT NULL,
    mount_point       TEXT NOT NULL,
    device            TEXT NOT NULL,
    kind              TEXT NOT NULL CHECK (kind <> ''),
    block_size_bytes  BIGINT NOT NULL CHECK (block_size_bytes > 0),
    queue_depth       BIGINT NOT NULL CHECK (queue_depth > 0),
    started_ns        BIGINT NOT NULL,
    duration_ns       BIGINT NOT NULL CHECK (duration_ns >= 0),
    ops               BIGINT NOT NULL CHECK (ops >= 0),
    errors            BIGINT NOT NULL CHECK (errors >= 0),
    bytes             BIGINT NOT NULL CHECK (bytes >= 0),
    skipped           BOOLEAN NOT NULL,
    stopped_reason    TEXT NOT NULL,
    latency_histogram BYTEA NOT NULL,
    failure           TEXT NOT NULL DEFAULT '',
    iops_cap          DOUBLE PRECISION NOT NULL DEFAULT 0,
    stripe_scan       BYTEA,
    PRIMARY KEY (agent_id, sequence),
    FOREIGN KEY (agent_id, sequence) REFERENCES records (agent_id, sequence)
);
INSERT INTO probe_results_new (agent_id, sequence, mount_point, device, kind, block_size_bytes, queue_depth,
    started_ns, duration_ns, ops, errors, bytes, skipped, stopped_reason, latency_histogram, failure, iops_cap)
SELECT agent_id, sequence, mount_point, device, kind, block_size_bytes, queue_depth,
    started_ns, duration_ns, ops, errors, bytes, skipped, stopped_reason, latency_histogram, failure, iops_cap
FROM probe_results;
DROP TABLE probe_results;
ALTER TABLE probe_results_new RENAME TO probe_results;
CREATE INDEX probe_results_volume ON probe_results (agent_id, mount_point, kind, started_ns);
CREATE INDEX probe_results_stripe_scan ON probe_results (agent_id, mount_point, started_ns) WHERE kind = 'stripe-scan';

-- +goose Down
DELETE FROM probe_results WHERE kind NOT IN ('random-read', 'random-write', 'log-write');
CREATE TABLE probe_results_old (
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
    latency_histogram BYTEA NOT NULL,
    failure           TEXT NOT NULL DEFAULT '',
    iops_cap          DOUBLE PRECISION NOT NULL DEFAULT 0,
    PRIMARY KEY (agent_id, sequence),
    FOREIGN KEY (agent_id, sequence) REFERENCES records (agent_id, sequence)
);
INSERT INTO probe_results_old (agent_id, sequence, mount_point, device, kind, block_size_bytes, queue_depth,
    started_ns, duration_ns, ops, errors, bytes, skipped, stopped_reason, latency_histogram, failure, iops_cap)
SELECT agent_id, sequence, mount_point, device, kind, block_size_bytes, queue_depth,
    started_ns, duration_ns, ops, errors, bytes, skipped, stopped_reason, latency_histogram, failure, iops_cap
FROM probe_results;
DROP TABLE probe_results;
ALTER TABLE probe_results_old RENAME TO probe_results;
CREATE INDEX probe_results_volume ON probe_results (agent_id, mount_point, kind, started_ns);
