-- Baselines and the exporter's per-volume probe statistics, maintained by
-- the server's evaluator (internal/server/evaluator). Same conventions as 00001.

-- +goose Up
-- How far the evaluator has read each agent's probe results: every probe
-- result of the agent with sequence <= evaluated_through has been judged.
-- The evaluator only reads up to the agent's high_water (where no gap can
-- still be filled), so a record arriving late is never skipped.
CREATE TABLE baseline_watermarks (
    agent_id          TEXT PRIMARY KEY REFERENCES agents (agent_id),
    evaluated_through BIGINT NOT NULL CHECK (evaluated_through >= 0)
);

-- One row per (volume, probe kind): the baseline.Detector state and the
-- outcome of its last run, and cumulative probe statistics.
CREATE TABLE baseline_states (
    agent_id          TEXT NOT NULL REFERENCES agents (agent_id),
    mount_point       TEXT NOT NULL,
    kind              TEXT NOT NULL CHECK (kind IN ('random-read', 'random-write', 'log-write')),
    -- baseline.Profile.Key() when the last run was judged.
    profile           TEXT NOT NULL,
    -- baseline.Detector.MarshalBinary.
    detector          BYTEA NOT NULL,
    -- learning, ok or degraded; the reference (history, cohort, prior or
    -- empty), the ratio against it and since when (Unix ns).
    status            TEXT NOT NULL,
    reference         TEXT NOT NULL,
    ratio             DOUBLE PRECISION NOT NULL,
    since_ns          BIGINT NOT NULL,
    -- The last run's ratio against the history (0: not trusted yet) and
    -- against the cohort or, when the cohort is too small, the prior
    -- (cohort_reference says which; 0 and '' when neither).
    history_ratio     DOUBLE PRECISION NOT NULL,
    cohort_ratio      DOUBLE PRECISION NOT NULL,
    cohort_reference  TEXT NOT NULL,
    -- The history's median (seconds) and whether it is trusted.
    history_median    DOUBLE PRECISION NOT NULL,
    trusted           BOOLEAN NOT NULL,
    -- The last run that completed operations (Unix ns), runs judged.
    last_run_ns       BIGINT NOT NULL,
    runs              BIGINT NOT NULL CHECK (runs >= 0),
    -- plumbline.v1.Histogram: every judged run's latency, merged.
    latency_histogram BYTEA NOT NULL,
    PRIMARY KEY (agent_id, mount_point, kind)
);

-- Probe runs that were skipped or stopped early, per volume, kind and reason
-- (the probe's stopped_reason), counted by the evaluator.
CREATE TABLE probe_stop_counts (
    agent_id    TEXT NOT NULL REFERENCES agents (agent_id),
    mount_point TEXT NOT NULL,
    kind        TEXT NOT NULL,
    reason      TEXT NOT NULL,
    runs        BIGINT NOT NULL CHECK (runs >= 0),
    PRIMARY KEY (agent_id, mount_point, kind, reason)
);

-- The cohort of each profile and kind as the evaluator last computed it.
CREATE TABLE baseline_cohorts (
    profile TEXT NOT NULL,
    kind    TEXT NOT NULL,
    volumes BIGINT NOT NULL,
    median  DOUBLE PRECISION NOT NULL,
    mad     DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (profile, kind)
);

-- +goose Down
DROP TABLE baseline_cohorts;
DROP TABLE probe_stop_counts;
DROP TABLE baseline_states;
DROP TABLE baseline_watermarks;
