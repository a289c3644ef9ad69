-- The slow member (issue 25, section 3): the kernel's own per-member
-- block-I/O accounting that agents send (Record.member_io), and the
-- server's sibling judge's state (internal/server/members). Migration 30,
-- before it, is a Go one (migrate_records_kind.go): records.kind takes any
-- kind ingest knows, so these records can be stored.
--
--   member_io          one row per member and interval: the group it
--                      belongs to (its device and kind, the mount points on
--                      it, newline-separated), the member's identity
--                      (device, /dev/disk/by-id names newline-separated,
--                      serial), its md state flags (comma-separated) and
--                      its counter deltas. Pruned with its record
--                      (retention) once the judge has read it.
--   member_states      one row per member of a group the judge has seen:
--                      its identity as last reported, whether it is slow
--                      (since when, in which direction, its await and
--                      utilisation beside its siblings', the ratio) and
--                      the streaks the judge's sustain and hysteresis
--                      count. A member not reported for a while is
--                      removed by the judge.
--   inventory_members  per volume with a slow member below it, the slow
--                      members as the inventory API shows them (a JSON
--                      array), rewritten by the judge's pass for its
--                      agents; joined to the volume rows like
--                      inventory_baseline.
--   member_watermarks  per agent, the last server sequence whose member
--                      I/O the judge has read (retention keeps a
--                      member-io record until then).
-- Same conventions as 00001.

-- +goose Up
CREATE TABLE member_io (
    agent_id      TEXT NOT NULL,
    sequence      BIGINT NOT NULL,
    group_device  TEXT NOT NULL CHECK (group_device <> ''),
    device        TEXT NOT NULL CHECK (device <> ''),
    group_kind    TEXT NOT NULL CHECK (group_kind <> ''),
    mount_points  TEXT NOT NULL,
    by_id         TEXT NOT NULL,
    serial        TEXT NOT NULL,
    state         TEXT NOT NULL,
    started_ns    BIGINT NOT NULL,
    interval_ns   BIGINT NOT NULL CHECK (interval_ns > 0),
    reads         BIGINT NOT NULL CHECK (reads >= 0),
    read_time_ms  BIGINT NOT NULL CHECK (read_time_ms >= 0),
    writes        BIGINT NOT NULL CHECK (writes >= 0),
    write_time_ms BIGINT NOT NULL CHECK (write_time_ms >= 0),
    read_sectors  BIGINT NOT NULL CHECK (read_sectors >= 0),
    write_sectors BIGINT NOT NULL CHECK (write_sectors >= 0),
    io_time_ms    BIGINT NOT NULL CHECK (io_time_ms >= 0),
    PRIMARY KEY (agent_id, sequence, group_device, device)
);
CREATE TABLE member_states (
    agent_id               TEXT NOT NULL,
    group_device           TEXT NOT NULL,
    device                 TEXT NOT NULL,
    group_kind             TEXT NOT NULL,
    mount_points           TEXT NOT NULL,
    by_id                  TEXT NOT NULL,
    serial                 TEXT NOT NULL,
    slow                   BOOLEAN NOT NULL,
    since_ns               BIGINT NOT NULL,
    direction              TEXT NOT NULL,
    ratio                  DOUBLE PRECISION NOT NULL,
    await_seconds          DOUBLE PRECISION NOT NULL,
    siblings_await_seconds DOUBLE PRECISION NOT NULL,
    utilisation            DOUBLE PRECISION NOT NULL,
    siblings_utilisation   DOUBLE PRECISION NOT NULL,
    beyond                 INTEGER NOT NULL CHECK (beyond >= 0),
    normal                 INTEGER NOT NULL CHECK (normal >= 0),
    streak_ns              BIGINT NOT NULL,
    last_ns                BIGINT NOT NULL,
    PRIMARY KEY (agent_id, group_device, device)
);
CREATE INDEX member_states_slow ON member_states (agent_id, group_device, device) WHERE slow;
CREATE TABLE inventory_members (
    agent_id     TEXT NOT NULL,
    mount_point  TEXT NOT NULL,
    slow_members TEXT NOT NULL,
    PRIMARY KEY (agent_id, mount_point)
);
CREATE TABLE member_watermarks (
    agent_id       TEXT PRIMARY KEY,
    judged_through BIGINT NOT NULL CHECK (judged_through >= 0)
);

-- +goose Down
DROP TABLE member_watermarks;
DROP TABLE inventory_members;
DROP TABLE member_states;
DROP TABLE member_io;
