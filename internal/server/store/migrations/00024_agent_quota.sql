-- Per-agent quotas (internal/server/store/quota.go): what one identity may store
-- in a day, and what it sent that was refused.
--
--   quota_day        the UTC day (days since 1970-01-01) quota_day_bytes
--                    counts; a batch on a later day starts a new count.
--   quota_day_bytes  the bytes the agent's records cost that day (the
--                    serialised record, its rejection reason and a fixed
--                    cost per row).
--   records_rejected the records the server refused (rejected records are
--                    kept as a sequence and a short reason only).
--   quota_refusals   the batches refused because the agent was over its
--                    storage or record-rate quota (nothing of them stored;
--                    the agent keeps them and retries).

-- +goose Up
ALTER TABLE agents ADD COLUMN quota_day BIGINT NOT NULL DEFAULT 0;
ALTER TABLE agents ADD COLUMN quota_day_bytes BIGINT NOT NULL DEFAULT 0;
ALTER TABLE agents ADD COLUMN records_rejected BIGINT NOT NULL DEFAULT 0;
ALTER TABLE agents ADD COLUMN quota_refusals BIGINT NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE agents DROP COLUMN quota_refusals;
ALTER TABLE agents DROP COLUMN records_rejected;
ALTER TABLE agents DROP COLUMN quota_day_bytes;
ALTER TABLE agents DROP COLUMN quota_day;
