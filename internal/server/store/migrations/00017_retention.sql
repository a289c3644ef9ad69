-- Retention (issue 14): the server prunes records older than
-- store.retention (internal/server/store/retention.go).
--
--   agent_incarnations.pruned_through  every agent sequence of the
--                     incarnation up to this one that has no row in
--                     records was pruned (or settled without one): a replay
--                     of it is a duplicate, never stored again. Retention
--                     prunes only settled sequences (<= high_water), so
--                     pruned_through <= high_water.
--   records_received  the pruning's keyset walk over records by age.
--   records_pruned    how many records of each kind were pruned, so that
--                     plumbline_ingest_records_total (stored + pruned)
--                     stays a counter.

-- +goose Up
ALTER TABLE agent_incarnations ADD COLUMN pruned_through BIGINT NOT NULL DEFAULT 0 CHECK (pruned_through >= 0);
CREATE INDEX records_received ON records (received_ns, agent_id, sequence);
CREATE TABLE records_pruned (
    kind   TEXT PRIMARY KEY,
    pruned BIGINT NOT NULL CHECK (pruned >= 0)
);

-- +goose Down
DROP TABLE records_pruned;
DROP INDEX records_received;
ALTER TABLE agent_incarnations DROP COLUMN pruned_through;
