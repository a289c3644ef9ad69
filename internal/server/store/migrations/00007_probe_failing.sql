-- Probe runs that never ran (issue 11 §5): a refused or failed run
-- reaches the server as a probe result with stopped_reason refused, failed
-- or lock-timeout and the agent's message in failure; and the baseline
-- evaluator keeps, per volume and kind, the streak of refused or failed
-- runs since the last run that did I/O:
--
--   probe_results.failure  the agent's message for such a run ('' otherwise).
--   probe_failing          one row per volume and kind whose latest runs
--                          were refused or failed: since_ns is the first
--                          run of the streak, last_ns, reason and failure
--                          the latest; removed when a run does I/O again.
--                          The exporter's
--                          plumbline_probe_failing_since_timestamp_seconds,
--                          which PlumblineProbeFailing reads.

-- +goose Up
ALTER TABLE probe_results ADD COLUMN failure TEXT NOT NULL DEFAULT '';

CREATE TABLE probe_failing (
    agent_id    TEXT NOT NULL,
    mount_point TEXT NOT NULL,
    kind        TEXT NOT NULL,
    reason      TEXT NOT NULL,
    failure     TEXT NOT NULL,
    since_ns    BIGINT NOT NULL,
    last_ns     BIGINT NOT NULL,
    runs        BIGINT NOT NULL,
    PRIMARY KEY (agent_id, mount_point, kind)
);

-- +goose Down
DROP TABLE probe_failing;
ALTER TABLE probe_results DROP COLUMN failure;
