-- The inventory API's query tables, derived from volumes, agents and
-- records by the store (store.SyncInventory, store.VolumeHistory); they can
-- be dropped and rebuilt at any time. One text for both engines, as in
-- 00001: times in Unix nanoseconds, BOOLEAN, no auto-increment.
--
-- Every filter and sort column of GET /api/v1/volumes is a NOT NULL column
-- here (an unknown size or fraction is -1), so keyset paging compares plain
-- row values and the narrow rows scan fast (the geometry blobs stay in
-- volumes).

-- +goose Up
CREATE TABLE inventory_volumes (
    -- Stable id of (agent_id, mount_point): 16 hex digits of SHA-256.
    volume_id             TEXT PRIMARY KEY,
    agent_id              TEXT NOT NULL,
    mount_point           TEXT NOT NULL,
    hostname              TEXT NOT NULL,
    -- volumes.sequence this row was derived from.
    sequence              BIGINT NOT NULL,
    observed_ns           BIGINT NOT NULL,
    device                TEXT NOT NULL,
    fs_type               TEXT NOT NULL,
    verdict               TEXT NOT NULL,
    data_offset_bytes     BIGINT NOT NULL,
    stripe_unit_bytes     BIGINT NOT NULL,
    allocation_unit_bytes BIGINT NOT NULL,
    raid_level            TEXT NOT NULL,
    media                 TEXT NOT NULL,
    profile               TEXT NOT NULL,
    split_fraction_8k     DOUBLE PRECISION NOT NULL,
    split_fraction_64k    DOUBLE PRECISION NOT NULL,
    -- Worst finding: severity word (or "none") and rank (critical 3,
    -- warning 2, info 1, none 0).
    severity              TEXT NOT NULL,
    severity_rank         INTEGER NOT NULL,
    findings              INTEGER NOT NULL,
    -- Rule ids of the findings, sorted, comma-separated.
    rules                 TEXT NOT NULL
);
-- The sync's side of the comparison with volumes (covering).
CREATE INDEX inventory_volumes_key ON inventory_volumes (agent_id, mount_point, sequence, hostname, volume_id);
CREATE INDEX inventory_volumes_host ON inventory_volumes (hostname, mount_point, volume_id);
CREATE INDEX inventory_volumes_verdict ON inventory_volumes (verdict, hostname, mount_point, volume_id);
CREATE INDEX inventory_volumes_split ON inventory_volumes (split_fraction_8k, volume_id);
CREATE INDEX inventory_volumes_offset ON inventory_volumes (data_offset_bytes, volume_id);
CREATE INDEX inventory_volumes_profile ON inventory_volumes (profile, volume_id);

-- The findings of each inventory volume, worst first (ordinal 0 is the
-- finding a change ticket leads with).
CREATE TABLE inventory_findings (
    volume_id     TEXT NOT NULL,
    ordinal       INTEGER NOT NULL,
    rule          TEXT NOT NULL,
    severity      TEXT NOT NULL,
    message       TEXT NOT NULL,
    remediation   TEXT NOT NULL,
    PRIMARY KEY (volume_id, ordinal)
);
CREATE INDEX inventory_findings_rule ON inventory_findings (rule, severity, volume_id);

-- The baseline state of a volume as the evaluator last judged it
-- (store.PutBaselineStates).
CREATE TABLE inventory_baseline (
    agent_id    TEXT NOT NULL,
    mount_point TEXT NOT NULL,
    state       TEXT NOT NULL,
    degraded    BOOLEAN NOT NULL,
    reason      TEXT NOT NULL,
    updated_ns  BIGINT NOT NULL,
    PRIMARY KEY (agent_id, mount_point)
);

-- Geometry changes of each volume, derived from the geometry records.
CREATE TABLE inventory_changes (
    agent_id    TEXT NOT NULL,
    mount_point TEXT NOT NULL,
    sequence    BIGINT NOT NULL,
    observed_ns BIGINT NOT NULL,
    field       TEXT NOT NULL,
    kind        TEXT NOT NULL,
    old_value   TEXT NOT NULL,
    new_value   TEXT NOT NULL,
    PRIMARY KEY (agent_id, mount_point, sequence, field)
);
-- How far each agent's geometry records have been read into
-- inventory_changes, and the last state of each volume seen there.
CREATE TABLE inventory_history_state (
    agent_id    TEXT NOT NULL,
    mount_point TEXT NOT NULL,
    sequence    BIGINT NOT NULL,
    state       TEXT NOT NULL,
    PRIMARY KEY (agent_id, mount_point)
);
CREATE TABLE inventory_history_mark (
    agent_id TEXT PRIMARY KEY,
    sequence BIGINT NOT NULL
);

-- The sync compares volumes with inventory_volumes on this covering index
-- instead of reading the geometry blobs' pages.
CREATE INDEX volumes_inventory_sync ON volumes (agent_id, mount_point, sequence, present);
-- Hosts by name, for the hosts endpoints' keyset paging.
CREATE INDEX agents_hostname ON agents (hostname, agent_id);
-- Geometry records received since a time: which agents' volumes the
-- incremental inventory sync compares (partial: probe records, the bulk of
-- the table, are not indexed).
CREATE INDEX records_geometry_received ON records (received_ns, agent_id) WHERE kind = 'geometry';
-- A host's geometry records in order, for the history.
CREATE INDEX records_geometry ON records (agent_id, kind, sequence);

-- +goose Down
DROP INDEX records_geometry;
DROP INDEX records_geometry_received;
DROP INDEX agents_hostname;
DROP INDEX volumes_inventory_sync;
DROP TABLE inventory_history_mark;
DROP TABLE inventory_history_state;
DROP TABLE inventory_changes;
DROP TABLE inventory_baseline;
DROP TABLE inventory_findings;
DROP TABLE inventory_volumes;
